"""The executor and its file worker seen from a compromised front: boxkite-executor started
here on a channel this test holds, and sent what a front that an attacker controls could send;
then the file worker it starts, on the channel it hands over (event FilesReady).

Asserted: the executor is its own program taking its whole configuration over the channel, once;
nothing before that; a configuration it cannot trust is refused; each order's fields, kind and
descriptors are checked before anything is done (refused with EINVAL, descriptors that came with
a refused order closed); file orders are not the executor's; a packet that is not a canonical
Order ends it rather than being guessed at; and the front going away ends it. The file worker
is the sandbox user with nothing else: no capability, no_new_privs, its seccomp filter, not
dumpable, the sandbox's mount namespace and an empty network namespace; it checks its orders
the same way, and serves files inside the roots only.
"""
import os
import select
import signal
import socket
import subprocess
import sys
import unittest

import bkit

sys.path.insert(0, str(bkit.REPO / "gen" / "python"))
from boxkite.executor import order_pb2 as op  # noqa: E402

EINVAL, ENOENT, EXDEV, EALREADY = 22, 2, 18, 114
GUARD = 20  # seconds: a hang guard on every answer and exit


def setUpModule():
    bkit.require_root()
    bkit.require_build()


class Executor:
    """boxkite-executor on a channel whose other end is self.sock."""

    def __init__(self, tag):
        self.dir = bkit.temp_dir(tag)
        self.log = self.dir / "executor.log"
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(self.log, "wb") as logf:
            def onto_3():
                os.dup2(theirs.fileno(), 3)
            self.proc = subprocess.Popen([str(bkit.EXECUTOR)], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                         env={}, pass_fds=(3,), preexec_fn=onto_3)
        theirs.close()
        bkit.defer(self.stop)
        self.next_id = 1
        self.events = []  # (Reply, fds) that came while waiting for an answer

    def configure(self, **fields):
        c = op.Configure(workspace=str(self.dir / "ws"), home=str(self.dir / "home"), init_path=str(bkit.INIT),
                         sandbox_uid=bkit.SANDBOX_UID, tmp_size=64 << 20, shm_size=32 << 20, exec_memory=256 << 20, exec_pids=64, exec_nofile=256, exec_nproc=4096,
                         exec_fsize=1 << 30, sandbox_memory=1 << 30, sandbox_pids=256, front_uid=65532,
                         roots=[op.Root(path="/workspace"), op.Root(path="/tmp")])
        for k, v in fields.items():
            if k == "roots":
                del c.roots[:]
                c.roots.extend(v)
            else:
                setattr(c, k, v)
        return self.order(configure=c)

    def order(self, fds=(), raw=None, **kind):
        """Send an Order with kind (or raw bytes); the id it got."""
        oid = self.next_id
        self.next_id += 1
        data = raw if raw is not None else op.Order(id=oid, **kind).SerializeToString()
        socket.send_fds(self.sock, [data], list(fds))
        return oid

    def recv(self):
        """The next Reply and the descriptors with it; None at EOF."""
        r, _, _ = select.select([self.sock], [], [], GUARD)
        if not r:
            raise AssertionError(f"no answer from the executor in {GUARD} s; log:\n{self.log_text()}")
        data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 8)
        if not data:
            return None, []
        return op.Reply.FromString(data), fds

    def answer(self, oid):
        """The reply to order oid (events on the way are skipped)."""
        while True:
            reply, fds = self.recv()
            if reply is None:
                raise AssertionError(f"the executor closed its channel; log:\n{self.log_text()}")
            if reply.id == oid:
                return reply, fds
            self.events.append((reply, fds))

    def wait(self):
        try:
            return self.proc.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the executor still runs {GUARD} s on; log:\n{self.log_text()}")

    def log_text(self):
        return self.log.read_text(errors="replace")[-3000:]

    def take_event(self, kind):
        """The first event of kind that came (waiting for it if none did yet): (Reply, fds)."""
        while True:
            for i, (event, fds) in enumerate(self.events):
                if event.WhichOneof("kind") == kind:
                    return self.events.pop(i)
            reply, fds = self.recv()
            if reply is None:
                raise AssertionError(f"the executor closed its channel; log:\n{self.log_text()}")
            self.events.append((reply, fds))

    def stop(self):
        self.sock.close()
        for _, fds in self.events:
            for fd in fds:
                os.close(fd)
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=GUARD)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class BeforeConfigure(unittest.TestCase):
    def test_it_is_its_own_program_with_nothing_but_its_channel(self):
        ex = Executor("exec-self")
        pid = ex.proc.pid
        # Once it waits for its configuration (in poll, system call 7: the loader is done).
        bkit.wait_for(lambda: open(f"/proc/{pid}/syscall").read().split()[0] == "7", GUARD,
                      what="the executor to wait for its configuration")
        self.assertEqual(os.readlink(f"/proc/{pid}/exe"), str(bkit.EXECUTOR))
        self.assertEqual(open(f"/proc/{pid}/environ", "rb").read(), b"", "the executor has an environment")
        fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
        self.assertEqual(fds, [0, 1, 2, 3], "descriptors before its configuration came: " +
                         str({fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds}))

    def test_an_order_before_configure_is_refused_and_it_stops(self):
        ex = Executor("exec-ping-first")
        oid = ex.order(ping=op.Ping())
        reply, _ = ex.answer(oid)
        self.assertEqual(reply.errnum, EINVAL, reply)
        self.assertNotEqual(ex.wait(), 0)

    def test_garbage_first_stops_it_without_an_answer(self):
        ex = Executor("exec-garbage")
        ex.order(raw=b"\xff\xff\xff")
        self.assertEqual(ex.recv(), (None, []))
        self.assertNotEqual(ex.wait(), 0)

    def test_a_configuration_it_cannot_trust_is_refused(self):
        bad = {
            "root as the sandbox user": {"sandbox_uid": 0},
            "a relative workspace": {"workspace": "ws"},
            "a root with ..": {"roots": [op.Root(path="/workspace/../etc")]},
            "no root": {"roots": []},
            "no exec limit": {"exec_pids": 0},
            "a sandbox smaller than an exec": {"sandbox_memory": 1 << 20},
            "root as the front's user": {"front_uid": 0},
            "a relative key file": {"key_file": "key"},
        }
        for what, fields in bad.items():
            with self.subTest(what):
                ex = Executor("exec-badcfg")
                reply, _ = ex.answer(ex.configure(**fields))
                self.assertEqual(reply.errnum, EINVAL, reply)
                self.assertNotEqual(ex.wait(), 0)


class Configured(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ex = Executor("exec-orders")
        reply, _ = cls.ex.answer(cls.ex.configure())
        if reply.errnum or reply.WhichOneof("kind") != "pong" or not reply.pong.sandbox_ready:
            raise AssertionError(f"Configure: {reply}; log:\n{cls.ex.log_text()}")

    def refused(self, fds=(), **kind):
        reply, got = self.ex.answer(self.ex.order(fds=fds, **kind))
        self.assertEqual(got, [])
        self.assertEqual(reply.errnum, EINVAL, reply)
        return reply

    def test_configure_is_taken_once(self):
        reply, _ = self.ex.answer(self.ex.configure(sandbox_uid=4242))
        self.assertEqual(reply.errnum, EALREADY, reply)

    def test_spawn_fields_are_checked(self):
        for what, spawn in {
            "exec id 0": op.Spawn(exec_id=0, argv=["true"], cwd="/workspace"),
            "no argv": op.Spawn(exec_id=5, cwd="/workspace"),
            "a cwd outside the roots": op.Spawn(exec_id=6, argv=["true"], cwd="/etc"),
            "a cwd with ..": op.Spawn(exec_id=7, argv=["true"], cwd="/workspace/../etc"),
            "a malformed environment": op.Spawn(exec_id=8, argv=["true"], cwd="/workspace", env=["NOEQUALS"]),
        }.items():
            with self.subTest(what):
                self.refused(spawn=spawn)

    def test_other_fields_are_checked(self):
        self.refused(kill=op.Kill(exec_id=1, signal=99))

    def test_file_orders_are_not_the_executors(self):
        for order in ({"stat": op.Stat(path="/workspace")}, {"list": op.List(path="/workspace")},
                      {"usage": op.Usage(path="/workspace")}, {"open_read": op.OpenRead(path="/workspace/x")}):
            with self.subTest(order):
                reply = self.refused(**order)
                self.assertIn("not an order this process serves", reply.message)

    def test_descriptors_must_be_the_kinds_own_and_are_closed_when_refused(self):
        r, w = os.pipe()
        try:
            self.refused(fds=[w], ping=op.Ping())
            os.close(w)
            w = -1
            # The executor's copy is closed too: the read end sees EOF.
            self.assertEqual(os.read(r, 1), b"")
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    def test_a_spawn_runs_and_its_exit_is_an_event(self):
        reply, fds = self.ex.answer(self.ex.order(spawn=op.Spawn(exec_id=42, argv=["sh", "-c", "echo hi"],
                                                                 cwd="/workspace",
                                                                 env=["PATH=/usr/bin:/bin"])))
        self.assertEqual((reply.errnum, reply.WhichOneof("kind"), len(fds)), (0, "spawned", 3), reply)
        stdin, out, err = fds
        os.close(stdin)
        self.assertEqual(os.read(out, 100), b"hi\n")
        os.close(out)
        os.close(err)
        while True:
            event, efds = self.ex.recv()
            self.assertIsNotNone(event)
            if event.id == 0 and event.WhichOneof("kind") == "exited":
                break
        self.assertEqual((event.exited.exec_id, event.exited.exit_code, event.exited.signal), (42, 0, 0))

    def test_the_key_file_is_only_the_configured_one(self):
        reply, fds = self.ex.answer(self.ex.order(open_key_file=op.OpenKeyFile()))
        self.assertEqual((reply.errnum, fds), (ENOENT, []), reply)


class FileWorker(unittest.TestCase):
    """The worker the executor starts for its sandbox, driven on the channel it hands over."""

    @classmethod
    def setUpClass(cls):
        cls.ex = Executor("exec-files")
        reply, _ = cls.ex.answer(cls.ex.configure())
        if reply.errnum or not reply.pong.sandbox_ready:
            raise AssertionError(f"Configure: {reply}; log:\n{cls.ex.log_text()}")
        event, fds = cls.ex.take_event("files_ready")
        if len(fds) != 1:
            raise AssertionError(f"FilesReady came with {len(fds)} descriptors")
        cls.sock = socket.socket(fileno=fds[0])
        bkit.defer(cls.sock.close)
        cls.next_id = 1000
        cls.pid = cls.worker_pid()
        cls.workspace = cls.ex.dir / "ws"

    @classmethod
    def worker_pid(cls):
        """The executor's child named bk-files, once it has named itself and served (its uid)."""
        def find():
            for p in bkit.proc_children(cls.ex.proc.pid):
                if bkit.proc_comm(p) == "bk-files" and bkit.proc_uid(p) == bkit.SANDBOX_UID:
                    return p
            return None
        return bkit.wait_for(find, GUARD, what="the file worker")

    def order(self, fds=(), **kind):
        FileWorker.next_id += 1
        oid = FileWorker.next_id
        socket.send_fds(self.sock, [op.Order(id=oid, **kind).SerializeToString()], list(fds))
        r, _, _ = select.select([self.sock], [], [], GUARD)
        self.assertTrue(r, "no answer from the file worker")
        data, got, _, _ = socket.recv_fds(self.sock, 1 << 20, 8)
        reply = op.Reply.FromString(data)
        self.assertEqual(reply.id, oid)
        return reply, got

    def test_it_is_the_sandbox_user_and_nothing_more(self):
        st = bkit.proc_status(self.pid)
        self.assertEqual(st["Uid"].split(), [str(bkit.SANDBOX_UID)] * 4)
        self.assertEqual(st["Gid"].split(), [str(bkit.SANDBOX_UID)] * 4)
        self.assertEqual(st["Groups"].split(), [])
        for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            self.assertEqual(bkit.cap_mask(st, field), 0, field)
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        # Not dumpable: its /proc files are root's, so the uid it shares with sandboxed code
        # cannot open them (nor ptrace it).
        self.assertEqual(os.stat(f"/proc/{self.pid}/mem").st_uid, 0)
        r = bkit.run(["setpriv", f"--reuid={bkit.SANDBOX_UID}", f"--regid={bkit.SANDBOX_UID}", "--clear-groups",
                      "cat", f"/proc/{self.pid}/environ"])
        self.assertNotEqual(r.returncode, 0, "the sandbox user can read the file worker's /proc files")

    def test_its_namespaces(self):
        init = next(p for p in bkit.proc_children(self.ex.proc.pid) if bkit.proc_comm(p) == "boxkite-init")
        self.assertEqual(os.readlink(f"/proc/{self.pid}/ns/mnt"), os.readlink(f"/proc/{init}/ns/mnt"),
                         "not in the sandbox's mount namespace")
        self.assertNotEqual(os.readlink(f"/proc/{self.pid}/ns/net"), os.readlink(f"/proc/{self.ex.proc.pid}/ns/net"),
                            "in the executor's network namespace")
        links = bkit.run(["nsenter", f"--net=/proc/{self.pid}/ns/net", "ip", "-o", "link"]).stdout.split("\n")
        self.assertEqual([line.split(":")[1].strip() for line in links if line], ["lo"])

    def test_only_what_serving_needs_is_open(self):
        targets = sorted(os.readlink(f"/proc/{self.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{self.pid}/fd")
                         if int(fd) > 2)
        self.assertEqual(len([t for t in targets if t.startswith("socket:")]), 1, targets)
        # its channel, /proc/<pid>/fd, the two roots, and what Reset wipes beside them: the home
        # and /dev/shm
        self.assertLessEqual(len(targets), 2 + 2 + 2, targets)

    def test_its_orders_are_checked(self):
        for what, order in {
            "a path outside the roots": {"stat": op.Stat(path="/etc/passwd")},
            "a page token with a slash": {"list": op.List(path="/workspace", after="a/b")},
            "a set-id mode": {"mkdir": op.Mkdir(path="/workspace/d", mode=0o4777)},
            "a rename out of the roots": {"rename": op.Rename(**{"from": "/workspace/a", "to": "/root/a"})},
            "a spawn": {"spawn": op.Spawn(exec_id=9, argv=["true"], cwd="/workspace")},
            "the key file": {"open_key_file": op.OpenKeyFile()},
            "a commit without its file": {"commit": op.Commit(path="/workspace/x")},
            "a symlink without a target": {"symlink": op.Symlink(path="/workspace/l")},
        }.items():
            with self.subTest(what):
                reply, fds = self.order(**order)
                self.assertEqual((reply.errnum, fds), (EINVAL, []), reply)

    def test_it_serves_files_as_the_sandbox_user(self):
        reply, fds = self.order(create_temp=op.CreateTemp(path="/workspace/made.txt"))
        self.assertEqual((reply.errnum, len(fds)), (0, 1), reply)
        os.write(fds[0], b"made by the worker\n")
        reply, _ = self.order(fds=fds, commit=op.Commit(path="/workspace/made.txt", mode=0o640))
        os.close(fds[0])
        self.assertEqual(reply.errnum, 0, reply)
        st = os.stat(self.workspace / "made.txt")
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777), (bkit.SANDBOX_UID, bkit.SANDBOX_UID, 0o640))
        self.assertEqual((self.workspace / "made.txt").read_bytes(), b"made by the worker\n")
        reply, _ = self.order(stat=op.Stat(path="/workspace/made.txt"))
        self.assertEqual((reply.errnum, reply.done.info.size), (0, 19), reply)

    def test_a_symlink_stays_in_its_root_whatever_the_front_checked(self):
        # The front refuses these too; a compromised front would not.
        for target in ("/etc/shadow", "../etc/shadow", "/tmp/x", "d/../../x"):
            with self.subTest(target):
                reply, _ = self.order(symlink=op.Symlink(path="/workspace/out", target=target))
                self.assertEqual(reply.errnum, EXDEV, reply)
                self.assertFalse(os.path.lexists(self.workspace / "out"))
        reply, _ = self.order(symlink=op.Symlink(path="/workspace/in", target="made.txt"))
        self.assertEqual(reply.errnum, 0, reply)
        self.assertEqual(os.readlink(self.workspace / "in"), "made.txt")
        self.assertEqual(os.lstat(self.workspace / "in").st_uid, bkit.SANDBOX_UID)

    def test_it_is_started_again_when_it_dies(self):
        os.kill(self.pid, signal.SIGKILL)
        event, fds = self.ex.take_event("files_ready")
        self.assertEqual(len(fds), 1)
        FileWorker.sock.close()
        FileWorker.sock = socket.socket(fileno=fds[0])
        bkit.defer(FileWorker.sock.close)
        reply, _ = self.order(stat=op.Stat(path="/workspace"))
        self.assertEqual(reply.errnum, 0, reply)
        FileWorker.pid = self.worker_pid()


class Ending(unittest.TestCase):
    def test_a_packet_that_is_not_canonical_ends_it(self):
        for what, raw in {
            "an unknown field": op.Order(id=1, ping=op.Ping()).SerializeToString() + b"\xf8\x06\x01",
            "a NUL inside a path": op.Order(id=1, stat=op.Stat(path="/workspace/a\0/../../etc")).SerializeToString(),
            "order id 0": op.Order(id=0, ping=op.Ping()).SerializeToString(),
        }.items():
            with self.subTest(what):
                ex = Executor("exec-noncanon")
                reply, _ = ex.answer(ex.configure())
                self.assertEqual(reply.errnum, 0, reply)
                ex.order(raw=raw)
                while True:
                    event, fds = ex.recv()
                    if event is None:
                        break
                    self.assertEqual(event.id, 0, f"{what} was answered: {event}")
                self.assertNotEqual(ex.wait(), 0)

    def test_the_front_going_away_ends_it_cleanly(self):
        ex = Executor("exec-eof")
        reply, _ = ex.answer(ex.configure())
        self.assertEqual(reply.errnum, 0, reply)
        ex.sock.close()
        self.assertEqual(ex.wait(), 0)


if __name__ == "__main__":
    unittest.main()
