"""Reset, the warm-pool recycle, and a restarted boxkited leaving nothing of its previous
instance running.

Reset is called through the boxkite package's wire layer (the envelope itself is looked at):
bkctl reset is another part of issue 10. Every test puts tenant state in the sandbox first — commands running, one of
them writing, one holding a file open, directories made 000 and 0555 with files inside, files in
/tmp, /dev/shm and the home — and checks afterwards from the host side (the workspace and home
directories, /proc) as well as from inside.
"""
import os
import secrets
import signal
import stat
import subprocess
import threading
import time
import unittest

import bkit
import boxkite
from boxkite import Detail, Status, wire
from boxkite.v1 import boxkite_pb2 as pb

GUARD = 60  # hang guard for any one wait, never a timing assertion
SANDBOX = bkit.SANDBOX_UID

# What an agent leaves behind: a directory it can neither enter nor list (000) and one it may not
# change (0555), both with files inside, the workspace root itself made 0555, dotfiles in its
# home, files in /tmp and /dev/shm.
LITTER = r"""
set -e
mkdir -p /workspace/locked/deeper /workspace/ro/sub
echo secret > /workspace/locked/deeper/f
echo secret > /workspace/locked/g
echo secret > /workspace/ro/f
echo secret > /workspace/ro/sub/f
chmod 000 /workspace/locked/deeper
chmod 000 /workspace/locked
chmod 0555 /workspace/ro/sub /workspace/ro
echo secret > /workspace/.hidden
: > /workspace/w
echo secret > /tmp/t
mkdir -p /tmp/d && echo secret > /tmp/d/f && chmod 0555 /tmp/d
echo secret > /dev/shm/s
echo secret > "$HOME/.bash_history"
mkdir -p "$HOME/.cache" && echo secret > "$HOME/.cache/c" && chmod 000 "$HOME/.cache"
chmod 0555 /workspace
"""

LIST_ALL = "ls -A /workspace /tmp /dev/shm /home/sandbox"


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def start_daemon(tag, args=()):
    port = bkit.free_tcp_port()
    d = bkit.Daemon(tag, args=args, tcp=("127.0.0.1", port))
    d.start()
    return d


def key_of(d):
    return wire.load_key_file(d.key)


def client(d, key=None, timeout=GUARD, ipc=False):
    """A client of d over tcp://, or over its ipc:// socket."""
    return wire.Channel("ipc://%s" % d.sock if ipc else d.tcp_url, key=key or key_of(d), timeout=timeout)


def reset(d, new_key=None, key=None):
    """Reset as the tenant holding `key` (the daemon's key file by default); the answer is opened
    with new_key when one is installed (it is MAC'd with it). A new key goes over ipc://: a
    server takes none that crossed a network in clear. Returns the Reply."""
    rq = pb.ResetRequest()
    if new_key:
        rq.new_key_id, rq.new_key_secret = new_key.key_id, new_key.secret
    old = client(d, key, timeout=GUARD * 2, ipc=bool(new_key))
    reader = client(d, new_key, ipc=True) if new_key else old
    env = old.seal("Reset", rq)
    try:
        answer = old.exchange(env.SerializeToString())
    finally:
        old.close()
    return reader.open_answer(answer, env, pb.ResetResponse)


def shell(d, script, key=None, timeout_ms=30000):
    with client(d, key) as c:
        r = c.call("Exec", pb.ExecRequest(shell=script, timeout_ms=timeout_ms), pb.ExecResponse)
    return r.message


def sandbox_processes(d):
    """Host pids of the sandbox user's processes below this daemon's executor, but the file
    worker and a local sandbox's init: what the tenant runs."""
    out = []
    for pid in bkit.proc_descendants(d.executor_pid()):
        if bkit.proc_uid(pid) != SANDBOX or not bkit.proc_alive(pid):
            continue
        if bkit.proc_comm(pid) == "bk-files" or bkit.is_sandbox_init(pid):
            continue
        out.append(pid)
    return out


def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def host_entries(directory):
    return sorted(os.listdir(directory))


class ResetTest(unittest.TestCase):
    def setUp(self):
        self.scope = bkit.scope()
        self.scope.__enter__()
        self.addCleanup(self.scope.__exit__, None, None, None)
        self.http = f"http://127.0.0.1:{bkit.free_tcp_port()}"
        self.d = start_daemon("reset", args=["--http-listen", self.http])

    def background(self, *argv):
        """bkctl exec ARGV, left running; its Popen."""
        env = dict(os.environ, BOXKITE_URL=self.d.url, BOXKITE_KEY_FILE=str(self.d.key))
        p = bkit.popen([bkit.BKCTL, "exec", "--timeout", "600", "--", *argv], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        bkit.defer(bkit.stop_process, p, signal.SIGKILL)
        return p

    def litter(self):
        r = shell(self.d, LITTER)
        self.assertEqual(r.exit_code, 0, r.stderr)
        # Running at reset time: a command writing all the time, one holding a file open, one
        # only sleeping, each its own exec tree.
        writer = self.background("sh", "-c", "while :; do echo data >> /workspace/w; done")
        holder = self.background("sh", "-c", "exec 3>/tmp/held; echo x >&3; exec sleep 600")
        sleeper = self.background("sleep", "600")
        bkit.wait_for(lambda: os.path.exists(self.d.workspace / "w") and len(sandbox_processes(self.d)) >= 5,
                      GUARD, what="the three commands to run")
        return [writer, holder, sleeper]

    def start_process(self):
        """A background process (ProcessStart) whose tree daemonizes a grandchild and that reads
        no stdin, and three clients parked on it: a ProcessRead and a ProcessWait long-poll, a
        ProcessWrite it does not take. (process id, the parked calls' threads, their results by
        method)."""
        with client(self.d) as c:
            pid = c.call("ProcessStart", pb.ProcessStartRequest(
                shell="setsid sh -c 'sleep 600' & echo started; exec sleep 600", stdin_open=True),
                pb.ProcessStartResponse).message.process_id
            got = c.call("ProcessRead", pb.ProcessReadRequest(process_id=pid, wait_ms=10000),
                         pb.ProcessReadResponse)
        offset = got.message.stdout.end
        results = {}
        calls = [("ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=offset, wait_ms=60000),
                  pb.ProcessReadResponse),
                 ("ProcessWait", pb.ProcessWaitRequest(process_id=pid, wait_ms=60000), pb.ProcessWaitResponse),
                 # More than its pipe holds: the rest waits for a reader that never comes.
                 ("ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=b"x" * (1 << 20)),
                  pb.ProcessWriteResponse)]

        def park(method, req, resp):
            with client(self.d) as c:
                try:
                    results[method] = c.call(method, req, resp)
                except boxkite.BoxkiteError as e:
                    results[method] = e

        threads = [threading.Thread(target=park, args=call) for call in calls]
        for t in threads:
            t.start()
        return pid, threads, results

    def calls_waiting(self):
        """The server's gauge of parked calls (its metrics)."""
        status, body = bkit.http_get(self.http + "/metrics")
        self.assertEqual(status, 200, body)
        return int(next(line.split()[1] for line in body.splitlines() if line.startswith("boxkite_calls_waiting ")))

    def assert_empty_everywhere(self):
        # From the host: the workspace and the home directory boxkited made for the sandbox.
        self.assertEqual(host_entries(self.d.workspace), [])
        self.assertEqual(host_entries(self.d.dir / "state" / "home"), [])
        # From inside: /tmp and /dev/shm are the sandbox's own tmpfs.
        r = shell(self.d, LIST_ALL)
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual([line for line in r.stdout.decode().splitlines() if line and not line.endswith(":")], [],
                         r.stdout.decode())

    def test_reset_kills_every_command_and_empties_the_sandbox(self):
        commands = self.litter()
        process_id, parked, results = self.start_process()
        bkit.wait_for(lambda: len(sandbox_processes(self.d)) >= 8, GUARD, what="the background process's tree")
        # The three calls parked, beside the three bkctl execs' reads.
        bkit.wait_for(lambda: self.calls_waiting() >= 6, GUARD, what="the calls to wait")
        before = sandbox_processes(self.d)
        r = reset(self.d)
        self.assertTrue(r.verified)
        # The three execs and the background process.
        self.assertEqual(r.message.processes_killed, 4)
        # The calls parked on the process were answered, not left to their 60 s, and as
        # docs/PROTOCOL.md says: ABORTED, the reset's doing — not OK with `signal: 9`, the end its
        # kill made (which a read and a wait were answered before) —, and the process is
        # forgotten.
        for t in parked:
            t.join(GUARD)
            self.assertFalse(t.is_alive())
        for method in ("ProcessRead", "ProcessWait", "ProcessWrite"):
            got = results.get(method)
            self.assertIsInstance(got, boxkite.BoxkiteError, "%s: %s" % (method, got))
            self.assertEqual((got.code, got.message), (Status.ABORTED, "the sandbox was reset"), method)
        with client(self.d) as c:
            self.assertEqual(list(c.call("ProcessList", pb.ProcessListRequest(), pb.ProcessListResponse)
                                  .message.processes), [])
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                c.call("ProcessRead", pb.ProcessReadRequest(process_id=process_id), pb.ProcessReadResponse)
            self.assertEqual(cm.exception.code, Status.NOT_FOUND, cm.exception)
        self.assertGreaterEqual(r.message.entries_removed, 15)
        # Every exec call was answered as killed (bkctl exits 128+9), none is left running.
        for p in commands:
            self.assertEqual(p.wait(timeout=GUARD), 128 + signal.SIGKILL, p.stderr.read())
        self.assertEqual([p for p in before if bkit.proc_alive(p)], [])
        self.assertEqual(sandbox_processes(self.d), [])
        self.assert_empty_everywhere()
        # The workspace root is the sandbox's again (it had made it 0555).
        self.assertEqual(stat.S_IMODE(os.stat(self.d.workspace).st_mode) & 0o700, 0o700)
        # And the sidecar serves the next tenant.
        r = shell(self.d, "echo next > /workspace/n && cat /workspace/n")
        self.assertEqual((r.exit_code, r.stdout), (0, b"next\n"))

    def test_reset_forgets_uploads(self):
        with client(self.d) as c:
            begin = c.call("FileUploadBegin", pb.FileUploadBeginRequest(path="/workspace/up", size=10),
                           pb.FileUploadBeginResponse).message
            reset(self.d)
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                c.call("FileUploadChunk", pb.FileUploadChunkRequest(upload_id=begin.upload_id, offset=0),
                       pb.FileUploadChunkResponse, data=b"0123456789")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND, cm.exception)

    def test_a_request_of_the_last_session_resent_is_refused_not_answered(self):
        with client(self.d) as c:
            env = c.seal("Exec", pb.ExecRequest(shell="echo the last tenant output"))
            raw = env.SerializeToString()
            self.assertEqual(c.open_answer(c.exchange(raw), env, pb.ExecResponse).message.stdout,
                             b"the last tenant output\n")
            # Before the reset, a re-send is answered from the replay cache (nng's re-send)...
            self.assertEqual(c.open_answer(c.exchange(raw), env, pb.ExecResponse).message.stdout,
                             b"the last tenant output\n")
            reset(self.d)
            # ... after it, the answer is gone but the nonce is not: refused, neither answered
            # with the old output nor run again.
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                c.open_answer(c.exchange(raw), env, pb.ExecResponse)
        self.assertEqual((cm.exception.code, cm.exception.detail), (Status.UNAUTHENTICATED, Detail.REPLAYED))

    def test_key_rotation_refuses_the_old_key_also_after_a_restart(self):
        self.litter()
        new_key = wire.Key("tenant-2", secrets.token_bytes(32))
        r = reset(self.d, new_key=new_key)
        # MAC'd with the new key: a client holding only the old one cannot verify it.
        self.assertTrue(r.verified)
        self.assertEqual(r.envelope.key_id, "tenant-2")
        self.assertEqual(r.message.processes_killed, 3)
        self.assert_empty_everywhere_with(new_key)
        tenant_key = self.d.dir / "state" / "tenant-key"
        st = os.stat(tenant_key)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

        old_key = key_of(self.d)

        def old_refused():
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                shell(self.d, "true", key=old_key)
            self.assertEqual(cm.exception.code, Status.UNAUTHENTICATED, cm.exception)

        old_refused()
        self.assertEqual(shell(self.d, "echo hi", key=new_key).stdout, b"hi\n")
        # From here bkctl (the harness's Health) holds the new key; boxkited keeps being
        # started with --key-file naming the old one, which it must not read.
        argv = self.d.argv()
        self.d.argv = lambda: argv
        self.d.key = self.d.dir / "tenant-key"
        self.d.key.write_text("tenant-2 %s\n" % new_key.secret.hex())
        os.chmod(self.d.key, 0o600)
        # SIGHUP reloads the key file: it must not bring the old key back.
        os.kill(self.d.front_pid(), signal.SIGHUP)
        time.sleep(0.5)
        old_refused()
        # A restart keeps the new key and still refuses the old one.
        self.d.stop()
        self.d._front = None
        self.d.start()
        old_refused()
        self.assertEqual(shell(self.d, "echo again", key=new_key).stdout, b"again\n")

    def assert_empty_everywhere_with(self, key):
        self.assertEqual(host_entries(self.d.workspace), [])
        self.assertEqual(host_entries(self.d.dir / "state" / "home"), [])
        r = shell(self.d, LIST_ALL, key=key)
        self.assertEqual([line for line in r.stdout.decode().splitlines() if line and not line.endswith(":")], [])

    def test_bad_new_keys_are_refused_before_anything_happens(self):
        shell(self.d, "echo keep > /workspace/keep")
        for rq in (pb.ResetRequest(new_key_id="k"), pb.ResetRequest(new_key_secret=b"x" * 32),
                   pb.ResetRequest(new_key_id="k", new_key_secret=b"x" * 31),
                   pb.ResetRequest(new_key_id="bad id", new_key_secret=b"x" * 32)):
            with client(self.d) as c, self.assertRaises(boxkite.BoxkiteError) as cm:
                c.call("Reset", rq, pb.ResetResponse)
            self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT, cm.exception)
        self.assertEqual(host_entries(self.d.workspace), ["keep"])

    def test_a_reset_that_cannot_verify_fails_loudly_and_the_sidecar_stops_serving(self):
        # A directory the sandbox user cannot empty: root's, with a file inside (as a mount or an
        # immutable file would be).
        stuck = self.d.workspace / "stuck"
        stuck.mkdir()
        (stuck / "f").write_text("root's\n")
        os.chown(stuck, 0, 0)
        os.chmod(stuck, 0o755)
        bkit.defer(lambda: (stuck / "f").unlink(missing_ok=True))
        self.litter()
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            reset(self.d)
        e = cm.exception
        self.assertTrue(e.verified)
        self.assertEqual(e.code, Status.DATA_LOSS, e)
        self.assertIn("/workspace/stuck", e.message)
        # Everything else went: the commands and what the sandbox user owned.
        self.assertEqual(sandbox_processes(self.d), [])
        self.assertEqual(host_entries(self.d.workspace), ["stuck"])
        # Health says not ready, and why; every other rpc is refused, Reset included.
        with wire.Channel(self.d.tcp_url, timeout=GUARD) as c:
            h = c.call("Health", pb.HealthRequest(), pb.HealthResponse).message
        self.assertFalse(h.sandbox_ready)
        self.assertIn("/workspace/stuck", h.not_ready_reason)
        # The kubelet's readiness probe says so too: no traffic for this pod.
        status, body = bkit.http_get(self.http + "/readyz")[:2]
        self.assertEqual(status, 503, body)
        self.assertIn("a reset failed", str(body))
        for call in (lambda: shell(self.d, "true"), lambda: reset(self.d)):
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                call()
            self.assertEqual(cm.exception.code, Status.FAILED_PRECONDITION, cm.exception)
        with client(self.d) as c, self.assertRaises(boxkite.BoxkiteError) as cm:
            c.call("FileStat", pb.FileStatRequest(path="/workspace"), pb.FileStatResponse)
        self.assertEqual(cm.exception.code, Status.FAILED_PRECONDITION, cm.exception)
        # The executor holds Spawn off too, whatever the front did (no new exec tree exists).
        self.assertEqual(sandbox_processes(self.d), [])


class RestartTest(unittest.TestCase):
    def test_a_killed_and_restarted_boxkited_leaves_no_orphan(self):
        with bkit.scope():
            d = start_daemon("restart")
            env = dict(os.environ, BOXKITE_URL=d.url, BOXKITE_KEY_FILE=str(d.key))
            p = bkit.popen([bkit.BKCTL, "exec", "--timeout", "600", "--", "sh", "-c",
                            "sleep 600 & sleep 600 & setsid sleep 600 & wait"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bkit.defer(bkit.stop_process, p, signal.SIGKILL)
            bkit.wait_for(lambda: len(sandbox_processes(d)) >= 5, GUARD, what="the command's processes")
            # Every process of the sandbox user the old instance made, the sandbox's init and the
            # file worker included, by pid and start time (a pid may be reused).
            old = [(pid, start_time(pid)) for pid in bkit.proc_descendants(d.front_pid())
                   if bkit.proc_uid(pid) == SANDBOX]
            self.assertGreaterEqual(len(old), 6)
            os.kill(d.front_pid(), signal.SIGKILL)
            d.proc.wait(timeout=GUARD)
            d._logf.close()
            d._front = None
            d.start()

            def survivors():
                return [pid for pid, t in old if bkit.proc_alive(pid) and start_time(pid) == t]

            try:
                bkit.wait_for(lambda: not survivors(), GUARD, what="the old instance's processes to be gone")
            except AssertionError:
                self.fail(f"left running by the killed boxkited: {[(p, bkit.proc_cmdline(p)) for p in survivors()]}")
            # The new instance serves.
            self.assertEqual(shell(d, "echo up").stdout, b"up\n")


class PodRestartTest(unittest.TestCase):
    """Pod mode: the execs are in the pod's PID namespace (shareProcessNamespace), where a
    restarted sidecar's executor finds what its previous instance left."""

    def test_a_restarted_pod_sidecar_kills_the_execs_the_last_one_left(self):
        bkit.require_tools("unshare", "nsenter", "setpriv")
        with bkit.scope():
            pod = bkit.Pod(tag="reset-pod")
            d = pod.daemon
            d.start()
            pod.start_container()
            bkit.wait_for(lambda: d.health().get("sandbox_ready") is True, GUARD, what="the sandbox container")
            env = dict(os.environ, BOXKITE_URL=d.url, BOXKITE_KEY_FILE=str(d.key))
            p = bkit.popen([bkit.BKCTL, "exec", "--timeout", "600", "--", "sh", "-c", "sleep 600 & wait"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bkit.defer(bkit.stop_process, p, signal.SIGKILL)
            # An exec init no executor watches, as spawn.c makes them (PID 1 of a PID namespace
            # nested in the pod's, boxkite-init --exec, the sandbox uid): what the executor's
            # PR_SET_PDEATHSIG does not reach (a child killed with it in clone's window).
            status_r, status_w = os.pipe()
            bkit.defer(os.close, status_r)
            orphan = bkit.popen(["nsenter", "-t", str(pod.pause), "-p", "--", "unshare", "--pid", "--fork", "--",
                                 "setpriv", "--reuid", str(SANDBOX), "--regid", str(SANDBOX), "--clear-groups",
                                 "--", bkit.INIT, "--exec", f"--status-fd={status_w}", "--", "sleep", "600"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(status_w,))
            os.close(status_w)
            bkit.defer(bkit.stop_process, orphan, signal.SIGKILL)

            def tenant():
                mine = [pid for pid in bkit.proc_descendants(d.front_pid()) if bkit.proc_uid(pid) == SANDBOX
                        and bkit.proc_comm(pid) == "sleep"]
                left = [pid for pid in bkit.proc_descendants(orphan.pid) if bkit.proc_comm(pid) == "sleep"]
                return (mine, left) if mine and left else None

            mine, left = bkit.wait_for(tenant, GUARD, what="the exec and the orphan to run")
            old = [(pid, start_time(pid)) for pid in bkit.proc_descendants(d.front_pid()) + bkit.proc_descendants(orphan.pid)
                   if bkit.proc_uid(pid) == SANDBOX]
            os.kill(d.front_pid(), signal.SIGKILL)
            # Its client goes with it: a bkctl exec that outlived it would, noticing the dead
            # server, SIGKILL its process by name on whatever answers at the URL — the new
            # instance, whose p1 is the `echo up` below (process ids name one instance's
            # processes). It did, once, under load.
            bkit.stop_process(p, signal.SIGKILL)
            d.proc.wait(timeout=GUARD)
            d._logf.close()
            d._front = None
            d.start()

            def survivors():
                return [pid for pid, t in old if bkit.proc_alive(pid) and start_time(pid) == t]

            try:
                bkit.wait_for(lambda: not survivors(), GUARD, what="what the last sidecar ran to be gone")
            except AssertionError:
                self.fail(f"left running: {[(p, bkit.proc_cmdline(p)) for p in survivors()]}\n{d.log_text()}")
            self.assertIn("killed 1 exec(s) a previous executor left running", d.log_text())
            # The sandbox container itself is not the executor's to kill, and is served again.
            self.assertTrue(bkit.proc_alive(pod.init_pid))
            bkit.wait_for(lambda: d.health().get("sandbox_ready") is True, GUARD, what="the sandbox again")
            r = d.bkctl("exec", "--", "echo", "up")
            self.assertEqual((r.returncode, r.stdout), (0, "up\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()
