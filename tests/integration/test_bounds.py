"""The front's bounds, tried from outside: connections before authentication, the largest
message read, the unauthenticated bytes held in total, and the output buffered for running
execs. Before, 40 connections each sending a 16 MiB message less its last byte raised the front's
memory by 0.4-0.5 GB without a key, and four execs at the output maximum took it to ~1 GB.
"""
import os
import socket
import struct
import threading
import time
import unittest

import bkit

import boxkite
from boxkite import wire
from boxkite.v1 import boxkite_pb2 as pb

MiB = 1 << 20
# server/rpc/methods.h BK_REQUEST_MAX: the largest body of the method table (Exec's, 8 MiB) and every
# other field an Envelope may add (1 KiB): the largest message read.
LARGEST_BODY = 8 * MiB
LARGEST_MESSAGE = LARGEST_BODY + 1024
GUARD = 30


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def sp_connect(addr):
    """A raw nng REQ peer over TCP, past the SP header exchange; None if the server closed it."""
    s = socket.create_connection(addr, timeout=GUARD)
    s.sendall(b"\0SP\0\0\x30\0\0")
    got = b""
    try:
        while len(got) < 8:
            part = s.recv(8 - len(got))
            if not part:
                s.close()
                return None
            got += part
    except ConnectionResetError:
        s.close()
        return None
    return s


def closed_by_peer(s):
    """Whether the server has closed s (EOF or reset), waiting up to GUARD for it."""
    s.settimeout(GUARD)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def answers_health(s):
    """Whether the raw connection s (None: closed during the header exchange) answers an
    unkeyed Health request rather than being closed unanswered."""
    if s is None:
        return False
    raw = wire.Channel("tcp://%s:%d" % s.getpeername()[:2]).seal("Health", pb.HealthRequest()).SerializeToString()
    s.settimeout(GUARD)
    try:
        s.sendall(struct.pack(">QI", len(raw) + 4, 0x80000001) + raw)
        got = b""
        while len(got) < 8:
            part = s.recv(8 - len(got))
            if not part:
                return False
            got += part
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


def front_rss(d):
    return int(bkit.proc_status(d.front_pid())["VmRSS"].split()[0]) * 1024


class Connections(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("bounds-conn", tcp=("127.0.0.1", bkit.free_tcp_port()), args=["--max-connections", "4"])
        cls.d.start()

    def test_connections_past_the_cap_are_closed(self):
        # Five at once against a cap of four: one that boxkited took answers Health, one it
        # refused is closed unanswered. Slots come back as nng reports connections closed, which
        # may lag (the daemon's start-up checks may still hold one), so fewer than four may be
        # taken here, never more.
        socks = [sp_connect(self.d.tcp) for _ in range(5)]
        try:
            answered = [answers_health(s) for s in socks]
            self.assertLessEqual(sum(answered), 4, f"five connections held at once: {answered}")
            self.assertIn("4 connections already", self.d.log_text())
        finally:
            for s in socks:
                if s:
                    s.close()
        # Freed: connections are taken again (a hang guard while nng notices the closes).
        def health():
            with wire.Channel(self.d.tcp_url, timeout=5) as c:
                try:
                    return c.call("Health", pb.HealthRequest(), pb.HealthResponse).message.sandbox_ready
                except boxkite.BoxkiteError:
                    return False
        bkit.wait_for(health, GUARD, interval=0.2, what="Health once the connections closed")


class MessageSize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("bounds-size", tcp=("127.0.0.1", bkit.free_tcp_port()))
        cls.d.start()

    def test_the_largest_legal_message_is_read_and_one_byte_more_is_not(self):
        client = wire.Channel(self.d.tcp_url, key=wire.load_key_file(self.d.key))
        # An Exec whose stdin fills its body to the last KiB: it is read, and run.
        body = pb.ExecRequest(argv=["true"], stdin=b"z" * (LARGEST_BODY - 1024))
        env = client.seal("Exec", body)
        raw = env.SerializeToString()
        self.assertLess(len(raw) + 4, LARGEST_MESSAGE)
        s = sp_connect(self.d.tcp)
        s.sendall(struct.pack(">QI", len(raw) + 4, 0x80000001) + raw)
        s.settimeout(GUARD)
        self.assertEqual(len(s.recv(8)), 8, "no answer to the largest legal request")
        s.close()
        # The length alone says too much: the connection is closed, nothing is allocated.
        s = sp_connect(self.d.tcp)
        s.sendall(struct.pack(">Q", LARGEST_MESSAGE + 1))
        self.assertTrue(closed_by_peer(s), "a message over the largest legal one was being read")
        s.close()


class UnauthenticatedBytes(unittest.TestCase):
    def test_what_connections_without_a_key_can_hold_is_bounded(self):
        # 30 connections, each announcing the largest message and sending all of it but its last
        # byte: at most --max-connections of them are held (the rest are closed), and the front
        # grows by at most that many messages — and the 4 (CLOSING_MAX, server/transport/nng.c)
        # that connections closed to make room for new ones may still hold while nng frees them.
        cap = 8
        d = bkit.Daemon("bounds-bytes", tcp=("127.0.0.1", bkit.free_tcp_port()), args=["--max-connections", str(cap)])
        d.start()
        before = front_rss(d)
        attackers, payload = [], b"A" * (LARGEST_MESSAGE - 1)
        try:
            for _ in range(30):
                s = sp_connect(d.tcp)
                if s is None:
                    continue
                try:
                    s.sendall(struct.pack(">Q", LARGEST_MESSAGE) + payload)
                except (BrokenPipeError, ConnectionResetError):
                    s.close()
                    continue
                attackers.append(s)
            time.sleep(1)  # nng takes what was sent; not an assertion on time
            grown = front_rss(d) - before
            self.assertLessEqual(grown, (cap + 4) * LARGEST_MESSAGE + 32 * MiB,
                                 f"the front grew by {grown >> 20} MiB for {len(attackers)} connections without a key")
            alive = sum(not closed_by_peer_now(s) for s in attackers)
            self.assertLessEqual(alive, cap)
        finally:
            for s in attackers:
                s.close()
        bkit.wait_for(lambda: d.health().get("status") == "OK", GUARD, interval=0.2, what="Health afterwards")


def closed_by_peer_now(s):
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


class OutputBudget(unittest.TestCase):
    def test_execs_past_the_budget_are_refused_and_later_fit(self):
        d = bkit.Daemon("bounds-output", tcp=("127.0.0.1", bkit.free_tcp_port()),
                        args=["--exec-output", "1M", "--exec-output-budget", "3M"])
        d.start()
        key = wire.load_key_file(d.key)
        first = {}

        def run_first():
            with wire.Channel(d.tcp_url, key=key, timeout=GUARD) as c:
                first["reply"] = c.call("Exec", pb.ExecRequest(shell="touch started; sleep 60", timeout_ms=3000),
                                        pb.ExecResponse)

        t = threading.Thread(target=run_first)
        t.start()
        # Running (admitted, its 2 MiB taken) once its command has started.
        bkit.wait_for(lambda: (d.workspace / "started").exists(), GUARD, what="the first exec to run")
        with wire.Channel(d.tcp_url, key=key, timeout=GUARD) as c:
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                c.call("Exec", pb.ExecRequest(argv=["true"]), pb.ExecResponse)
            self.assertEqual(cm.exception.code, 8, cm.exception)  # RESOURCE_EXHAUSTED
            self.assertIn("--exec-output-budget", cm.exception.message)
            # One that asks for little output fits beside it.
            rep = c.call("Exec", pb.ExecRequest(argv=["true"], stdout_limit=100 * 1024, stderr_limit=100 * 1024),
                         pb.ExecResponse)
            self.assertEqual(rep.message.exit_code, 0)
            t.join(GUARD)
            self.assertTrue(first["reply"].message.timed_out)
            # Given back: the same exec fits now.
            rep = c.call("Exec", pb.ExecRequest(argv=["true"]), pb.ExecResponse)
            self.assertEqual(rep.message.exit_code, 0)


if __name__ == "__main__":
    unittest.main()
