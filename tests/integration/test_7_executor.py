"""7. The executor seen from a compromised front: boxkite-executor started here on a channel this
test holds, and sent what a front that an attacker controls could send.

Asserted: it is its own program taking its whole configuration over the channel, once; nothing
before that; a configuration it cannot trust is refused; each order's fields, kind and
descriptors are checked before anything is done (refused with EINVAL, descriptors that came with
a refused order closed); a packet that is not a canonical Order ends it rather than being
guessed at; and the front going away ends it.
"""
import os
import select
import socket
import subprocess
import sys
import unittest

import bkit

sys.path.insert(0, str(bkit.REPO / "gen" / "python"))
from boxkite.executor import order_pb2 as op  # noqa: E402

EINVAL, ENOENT, EALREADY = 22, 2, 114
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

    def configure(self, **fields):
        c = op.Configure(workspace=str(self.dir / "ws"), home=str(self.dir / "home"), init_path=str(bkit.INIT),
                         sandbox_uid=bkit.SANDBOX_UID, tmp_size=64 << 20, shm_size=32 << 20, exec_memory=256 << 20, exec_pids=64, exec_nofile=256, exec_nproc=4096,
                         exec_fsize=1 << 30, roots=[op.Root(path="/workspace"), op.Root(path="/tmp")])
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
            for fd in fds:
                os.close(fd)

    def wait(self):
        try:
            return self.proc.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the executor still runs {GUARD} s on; log:\n{self.log_text()}")

    def log_text(self):
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self):
        self.sock.close()
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
        self.assertEqual(os.readlink(f"/proc/{pid}/exe"), str(bkit.EXECUTOR))
        self.assertEqual(open(f"/proc/{pid}/environ", "rb").read(), b"", "the executor has an environment")
        fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
        self.assertEqual(fds, [0, 1, 2, 3], "descriptors before its configuration came")

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
        self.refused(stat=op.Stat(path="/etc/passwd"))
        self.refused(list=op.List(path="/workspace", after="a/b"))
        self.refused(mkdir=op.Mkdir(path="/workspace/d", mode=0o4777))
        self.refused(rename=op.Rename(**{"from": "/workspace/a", "to": "/root/a"}))

    def test_descriptors_must_be_the_kinds_own_and_are_closed_when_refused(self):
        self.refused(commit=op.Commit(path="/workspace/x"))  # its unnamed file is missing
        r, w = os.pipe()
        try:
            self.refused(fds=[w], stat=op.Stat(path="/workspace"))
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
