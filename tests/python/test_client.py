"""The boxkite package's Client, as an orchestrator uses it, against a real boxkited (local mode, as
root): every transport (tcp://, ipc://, tls+tcp:// with a pinned certificate) and key form; exec,
stream and background processes; whole-file upload and download and the file operations, each
checked on the host side of the workspace; sync; reset with a next tenant's key; the typed
errors; many threads on one client; and a connection the server dropped. Every result is what the
sandbox really did."""

import hashlib
import io
import os
import pickle
import shutil
import signal
import tempfile
import threading
import time
import unittest
from unittest import mock

import boxkited_process

try:
    import boxkite
    from boxkite import Detail, Status, wire
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e

MiB = 1 << 20
UID = 1001
GUARD_S = 60  # hang guard of every wait below: never a timing assertion


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"


def pattern(n, seed=0):
    """n bytes that are not all alike (so that a misplaced block shows)."""
    block = hashlib.sha256(b"%d" % seed).digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


def host_sleeps(marker):
    """Host pids of `sleep MARKER` (seen from outside every namespace)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    if f.read() == b"sleep\0" + marker.encode() + b"\0":
                        found.append(int(name))
            except OSError:
                continue
    return found


def until(what, predicate):
    """Wait for predicate() to hold: a hang guard, not a timing assertion."""
    deadline = time.monotonic() + GUARD_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("never: " + what)
        time.sleep(0.05)


class Base(unittest.TestCase):
    ARGS = ()
    IPC = False

    @classmethod
    def setUpClass(cls):
        cls.daemon = boxkited_process.Boxkited(args=cls.ARGS, ipc=cls.IPC).__enter__()
        cls.box = cls.daemon.client(timeout=GUARD_S)
        until("the sandbox is ready", lambda: cls.box.health().sandbox_ready)

    @classmethod
    def tearDownClass(cls):
        cls.box.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def host(self, rel):
        return os.path.join(self.daemon.workspace, rel)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ConnectTest(Base):
    IPC = True

    def test_every_url_and_key_form_is_served_and_authenticated(self):
        key = wire.load_key_file(self.daemon.key_file)
        forms = [
            dict(url=self.daemon.url, key_file=self.daemon.key_file),
            dict(url=self.daemon.ipc_url, key_file=self.daemon.key_file),
            dict(url=self.daemon.url, key=key),
            dict(url=self.daemon.url, key=key.secret, key_id=key.key_id),
            dict(url=self.daemon.ipc_url, key_file=self.daemon.key_file, key_id=key.key_id),
        ]
        for kw in forms:
            with self.subTest(**{k: str(v) for k, v in kw.items()}), boxkite.Client(**kw) as c:
                self.assertTrue(c.health().authenticated)
                self.assertEqual(c.exec(["id", "-u"]).stdout, b"1001\n")

    def test_without_a_key_only_health_is_served(self):
        with boxkite.Client(self.daemon.url) as c:
            h = c.health()
            self.assertTrue(h.auth_configured)
            self.assertFalse(h.authenticated, "an unkeyed answer is only an indication")
            with self.assertRaises(boxkite.UnauthenticatedError) as cm:
                c.exec("true")
        e = cm.exception
        self.assertEqual((e.code, e.detail, e.verified, e.method), (Status.UNAUTHENTICATED, Detail.UNKNOWN_KEY,
                                                                    False, "Exec"))

    def test_the_wrong_key_is_refused_unverified(self):
        with boxkite.Client(self.daemon.url, key=boxkite.Key.generate("k1")) as c:
            with self.assertRaises(boxkite.UnauthenticatedError) as cm:
                c.exec("true")
        self.assertEqual(cm.exception.detail, Detail.BAD_MAC)
        self.assertFalse(cm.exception.verified, "refused before the key was proven: no MAC")

    def test_what_cannot_work_is_said_before_any_call(self):
        with self.assertRaisesRegex(ValueError, "not a URL"):
            boxkite.Client("127.0.0.1:7700")
        with self.assertRaisesRegex(ValueError, "schemes"):
            boxkite.Client("http://127.0.0.1:7700")
        with self.assertRaisesRegex(ValueError, "certificate to pin"):
            boxkite.Client("tls+tcp://127.0.0.1:7700")
        with self.assertRaisesRegex(ValueError, "key_file or key"):
            boxkite.Client(self.daemon.url, key_file=self.daemon.key_file, key=b"x" * 32)
        with self.assertRaisesRegex(ValueError, "key_id"):
            boxkite.Client(self.daemon.url, key=b"x" * 32)
        with self.assertRaisesRegex(ValueError, "32..64 bytes"):
            boxkite.Client(self.daemon.url, key=b"x" * 31, key_id="k1")
        with self.assertRaisesRegex(ValueError, "has no key 'nope'"):
            boxkite.Client(self.daemon.url, key_file=self.daemon.key_file, key_id="nope")
        loose = os.path.join(self.daemon.dir, "loose-key")
        shutil.copy(self.daemon.key_file, loose)
        os.chmod(loose, 0o644)
        with self.assertRaisesRegex(ValueError, "chmod 600"):
            boxkite.Client(self.daemon.url, key_file=loose)
        # Nothing listens there: the constructor says so, as UNAVAILABLE.
        with self.assertRaises(boxkite.UnavailableError) as cm:
            boxkite.Client("tcp://127.0.0.1:%d" % boxkited_process.free_tcp_port(), timeout=5)
        self.assertIn("cannot connect", cm.exception.message)
        with self.assertRaises(boxkite.UnavailableError):
            boxkite.Client("ipc://" + os.path.join(self.daemon.dir, "no-such.sock"), timeout=5)

    def test_a_closed_client_refuses_calls(self):
        with self.daemon.client() as c:
            c.health()
        with self.assertRaises(boxkite.UnavailableError) as cm:
            c.health()
        self.assertIn("closed", cm.exception.message)

    def test_from_env_reads_what_bkctl_reads(self):
        env = {"BOXKITE_URL": self.daemon.ipc_url, "BOXKITE_KEY_FILE": self.daemon.key_file}
        with mock.patch.dict(os.environ, env), boxkite.Client.from_env() as c:
            self.assertEqual(c.channel.url, self.daemon.ipc_url)
            self.assertTrue(c.health().authenticated)
        with mock.patch.dict(os.environ, env), boxkite.Client.from_env(url=self.daemon.url) as c:
            self.assertEqual(c.channel.url, self.daemon.url)

    def test_one_client_many_threads(self):
        results, errors = {}, []

        def worker(i):
            try:
                for j in range(5):
                    r = self.box.exec(["sh", "-c", "echo $0 $1", str(i), str(j)])
                    results[i, j] = r.stdout
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(GUARD_S)
        self.assertEqual(errors, [])
        self.assertEqual(results, {(i, j): b"%d %d\n" % (i, j) for i in range(16) for j in range(5)})


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ReconnectTest(unittest.TestCase):
    def setUp(self):
        self.daemon = boxkited_process.Boxkited(ipc=True).__enter__()
        self.addCleanup(self.daemon.stop)

    def test_a_connection_the_server_dropped_is_replaced(self):
        # The pooled connection dies with the daemon; the next call's request goes out again on a
        # new connection (as nng's REQ does), and is served by the restarted daemon (on the same
        # socket path: a restart takes another TCP port).
        with self.daemon.client(url=self.daemon.ipc_url, timeout=GUARD_S) as c:
            until("the sandbox is ready", lambda: c.health().sandbox_ready)
            self.assertEqual(c.exec("echo before").stdout, b"before\n")
            self.daemon.restart()
            self.assertTrue(c.health().authenticated, "the dead connection was replaced")
            until("the restarted sandbox is ready", lambda: c.health().sandbox_ready)
            self.assertEqual(c.exec("echo after").stdout, b"after\n")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class TlsTest(unittest.TestCase):
    """tls+tcp:// with the certificate pinned: the one the server presents is the only one taken."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="boxkite-pytest-tls-")
        os.mkdir(os.path.join(cls.dir, "other"))
        cls.cert, key = boxkited_process.tls_files(cls.dir, "bk-ptest")
        cls.other_cert, _ = boxkited_process.tls_files(os.path.join(cls.dir, "other"), "bk-ptest")
        cls.url = "tls+tcp://127.0.0.1:%d" % boxkited_process.free_tcp_port()
        cls.daemon = boxkited_process.Boxkited(args=["--listen", cls.url, "--tls-cert", cls.cert,
                                                     "--tls-key", key]).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_the_pinned_certificate_is_served(self):
        with boxkite.Client(self.url, key_file=self.daemon.key_file, tls_cert=self.cert) as c:
            self.assertTrue(c.health().authenticated)
            self.assertEqual(c.exec("echo over tls").stdout, b"over tls\n")

    def test_another_certificate_of_the_same_name_is_refused(self):
        with self.assertRaises(boxkite.UnavailableError) as cm:
            boxkite.Client(self.url, key_file=self.daemon.key_file, tls_cert=self.other_cert, timeout=10)
        self.assertIn("certificate", cm.exception.message)

    def test_plain_tcp_to_the_tls_port_gets_no_answer(self):
        plain = self.url.replace("tls+tcp", "tcp")
        with self.assertRaises(boxkite.UnavailableError):
            boxkite.Client(plain, key_file=self.daemon.key_file, timeout=5)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ExecTest(Base):
    def test_a_result_with_everything_it_says(self):
        r = self.box.exec('read x; echo "$x $GREETING from $(pwd)"; echo oops >&2; exit 7', stdin="hello\n",
                          env={"GREETING": "world"}, cwd="/tmp")
        self.assertEqual((r.exit_code, r.signal, r.timed_out, r.ok), (7, 0, False, False))
        self.assertEqual((r.stdout, r.stderr), (b"hello world from /tmp\n", b"oops\n"))
        self.assertEqual(r.stdout_text, "hello world from /tmp\n")
        self.assertTrue(r.isolation_profile.startswith("bk1:netns-fresh"), r.isolation_profile)
        self.assertGreater(r.duration_us, 0)
        self.assertEqual(r.describe(), "exited 7")
        # An argv is not a shell line: its words reach the command as they are.
        self.assertEqual(self.box.exec(["printf", "%s|", "a b", "$HOME", ";"]).stdout, b"a b|$HOME|;|")

    def test_a_command_that_fails_is_a_result_and_check_raises(self):
        self.assertEqual(self.box.exec(["no-such-command"]).exit_code, 127)
        with self.assertRaises(boxkite.CommandError) as cm:
            self.box.exec("echo partial; exit 3", check=True)
        self.assertEqual((cm.exception.result.exit_code, cm.exception.result.stdout), (3, b"partial\n"))
        self.assertIn("exited 3", str(cm.exception))
        self.assertTrue(self.box.exec("true", check=True).ok)

    def test_timeout_and_limits(self):
        r = self.box.exec("head -c 100000 /dev/zero; sleep 30", timeout=0.5, stdout_limit=1000)
        self.assertEqual((r.timed_out, r.signal, r.describe()), (True, signal.SIGKILL, "timed out"))
        self.assertEqual((len(r.stdout), r.stdout_truncated, r.stdout_dropped), (1000, True, 99000))

    def test_refusals_are_typed_and_verified(self):
        with self.assertRaises(boxkite.NotFoundError) as cm:
            self.box.exec("true", cwd="/workspace/no/such/dir")
        self.assertTrue(cm.exception.verified)
        self.assertEqual((cm.exception.code, cm.exception.detail), (Status.NOT_FOUND, Detail.NONE))
        with self.assertRaises(boxkite.InvalidArgumentError) as cm:
            self.box.exec("true", env={"1BAD": "x"})
        self.assertIn("'1BAD'", cm.exception.message)
        with self.assertRaises(boxkite.InvalidArgumentError):
            self.box.exec("true", cwd="../etc")
        self.assertIsInstance(cm.exception, boxkite.BoxkiteError)
        # A refusal survives pickling (multiprocessing hands errors between processes so).
        copy = pickle.loads(pickle.dumps(cm.exception))
        self.assertEqual((type(copy), copy.code, copy.message, copy.verified),
                         (boxkite.InvalidArgumentError, Status.INVALID_ARGUMENT, cm.exception.message, True))
        with self.assertRaises(ValueError):
            self.box.exec([])


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class StreamTest(Base):
    def test_output_comes_while_the_command_runs(self):
        # The command waits for a file this test makes only once it has the first line: the line
        # came while it ran, not with its end.
        with self.box.stream("echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 5") as s:
            first = next(s)
            self.assertEqual((first.stream, first.data, first.offset), ("stdout", b"first\n", 0))
            self.box.exec("touch /tmp/go")
            rest = list(s)
        self.assertEqual([(c.stream, c.data) for c in rest], [("stderr", b"second\n")])
        self.assertEqual((s.status.running, s.status.exit_code), (False, 5))
        self.assertNotIn(s.process.id, [p.process_id for p in self.box.processes()], "its record is removed")

    def test_a_large_output_arrives_whole_and_in_order(self):
        got, h = {"stdout": 0, "stderr": b""}, hashlib.sha256()
        for c in self.box.stream("head -c 30000000 /dev/urandom | tee /tmp/big; sha256sum /tmp/big >&2; rm /tmp/big"):
            self.assertEqual(c.lost, 0, "a streamed command loses nothing")
            if c.stream == "stdout":
                self.assertEqual(c.offset, got["stdout"])
                h.update(c.data)
                got["stdout"] += len(c.data)
            else:
                got["stderr"] += c.data
        self.assertEqual(got["stdout"], 30000000)
        self.assertEqual(got["stderr"].split()[0].decode(), h.hexdigest())

    def test_stdin_goes_in_while_the_output_comes_out(self):
        # More input than a pipe holds, to a command that writes as it reads.
        data = pattern(3 * MiB)
        s = self.box.stream("cat | sha256sum", stdin=data)
        out = b"".join(c.data for c in s if c.stream == "stdout")
        self.assertEqual(out.split()[0].decode(), hashlib.sha256(data).hexdigest())
        self.assertEqual(s.status.exit_code, 0)

    def test_stopping_early_kills_the_whole_tree(self):
        marker = "2001.%d" % os.getpid()
        s = self.box.stream("setsid sleep %s & echo started; sleep %s" % (marker, marker))
        self.assertEqual(next(s).data, b"started\n")
        until("both sleeps run", lambda: len(host_sleeps(marker)) == 2)
        pid = s.process.id
        s.close()
        self.assertEqual(host_sleeps(marker), [], "nothing of the tree is left")
        self.assertNotIn(pid, [p.process_id for p in self.box.processes()])
        self.assertIsNone(s.status, "it did not end by itself")

    def test_a_timeout_kills_it_and_says_so(self):
        s = self.box.stream("echo go; sleep 60", timeout=0.5)
        self.assertEqual([c.data for c in s], [b"go\n"])
        self.assertEqual((s.status.runtime_exceeded, s.status.signal), (True, signal.SIGKILL))


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ProcessTest(Base):
    def test_write_read_close_wait(self):
        p = self.box.start("cat; echo done >&2", stdin=True, tag="cat")
        self.assertTrue(p.id and p.isolation_profile.startswith("bk1:"))
        self.assertEqual(p.write("hello "), 6)
        r = p.read(wait=GUARD_S)
        self.assertEqual((r.stdout.data, r.stdout.offset, r.status.running), (b"hello ", 0, True))
        self.assertEqual((p.stdout_offset, p.stderr_offset), (6, 0), "the cursors moved on")
        p.write(b"world")
        p.close_stdin()
        st = p.wait(GUARD_S)
        self.assertEqual((st.running, st.exit_code, st.ok), (False, 0, True))
        r = p.read()
        self.assertEqual((r.stdout.data, r.stderr.data, r.ended), (b"world", b"done\n", True))
        # Offsets given read again what the ring still holds, without losing the place.
        again = p.read(stdout_offset=0, stderr_offset=0)
        self.assertEqual(again.stdout.data, b"hello world")
        info = [i for i in self.box.processes() if i.process_id == p.id][0]
        self.assertEqual((info.tag, info.argv, info.stdout_end, info.status.exit_code),
                         ("cat", ("/bin/sh", "-c", "cat; echo done >&2"), 11, 0))
        p.remove()
        with self.assertRaises(boxkite.NotFoundError):
            p.wait(0)

    def test_follow_yields_both_streams_to_the_end(self):
        p = self.box.start("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.1; done; exit 4")
        chunks = list(p.follow())
        self.assertEqual(b"".join(c.data for c in chunks if c.stream == "stdout"), b"out1\nout2\nout3\n")
        self.assertEqual(b"".join(c.data for c in chunks if c.stream == "stderr"), b"err1\nerr2\nerr3\n")
        self.assertEqual((p.status.running, p.status.exit_code, p.status.describe()), (False, 4, "exited 4"))
        p.remove()

    def test_writes_from_one_thread_while_another_follows(self):
        p = self.box.start(["cat"], stdin=True)
        got = []
        follower = threading.Thread(target=lambda: got.extend(c.data for c in p.follow()))
        follower.start()
        lines = [b"line %03d\n" % i for i in range(200)]
        for line in lines:
            p.write(line)
        p.close_stdin()
        follower.join(GUARD_S)
        self.assertFalse(follower.is_alive())
        self.assertEqual(b"".join(got), b"".join(lines))
        p.remove()

    def test_a_large_write_goes_in_whole(self):
        # 3 MiB: three pieces, each answered once the pipe took it.
        data = pattern(3 * MiB, 1)
        p = self.box.start("sha256sum", stdin=True)
        self.assertEqual(p.write(data, close=True), len(data))
        p.wait(GUARD_S)
        self.assertEqual(p.read().stdout.data.split()[0].decode(), hashlib.sha256(data).hexdigest())
        p.remove()

    def test_signals_kill_after_and_the_context_manager(self):
        p = self.box.start("trap '' TERM; echo ready; while :; do sleep 0.1; done")
        self.assertEqual(p.read(wait=GUARD_S).stdout.data, b"ready\n")
        p.signal(signal.SIGTERM, kill_after=0.3)
        st = p.wait(GUARD_S)
        self.assertEqual((st.running, st.signal, st.describe()), (False, signal.SIGKILL, "was killed by SIGKILL"))
        with self.assertRaises(boxkite.FailedPreconditionError):
            p.signal(signal.SIGTERM)
        p.remove()
        marker = "2002.%d" % os.getpid()
        with self.box.start("setsid sleep %s & exec sleep %s" % (marker, marker)) as q:
            until("both sleeps run", lambda: len(host_sleeps(marker)) == 2)
        self.assertEqual(host_sleeps(marker), [], "leaving the block ended the tree")
        self.assertNotIn(q.id, [i.process_id for i in self.box.processes()])

    def test_a_terminal_resized(self):
        p = self.box.start("stty size; read x; stty size", tty=True, stdin=True, size=(30, 100))
        out, deadline = b"", time.monotonic() + GUARD_S
        while b"30 100" not in out and time.monotonic() < deadline:
            out += p.read(wait=1).stdout.data
        self.assertIn(b"30 100", out)
        p.resize(50, 132)
        p.write("\n")
        self.assertEqual(p.wait(GUARD_S).exit_code, 0)
        out += b"".join(c.data for c in p.follow())
        self.assertIn(b"50 132", out)
        p.remove()
        q = self.box.start(["sleep", "60"])
        with self.assertRaises(boxkite.FailedPreconditionError):
            q.resize(10, 10)
        q.kill()
        q.wait(GUARD_S)
        q.remove()

    def test_a_lease_nobody_renews_kills_it_and_one_renewed_holds(self):
        idle = self.box.start(["sleep", "300"], lease=0.7)
        until("the lease runs out", lambda: not [i for i in self.box.processes() if i.process_id == idle.id][0]
              .status.running)
        st = [i for i in self.box.processes() if i.process_id == idle.id][0].status
        self.assertEqual((st.lease_expired, st.signal), (True, signal.SIGKILL))
        kept = self.box.start("sleep 2; echo done", lease=0.7)
        out = b"".join(c.data for c in kept.follow())  # long-polls: present all along
        self.assertEqual((out, kept.status.lease_expired, kept.status.exit_code), (b"done\n", False, 0))
        for p in (idle, kept):
            p.remove()

    def test_attach_by_id_from_another_client(self):
        p = self.box.start("echo attached; sleep 60")
        with self.daemon.client() as other:
            q = other.process(p.id)
            self.assertEqual(q.read(wait=GUARD_S).stdout.data, b"attached\n")
            q.kill()
            self.assertEqual(q.wait(GUARD_S).signal, signal.SIGKILL)
            q.remove()
        with self.assertRaises(boxkite.NotFoundError):
            p.read()


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class FilesTest(Base):
    # One upload open at a time: an upload left open (not aborted) would refuse the next.
    ARGS = ("--uploads-max", "1")

    def setUp(self):
        for name in os.listdir(self.daemon.workspace):
            path = self.host(name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        self.local = tempfile.mkdtemp(prefix="boxkite-pytest-local-")
        self.addCleanup(shutil.rmtree, self.local, True)

    def read_host(self, rel):
        with open(self.host(rel), "rb") as f:
            return f.read()

    def test_upload_from_bytes_a_file_and_a_stream_and_download_every_way(self):
        data = pattern(9 * MiB + 5)  # three chunks, the last short
        info = self.box.upload(data, "up/bytes.bin", make_parents=True, mode=0o640)
        self.assertEqual((info.path, info.size, info.mode, info.uid, info.type),
                         ("/workspace/up/bytes.bin", len(data), 0o640, UID, boxkite.FileType.REGULAR))
        self.assertEqual(info.content_hash, wire.content_hash(data))
        self.assertEqual(self.read_host("up/bytes.bin"), data)
        st = os.stat(self.host("up/bytes.bin"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (UID, 0o640))
        local = os.path.join(self.local, "src.bin")
        with open(local, "wb") as f:
            f.write(data[:MiB])
        self.box.upload(local, "up/file.bin")
        self.assertEqual(self.read_host("up/file.bin"), data[:MiB])
        self.box.upload(io.BytesIO(b"from a stream"), "up/stream.txt")
        self.assertEqual(self.read_host("up/stream.txt"), b"from a stream")
        # Downloads: the bytes, into a local file, into a file object.
        self.assertEqual(self.box.download("up/bytes.bin"), data)
        dest = os.path.join(self.local, "copy.bin")
        got = self.box.download("up/bytes.bin", dest, sha256=True)
        with open(dest, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual((got.size, got.content_hash, got.sha256),
                         (len(data), wire.content_hash(data), hashlib.sha256(data).digest()))
        buf = io.BytesIO()
        self.box.download("up/stream.txt", buf)
        self.assertEqual(buf.getvalue(), b"from a stream")
        self.assertEqual(self.box.download(self.box.upload(b"", "empty").path), b"")

    def test_progress_and_the_plain_sha256(self):
        data = pattern(10 * MiB, 2)
        seen = []
        self.box.upload(data, "p.bin", sha256=True, progress=lambda done, total: seen.append((done, total)))
        self.assertEqual(seen, [(4 * MiB, len(data)), (8 * MiB, len(data)), (len(data), len(data))])
        seen.clear()
        self.box.download("p.bin", progress=lambda done, total: seen.append((done, total)))
        self.assertEqual(seen[-1], (len(data), len(data)))

    def test_a_failed_upload_or_download_leaves_nothing(self):
        def stop(done, total):
            raise KeyboardInterrupt("stopped by the caller")

        with self.assertRaises(KeyboardInterrupt):
            self.box.upload(pattern(9 * MiB), "half.bin", progress=stop)
        self.assertFalse(os.path.exists(self.host("half.bin")), "no half file")
        # The upload it began was aborted, not left to expire: with --uploads-max 1, the next
        # one would be refused otherwise.
        self.box.upload(b"old", "keep.txt")
        with self.assertRaises(boxkite.AlreadyExistsError):
            self.box.upload(b"new", "keep.txt")
        self.box.upload(b"new", "keep.txt", overwrite=True)
        self.assertEqual(self.read_host("keep.txt"), b"new")
        dest = os.path.join(self.local, "never.bin")
        with self.assertRaises(boxkite.NotFoundError):
            self.box.download("no-such-file", dest)
        self.assertEqual(os.listdir(self.local), [], "no partial local file either")
        with self.assertRaises(boxkite.FailedPreconditionError):
            self.box.download(".")

    def test_ls_stat_mkdir_mv_symlink_rm(self):
        self.box.mkdir("tree/a/b", parents=True, mode=0o750)
        self.box.mkdir("tree/a/b", parents=True)
        with self.assertRaises(boxkite.AlreadyExistsError):
            self.box.mkdir("tree/a/b")
        self.assertEqual(os.stat(self.host("tree/a/b")).st_mode & 0o777, 0o750)
        for name in ("z.txt", "m.txt", "a.txt", "c.txt"):
            self.box.upload(name.encode(), "tree/" + name)
        # Every page, in name order, bare names.
        self.assertEqual([e.name for e in self.box.ls("tree", page_size=2)], ["a", "a.txt", "c.txt", "m.txt", "z.txt"])
        self.assertTrue(self.box.ls("tree")[0].is_dir)
        s = self.box.stat("tree/m.txt")
        self.assertEqual((s.path, s.size, s.is_file, s.uid), ("/workspace/tree/m.txt", 5, True, UID))
        self.assertTrue(self.box.exists("tree/m.txt"))
        self.assertFalse(self.box.exists("tree/nope"))
        with self.assertRaises(boxkite.NotFoundError):
            self.box.stat("tree/nope")
        with self.assertRaises(boxkite.AlreadyExistsError):
            self.box.mv("tree/m.txt", "tree/z.txt")
        self.box.mv("tree/m.txt", "tree/z.txt", overwrite=True)
        self.assertEqual(self.read_host("tree/z.txt"), b"m.txt")
        self.box.symlink("tree/link", "a/b")
        link = self.box.stat("tree/link")
        self.assertEqual((link.is_symlink, link.symlink_target), (True, "a/b"))
        self.assertEqual(os.readlink(self.host("tree/link")), "a/b")
        with self.assertRaises(boxkite.PermissionDeniedError):
            self.box.symlink("tree/out", "../../etc")
        with self.assertRaises(boxkite.FailedPreconditionError):
            self.box.rm("tree")
        # tree, a, a/b, a.txt, c.txt, z.txt, link
        self.assertEqual(self.box.rm("tree", recursive=True), 7)
        self.assertFalse(os.path.exists(self.host("tree")))
        with self.assertRaises(boxkite.InvalidArgumentError):
            self.box.stat("../etc/passwd")

    def test_a_name_that_is_not_utf8(self):
        with open(os.path.join(os.fsencode(self.daemon.workspace), b"caf\xe9"), "wb") as f:
            f.write(b"x")
        [entry] = self.box.ls(".")
        self.assertEqual((entry.path, entry.raw_path), ("caf\\xe9", b"caf\xe9"))


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class SyncTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.store = tempfile.mkdtemp(prefix="boxkite-pytest-store-")
        cls.ARGS = ("--sync-store", "file://" + cls.store)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.store, ignore_errors=True)

    def test_push_list_pull_status(self):
        self.box.upload(pattern(5 * MiB), "proj/data.bin", make_parents=True)
        self.box.upload(b"print('hi')\n", "proj/main.py")
        self.box.upload(b"log", "proj/run.log")
        pushed = self.box.sync.push(snapshot="first", exclude=["*.log"])
        self.assertEqual((pushed.snapshot, pushed.files, pushed.bytes), ("first", 2, 5 * MiB + 12))
        self.assertGreaterEqual(pushed.skipped, 1, "the excluded log")
        status = self.box.sync.status()
        self.assertEqual((status.running, status.operation, status.snapshot, status.status),
                         (False, "push", "first", 0))
        [snap] = self.box.sync.list()
        self.assertEqual((snap.name, snap.files, snap.path), ("first", 2, "/workspace"))
        # Under this key's store prefix (docs/PROTOCOL.md, "Whose snapshots").
        prefix = wire.store_prefix(self.box.channel.key)
        self.assertEqual(os.listdir(self.store), [prefix])
        self.assertEqual(sorted(os.listdir(os.path.join(self.store, prefix, "snapshots"))), ["first"])
        self.box.rm("proj/main.py")
        self.box.upload(b"stray", "proj/stray.txt")
        pulled = self.box.sync.pull(mirror=True)
        self.assertEqual((pulled.snapshot, pulled.files), ("first", 2))
        self.assertEqual(self.box.download("proj/main.py"), b"print('hi')\n")
        self.assertFalse(self.box.exists("proj/stray.txt"), "mirror removed what the snapshot lacks")
        with self.assertRaises(boxkite.AlreadyExistsError):
            self.box.sync.push(snapshot="first")
        with self.assertRaises(boxkite.NotFoundError):
            self.box.sync.pull("no-such-snapshot")
        with self.assertRaises(boxkite.PermissionDeniedError):
            self.box.sync.list("file:///tmp")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ResetTest(unittest.TestCase):
    def setUp(self):
        self.daemon = boxkited_process.Boxkited(ipc=True).__enter__()
        self.addCleanup(self.daemon.stop)
        with self.daemon.client() as c:
            until("the sandbox is ready", lambda: c.health().sandbox_ready)

    def test_reset_empties_the_sandbox_and_kills_its_commands(self):
        marker = "2003.%d" % os.getpid()
        with self.daemon.client() as c:
            c.upload(b"tenant data", "secret.txt")
            c.start("setsid sleep %s & exec sleep %s" % (marker, marker))
            until("the sleeps run", lambda: len(host_sleeps(marker)) == 2)
            r = c.reset()
            self.assertEqual(r.processes_killed, 1)
            self.assertGreaterEqual(r.entries_removed, 1)
            self.assertEqual(host_sleeps(marker), [])
            self.assertEqual(c.ls("."), [])
            self.assertEqual(c.processes(), [])

    def test_a_new_key_never_crosses_plain_tcp(self):
        with self.daemon.client() as c:
            c.upload(b"still here", "kept.txt")
            with self.assertRaises(boxkite.FailedPreconditionError) as cm:
                c.reset(new_key=boxkite.Key.generate("tenant-2"))
            self.assertIn("tls+tcp:// or ipc://", cm.exception.message)
            # Refused here, before anything was sent: nothing was reset, the old key still works.
            self.assertEqual(c.download("kept.txt"), b"still here")

    def test_a_new_key_over_ipc_is_the_only_one_from_then_on(self):
        new = boxkite.Key.generate("tenant-2")
        with self.daemon.client(url=self.daemon.ipc_url) as c:
            c.upload(b"x", "x.txt")
            r = c.reset(new_key=new)
            self.assertEqual(r.entries_removed, 1)
            # This client holds the new key now.
            self.assertEqual(c.channel.key, new)
            self.assertTrue(c.health().authenticated)
            self.assertEqual(c.exec("echo next tenant").stdout, b"next tenant\n")
        with self.daemon.client() as old:
            with self.assertRaises(boxkite.UnauthenticatedError) as cm:
                old.exec("true")
            self.assertEqual(cm.exception.detail, Detail.UNKNOWN_KEY)
        key_file = os.path.join(self.daemon.dir, "next-key")
        new.write_key_file(key_file)
        self.assertEqual(os.stat(key_file).st_mode & 0o777, 0o600)
        self.assertEqual(wire.load_key_file(key_file), new)
        with self.assertRaises(FileExistsError):
            new.write_key_file(key_file)
        with self.daemon.client(key_file=key_file) as c:
            self.assertEqual(c.exec("echo with the saved key").stdout, b"with the saved key\n")


if __name__ == "__main__":
    unittest.main()
