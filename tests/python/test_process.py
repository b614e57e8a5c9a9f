"""Background processes, rpc by rpc through the boxkite package's wire layer (the client's
Process is test_client.py's), against a real boxkited (local mode, as root): rings and offsets,
long-polls, stdin, signals to the whole tree, deadlines, the terminal, the exposed-port
exception, and the limits — each asserted on what the sandbox really did."""

import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import unittest
import urllib.request

import boxkited_process

try:
    import boxkite
    from boxkite import _sp, wire
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"
GUARD_S = 60  # hang guard of every wait below: never a timing assertion


def host_sleeps(marker):
    """Host pids of `sleep MARKER` (seen from outside every namespace)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read() == b"sleep\0" + marker.encode() + b"\0":
                    found.append(int(name))
        except OSError:
            continue
    return found


def proc_stat(pid, field):
    """A numeric field of /proc/PID/status (kB), or of /proc/PID/stat's utime + stime (ticks)
    when field is "cpu"."""
    if field == "cpu":
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


class Parker:
    """Calls sent on one connection of their own, each under a request id of its own, whose answers
    nobody reads until answers(): the server keeps each one it cannot answer yet waiting (parked),
    and queues the answers of the others on the connection. calls: (method, request) pairs."""

    def __init__(self, url, key, calls):
        self.channel = wire.Channel(url, key=key)
        self.conn = _sp.Connection(_sp.parse_url(url), GUARD_S)
        self.sent = []
        for i, (method, req) in enumerate(calls):
            env = self.channel.seal(method, req)
            payload = env.SerializeToString()
            self.conn._sock.sendall(struct.pack(">QI", 4 + len(payload), _sp.REQUEST_ID_BIT | i) + payload)
            self.sent.append(env)

    def answers(self, n):
        """The next n answers, in the order they come, each checked against its request: (index
        of the call, reply)."""
        out = []
        deadline = time.monotonic() + GUARD_S
        for _ in range(n):
            length = struct.unpack(">Q", _sp._recv_exact(self.conn._sock, 8, deadline))[0]
            message = _sp._recv_exact(self.conn._sock, length, deadline)
            i = struct.unpack(">I", message[:4])[0] & ~_sp.REQUEST_ID_BIT
            env = self.sent[i]
            out.append((i, self.channel.open_answer(bytes(message[4:]), env, wire.response_type(env.method))))
        return out

    def close(self):
        self.conn.close()
        self.channel.close()


class Chunk:
    """A StreamChunk with its bytes."""

    def __init__(self, chunk, data):
        self.data, self.offset, self.lost, self.end, self.eof = data, chunk.offset, chunk.lost, chunk.end, chunk.eof


class Read:
    def __init__(self, stdout, stderr, status):
        self.stdout, self.stderr, self.status = stdout, stderr, status


class Base(unittest.TestCase):
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.daemon = boxkited_process.Boxkited(args=cls.ARGS).__enter__()
        cls.key = wire.load_key_file(cls.daemon.key_file)
        cls.client = cls.new_client()

    @classmethod
    def new_client(cls):
        return wire.Channel(cls.daemon.url, key=cls.key, timeout=GUARD_S + 10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def call(self, method, req, resp, client=None):
        reply = (client or self.client).call(method, req, resp)
        self.assertTrue(reply.verified)
        return reply.message

    def start(self, **kw):
        return self.call("ProcessStart", pb.ProcessStartRequest(**kw), pb.ProcessStartResponse).process_id

    def read(self, pid, out=0, err=0, wait_ms=0, max_bytes=0, client=None):
        """ProcessRead, its two streams' bytes taken from the answer's data field."""
        reply = (client or self.client).call(
            "ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=out, stderr_offset=err,
                                                 wait_ms=wait_ms, max_bytes=max_bytes), pb.ProcessReadResponse)
        self.assertTrue(reply.verified)
        m = reply.message
        self.assertEqual(len(reply.data), m.stdout.length + m.stderr.length)
        return Read(Chunk(m.stdout, reply.data[:m.stdout.length]), Chunk(m.stderr, reply.data[m.stdout.length:]),
                    m.status)

    def wait(self, pid, wait_ms=GUARD_S * 1000):
        return self.call("ProcessWait", pb.ProcessWaitRequest(process_id=pid, wait_ms=wait_ms),
                         pb.ProcessWaitResponse).status

    def signal(self, pid, sig, kill_after_ms=0):
        return self.call("ProcessSignal", pb.ProcessSignalRequest(process_id=pid, signal=sig,
                                                                 kill_after_ms=kill_after_ms),
                         pb.ProcessSignalResponse)

    def write(self, pid, data, close=False):
        return self.call("ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=data, close=close),
                         pb.ProcessWriteResponse)

    def status_of(self, pid):
        """The status as ProcessList shows it: a list is not the process's client (no lease)."""
        for p in self.call("ProcessList", pb.ProcessListRequest(), pb.ProcessListResponse).processes:
            if p.process_id == pid:
                return p
        self.fail("%s is not listed" % pid)

    def read_all(self, pid):
        """Both streams to their end, following offsets as a client does; the final status."""
        data, off, deadline = [b"", b""], [0, 0], time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            r = self.read(pid, off[0], off[1], wait_ms=5000)
            for i, chunk in enumerate((r.stdout, r.stderr)):
                self.assertEqual(chunk.lost, 0, "nothing may be lost with the default ring here")
                self.assertEqual(chunk.offset, off[i])
                data[i] += chunk.data
                off[i] += len(chunk.data)
            if r.stdout.eof and r.stderr.eof and not r.status.running:
                return data[0], data[1], r.status
        self.fail("the streams did not end")

    def expect_error(self, code, method, req, resp):
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.client.call(method, req, resp)
        self.assertEqual(cm.exception.code, code, cm.exception)
        return cm.exception


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class StreamsTest(Base):
    def test_output_of_both_streams_and_the_exit(self):
        pid = self.start(shell="echo out; echo err >&2; exit 7")
        out, err, st = self.read_all(pid)
        self.assertEqual((out, err), (b"out\n", b"err\n"))
        self.assertEqual((st.running, st.exit_code, st.signal), (False, 7, 0))

    def test_output_arrives_while_the_process_runs(self):
        # The first line is read while the command still sleeps: streamed, not at the end.
        pid = self.start(shell="echo first; sleep 30; echo never")
        r = self.read(pid, wait_ms=GUARD_S * 1000)
        self.assertEqual(r.stdout.data, b"first\n")
        self.assertTrue(r.status.running, "the line came before the end")
        self.signal(pid, signal.SIGKILL)
        self.assertEqual(self.wait(pid).signal, signal.SIGKILL)

    def test_long_poll_wakes_on_data_and_on_exit(self):
        pid = self.start(shell="sleep 1; printf x; sleep 1")
        r = self.read(pid, wait_ms=GUARD_S * 1000)
        self.assertEqual(r.stdout.data, b"x", "woken by the byte, not by the deadline")
        r = self.read(pid, out=1, wait_ms=GUARD_S * 1000)
        self.assertFalse(r.status.running, "woken by the exit")
        self.assertTrue(r.stdout.eof and r.stderr.eof)
        self.assertEqual(r.stdout.data, b"")

    def test_a_read_that_waits_in_vain_says_so(self):
        pid = self.start(argv=["sleep", "30"])
        r = self.read(pid, wait_ms=300)
        self.assertEqual((r.stdout.data, r.stdout.eof, r.status.running), (b"", False, True))
        self.signal(pid, signal.SIGKILL)
        self.wait(pid)

    def test_offsets_across_the_ring_wrapping(self):
        # 40 000 numbered bytes through a 4 KiB ring, read in pieces while it wraps.
        pid = self.start(shell="i=0; while [ $i -lt 5000 ]; do printf '%07d\\n' $i; i=$((i+1)); done",
                         ring_size=4096)
        self.assertFalse(self.wait(pid).running)
        r = self.read(pid)
        total = 5000 * 8
        self.assertEqual(r.stdout.end, total)
        self.assertEqual(r.stdout.lost, total - 4096, "the reader is told what it missed")
        self.assertEqual(r.stdout.offset, total - 4096, "and where the ring starts now")
        self.assertEqual(len(r.stdout.data), 4096)
        self.assertTrue(r.stdout.eof)
        # The bytes are those of their absolute offsets, never others.
        expected = b"".join(b"%07d\n" % i for i in range(5000))
        self.assertEqual(r.stdout.data, expected[-4096:])
        # A read from inside the ring, in small pieces, lines up with the same offsets.
        off = total - 1000
        got = b""
        while off < total:
            c = self.read(pid, out=off, max_bytes=300).stdout
            self.assertEqual((c.offset, c.lost), (off, 0))
            got += c.data
            off += len(c.data)
        self.assertEqual(got, expected[-1000:])
        self.expect_error(11, "ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=total + 1),
                          pb.ProcessReadResponse)

    def test_read_answers_are_not_kept_for_resends(self):
        # PROTOCOL.md, "Replay and resend": a read's answer carries data and is not kept, even with
        # no bytes in it: its re-send is refused REPLAYED (the client reads again). A wait's is kept.
        pid = self.start(shell="echo x")
        self.wait(pid)
        for offset, data in ((0, b"x\n"), (2, b"")):
            env = self.client.seal("ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=offset))
            raw = env.SerializeToString()
            self.assertEqual(self.client.open_answer(self.client.exchange(raw), env).data, data)
            with self.assertRaises(boxkite.UnauthenticatedError) as cm:
                self.client.open_answer(self.client.exchange(raw), env)
            self.assertEqual((cm.exception.detail, cm.exception.verified), (boxkite.Detail.REPLAYED, True))
        env = self.client.seal("ProcessWait", pb.ProcessWaitRequest(process_id=pid))
        raw = env.SerializeToString()
        self.assertEqual(self.client.exchange(raw), self.client.exchange(raw))

    def test_a_lossless_stream_waits_for_its_reader(self):
        # Nobody reads: once its 4 KiB ring is full (and the pipe's 1 MiB behind it) the
        # process blocks writing instead of losing output; reading lets it go on, and every
        # byte comes, in order.
        pid = self.start(shell="seq -f '%07g' 0 299999; echo done >&2", ring_size=4096, lossless=True)
        time.sleep(1.0)
        st = self.status_of(pid)
        self.assertTrue(st.status.running, "it waits for its reader")
        self.assertEqual(st.stdout_end, 4096)
        out, err, st = self.read_all(pid)
        self.assertEqual(out, b"".join(b"%07d\n" % i for i in range(300000)))
        self.assertEqual((err, st.exit_code), (b"done\n", 0))

    def test_a_large_output_streams_whole(self):
        # Lossless: the output waits for this reader, however slow, through a ring of 64 KiB.
        pid = self.start(shell="head -c 50000000 /dev/urandom | tee /tmp/big; sha256sum /tmp/big >&2; rm /tmp/big",
                         ring_size=64 << 10, lossless=True)
        import hashlib
        h, off, err, deadline = hashlib.sha256(), 0, b"", time.monotonic() + GUARD_S
        errs = 0
        while time.monotonic() < deadline:
            r = self.read(pid, off, errs, wait_ms=5000, max_bytes=4 << 20)
            self.assertEqual(r.stdout.lost, 0, "a lossless stream loses nothing")
            h.update(r.stdout.data)
            off += len(r.stdout.data)
            err += r.stderr.data
            errs += len(r.stderr.data)
            if r.stdout.eof and r.stderr.eof and not r.status.running:
                break
        self.assertEqual(off, 50000000)
        self.assertEqual(err.split()[0].decode(), h.hexdigest())


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class StdinTest(Base):
    def test_cat_round_trip_with_close(self):
        pid = self.start(argv=["cat"], stdin_open=True)
        self.assertEqual(self.write(pid, b"hello ").written, 6)
        self.assertEqual(self.write(pid, b"world", close=True).written, 5)
        out, err, st = self.read_all(pid)
        self.assertEqual((out, st.exit_code), (b"hello world", 0))

    def test_stdin_larger_than_a_pipe_and_than_exec_takes(self):
        # 12 MiB in 1 MiB writes, each answered once the pipe took it; checked in the sandbox.
        pid = self.start(shell="sha256sum", stdin_open=True)
        import hashlib
        h = hashlib.sha256()
        for i in range(12):
            block = bytes([i]) * (1 << 20)
            h.update(block)
            sent = 0
            while sent < len(block):
                sent += self.write(pid, block[sent:]).written
        self.call("ProcessCloseStdin", pb.ProcessCloseStdinRequest(process_id=pid), pb.ProcessCloseStdinResponse)
        out, _, st = self.read_all(pid)
        self.assertEqual(out.split()[0].decode(), h.hexdigest())

    def test_close_stdin_is_end_of_file(self):
        pid = self.start(shell="wc -c", stdin_open=True)
        self.write(pid, b"12345")
        self.call("ProcessCloseStdin", pb.ProcessCloseStdinRequest(process_id=pid), pb.ProcessCloseStdinResponse)
        self.call("ProcessCloseStdin", pb.ProcessCloseStdinRequest(process_id=pid), pb.ProcessCloseStdinResponse)
        out, _, _ = self.read_all(pid)
        self.assertEqual(out.strip(), b"5")
        e = self.expect_error(9, "ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=b"x"),
                              pb.ProcessWriteResponse)
        self.assertIn("ended", e.message)

    def test_write_without_stdin_open_is_refused(self):
        pid = self.start(argv=["cat"])
        out, _, st = self.read_all(pid)
        self.assertEqual((out, st.exit_code), (b"", 0), "stdin at EOF from the start")
        self.expect_error(9, "ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=b"x"),
                          pb.ProcessWriteResponse)

    def test_a_write_the_process_does_not_take_waits_and_says_what_went_in(self):
        # The process never reads: its pipe takes what it holds and the write waits for the rest
        # (parked); a second write meanwhile is refused; when the process ends, the waiting write
        # is answered with how much of it went in. (Its own 60 s deadline, answered OK with the
        # count, is not waited for here.)
        pid = self.start(argv=["sleep", "300"], stdin_open=True)
        result = {}

        def write():
            try:
                self.call("ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=b"y" * (1 << 20)),
                          pb.ProcessWriteResponse, self.new_client())
                result["answer"] = "OK"
            except boxkite.BoxkiteError as e:
                result["answer"] = e

        t = threading.Thread(target=write)
        t.start()
        time.sleep(0.5)
        self.assertNotIn("answer", result, "the write waits for the pipe")
        self.expect_error(9, "ProcessWrite", pb.ProcessWriteRequest(process_id=pid, data=b"z"),
                          pb.ProcessWriteResponse)
        self.signal(pid, signal.SIGKILL)
        t.join(GUARD_S)
        self.wait(pid)
        self.assertFalse(t.is_alive())
        e = result.get("answer")
        self.assertIsInstance(e, boxkite.BoxkiteError, e)
        self.assertEqual(e.code, 9, e)
        m = re.search(r"\((\d+) of 1048576 bytes written\)", e.message)
        self.assertTrue(m, e.message)
        self.assertTrue(0 < int(m.group(1)) < 1 << 20, e.message)


CATCHER = r"""
import os, signal, sys, time
sigs = [s for s in range(1, 65) if s not in (9, 19, 32, 33)]
role = sys.argv[1]
def handler(s, f):
    with open("/tmp/sig-" + role, "a") as out:
        out.write("%d\n" % s)
for s in sigs:
    signal.signal(s, handler)
if role == "parent":
    if os.fork() == 0:
        os.setsid()  # a daemonized grandchild: another session, still the tree's
        os.execv(sys.executable, [sys.executable, "-c", open("/tmp/catcher.py").read(), "child"])
open("/tmp/ready-" + role, "w").close()
while True:
    time.sleep(1)
"""


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class SignalsTest(Base):
    def exec(self, shell):
        return self.call("Exec", pb.ExecRequest(shell=shell), pb.ExecResponse)

    def test_every_catchable_signal_reaches_the_whole_tree(self):
        # Two processes of one tree (the command and a grandchild in a session of its own) each
        # record what they get; every catchable signal is sent once and must reach both.
        with open(os.path.join(self.daemon.workspace, "catcher.py"), "w") as f:
            f.write(CATCHER)
        pid = self.start(shell="rm -f /tmp/sig-* /tmp/ready-*; cp /workspace/catcher.py /tmp/catcher.py; "
                               "exec python3 /tmp/catcher.py parent")
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            # The tree's /tmp is the sandbox's: an Exec sees it.
            if self.exec("ls /tmp/ready-parent /tmp/ready-child 2>/dev/null | wc -l").stdout.strip() == b"2":
                break
            time.sleep(0.1)
        sigs = [s for s in range(1, 65) if s not in (9, 19, 32, 33)]
        for s in sigs:
            self.signal(pid, s)
            time.sleep(0.02)
        want = sorted(sigs)
        got = {}
        while time.monotonic() < deadline:
            for role in ("parent", "child"):
                r = self.exec("cat /tmp/sig-%s 2>/dev/null" % role)
                got[role] = sorted(int(x) for x in r.stdout.split())
            if got["parent"] == want and got["child"] == want:
                break
            time.sleep(0.2)
        self.signal(pid, signal.SIGKILL)
        self.wait(pid)
        self.assertEqual(got.get("parent"), want)
        self.assertEqual(got.get("child"), want)

    def test_a_signal_right_after_the_start_reaches_the_command(self):
        # ProcessStart answers once the process runs, so a signal sent the moment it answers must
        # reach the command. It did not: the exec's init was answered for as soon as it was
        # executed, before it had blocked the signals it forwards, and the kernel drops a signal
        # sent to a PID namespace's init that neither handles nor blocks it — 3 to 6 of 10
        # `sleep` were still running 3 s after their SIGTERM (none with a 50 ms pause between).
        delivered = []
        for _ in range(100):
            pid = self.start(argv=["sleep", "100"])
            self.signal(pid, signal.SIGTERM)
            st = self.wait(pid, wait_ms=3000)
            if st.running:
                self.signal(pid, signal.SIGKILL)
                self.wait(pid)
            delivered.append(st.signal == signal.SIGTERM)
            self.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=pid), pb.ProcessRemoveResponse)
        self.assertEqual(delivered.count(True), 100, "%d of 100 SIGTERMs reached their command" % delivered.count(True))

    def test_sigstop_and_bad_signals_are_refused(self):
        pid = self.start(argv=["sleep", "300"])
        self.expect_error(3, "ProcessSignal", pb.ProcessSignalRequest(process_id=pid, signal=19),
                          pb.ProcessSignalResponse)
        self.expect_error(3, "ProcessSignal", pb.ProcessSignalRequest(process_id=pid, signal=65),
                          pb.ProcessSignalResponse)
        self.signal(pid, signal.SIGKILL)
        self.wait(pid)
        self.expect_error(9, "ProcessSignal", pb.ProcessSignalRequest(process_id=pid, signal=15),
                          pb.ProcessSignalResponse)

    def test_a_daemonizing_grandchild_dies_on_stop(self):
        marker = "1001.%d" % os.getpid()
        pid = self.start(shell="setsid sh -c 'sleep %s' & sleep %s" % (marker, marker))
        deadline = time.monotonic() + GUARD_S
        while len(host_sleeps(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(len(host_sleeps(marker)), 2)
        self.signal(pid, signal.SIGTERM)
        st = self.wait(pid)
        self.assertFalse(st.running)
        self.assertEqual(host_sleeps(marker), [], "the whole tree is gone")

    def test_a_process_ignoring_sigterm_is_killed_after_the_grace(self):
        pid = self.start(shell="trap '' TERM; while :; do sleep 0.1; done")
        time.sleep(0.3)
        self.signal(pid, signal.SIGTERM, kill_after_ms=500)
        st = self.wait(pid)
        self.assertEqual((st.running, st.signal), (False, signal.SIGKILL))

    def test_runtime_exceeded_kills_the_tree_and_says_so(self):
        marker = "1002.%d" % os.getpid()
        pid = self.start(shell="setsid sleep %s & sleep %s" % (marker, marker), max_runtime_ms=700)
        st = self.wait(pid)
        self.assertEqual((st.running, st.runtime_exceeded, st.signal, st.exit_code),
                         (False, True, signal.SIGKILL, 0))
        self.assertEqual(host_sleeps(marker), [])

    def test_a_lease_nobody_renews_kills_the_process(self):
        pid = self.start(argv=["sleep", "300"], lease_ms=700)
        deadline = time.monotonic() + GUARD_S
        while self.status_of(pid).status.running and time.monotonic() < deadline:
            time.sleep(0.1)
        st = self.status_of(pid).status
        self.assertEqual((st.running, st.lease_expired, st.signal), (False, True, signal.SIGKILL))

    def test_a_lease_renewed_by_long_polls_holds(self):
        pid = self.start(shell="sleep 2; echo done", lease_ms=700)
        out, _, st = self.read_all(pid)  # long-polls of 5 s: present all along
        self.assertEqual((out, st.lease_expired, st.exit_code), (b"done\n", False, 0))

    def test_every_call_for_the_process_renews_its_lease_but_one_refused_for_its_arguments(self):
        # PROTOCOL.md, "Deadlines": one process per kind of call, each renewed by that call alone
        # (one refused for the process's state included), round after round; beside them one given
        # only calls refused for their arguments, which must die of its lease all the same. The
        # renewed ones are looked at once it did: still running.
        def req(method, **kw):
            return getattr(pb, method + "Request")(**kw), getattr(pb, method + "Response")

        size = pb.TerminalSize(rows=10, cols=10)
        calls = {
            "ProcessCloseStdin": lambda pid: self.call("ProcessCloseStdin", *req("ProcessCloseStdin", process_id=pid)),
            "ProcessSignal": lambda pid: self.signal(pid, signal.SIGCONT),
            "ProcessResize (no terminal)": lambda pid: self.expect_error(
                9, "ProcessResize", *req("ProcessResize", process_id=pid, size=size)),
            "ProcessRemove (running)": lambda pid: self.expect_error(
                9, "ProcessRemove", *req("ProcessRemove", process_id=pid)),
            "ProcessWrite (stdin not open)": lambda pid: self.expect_error(
                9, "ProcessWrite", *req("ProcessWrite", process_id=pid, data=b"x")),
        }
        lease_ms = 3000
        renewed = {name: self.start(argv=["sleep", "300"], lease_ms=lease_ms) for name in calls}
        refused = self.start(argv=["sleep", "300"], lease_ms=lease_ms)
        deadline = time.monotonic() + GUARD_S
        while self.status_of(refused).status.running:
            self.assertLess(time.monotonic(), deadline, "calls refused for their arguments kept the lease")
            for name, call in calls.items():
                call(renewed[name])
            self.expect_error(3, "ProcessSignal", *req("ProcessSignal", process_id=refused, signal=65))
            self.expect_error(3, "ProcessRead", *req("ProcessRead", process_id=refused, max_bytes=(4 << 20) + 1))
            self.expect_error(3, "ProcessResize", *req("ProcessResize", process_id=refused))
        self.assertTrue(self.status_of(refused).status.lease_expired)
        for name, pid in renewed.items():
            st = self.status_of(pid).status
            self.assertEqual((st.running, st.lease_expired), (True, False), name)
            self.signal(pid, signal.SIGKILL)
            self.wait(pid)

    def test_oom_is_reported_as_oom(self):
        pid = self.start(argv=["python3", "-c", "b = bytearray(2 << 30); print(len(b))"])
        st = self.wait(pid)
        if not st.oom_killed and st.exit_code == 1:
            self.skipTest("no memory cgroup here: the allocation failed instead (MemoryError)")
        self.assertTrue(st.oom_killed, st)
        self.assertFalse(st.running)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class TerminalTest(Base):
    def read_until(self, pid, off, needle):
        got, deadline = b"", time.monotonic() + GUARD_S
        while needle not in got and time.monotonic() < deadline:
            r = self.read(pid, off + len(got), wait_ms=2000)
            got += r.stdout.data
            if not r.status.running and r.stdout.eof:
                break
        self.assertIn(needle, got)
        return off + len(got), got

    def test_tty_size_resize_and_interrupt(self):
        pid = self.start(shell="tty; stty size; read x; stty size; echo sleeping; exec sleep 300", tty=True,
                         stdin_open=True, size=pb.TerminalSize(rows=30, cols=100))
        off, got = self.read_until(pid, 0, b"30 100")
        self.assertIn(b"/dev/pts/", got, "tty says a terminal")
        self.call("ProcessResize", pb.ProcessResizeRequest(process_id=pid, size=pb.TerminalSize(rows=50, cols=132)),
                  pb.ProcessResizeResponse)
        self.write(pid, b"\n")
        off, got = self.read_until(pid, off, b"50 132")
        # ^C, as typed, once the shell is past stty. The shell then becomes sleep itself (exec):
        # a ^C that reached dash between its fork and the child's exec would be lost to the
        # child and waited out by dash (a shell whose foreground command does not die of the
        # ^C goes on, as dash and bash do) — the shell's race, not the terminal's.
        off, got = self.read_until(pid, off - len(got), b"sleeping")
        self.write(pid, b"\x03")
        st = self.wait(pid)
        self.assertEqual((st.running, st.signal), (False, signal.SIGINT))
        r = self.read(pid, off)
        self.assertTrue(r.stderr.eof and r.stderr.end == 0, "a terminal has one stream")

    def test_an_interactive_shell(self):
        pid = self.start(argv=["bash", "--norc", "-i"], tty=True, stdin_open=True)
        self.write(pid, b"echo $((6*7)); id -u\n")
        off, got = self.read_until(pid, 0, b"42")
        off, got = self.read_until(pid, off - len(got), b"1001")
        self.write(pid, b"exit 5\n")
        self.assertEqual(self.wait(pid).exit_code, 5)

    def test_a_terminal_is_reachable_by_its_own_process_tree_only(self):
        # One devpts for the whole sandbox, its terminals mode 620 and the sandbox user's: a
        # process without a terminal opened another's, read what the operator typed into it,
        # wrote into its output and resized it. Each exec has a devpts of its own now.
        victim = self.start(shell="tty; echo ready; exec cat", tty=True, stdin_open=True)
        off, got = self.read_until(victim, 0, b"ready")
        tty = got.split(b"\n")[0].strip().decode()
        self.assertTrue(tty.startswith("/dev/pts/"), got)
        r = self.call("Exec", pb.ExecRequest(shell=ATTACK % tty), pb.ExecResponse)
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertIn(b"open %s: ENOENT" % tty.encode(), r.stdout)
        self.assertIn(b"pts: ptmx\n", r.stdout, "another exec's terminal is listed")
        # Its own process tree still has it: what is typed reaches the command.
        self.write(victim, b"typed by the operator\n")
        self.read_until(victim, off, b"typed by the operator")
        self.signal(victim, signal.SIGKILL)
        self.wait(victim)

    def test_an_exec_makes_a_bounded_number_of_terminals(self):
        # The devpts of an exec had no max=: one exec opened 400 ptys, and every container's
        # devpts on the node shares the kernel's pty.max.
        r = self.call("Exec", pb.ExecRequest(shell=MANY_PTYS), pb.ExecResponse)
        self.assertEqual(r.exit_code, 0, r.stderr)
        opened, why = r.stdout.decode().split()
        self.assertLessEqual(int(opened), 8)
        self.assertEqual(why, "ENOSPC")

    def test_resize_of_pipes_is_refused(self):
        pid = self.start(argv=["sleep", "300"])
        self.expect_error(9, "ProcessResize", pb.ProcessResizeRequest(process_id=pid, size=pb.TerminalSize(
            rows=10, cols=10)), pb.ProcessResizeResponse)
        self.signal(pid, signal.SIGKILL)
        self.wait(pid)


ATTACK = r"""python3 -c '
import errno, os, sys
print("pts:", " ".join(sorted(os.listdir("/dev/pts"))))
try:
    os.close(os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY))
    print("open %%s: OPENED" %% sys.argv[1])
except OSError as e:
    print("open %%s: %%s" %% (sys.argv[1], errno.errorcode[e.errno]))
' %s"""

MANY_PTYS = r"""python3 -c '
import errno, os
held = []
try:
    while len(held) < 400:
        held.append(os.openpty())
    print(len(held), "none")
except OSError as e:
    print(len(held), errno.errorcode[e.errno])
'"""


def descendant_running(daemon_pid, argv):
    """The host pid of the process among boxkited's descendants whose argv starts with argv
    (a list of bytes), or None."""
    for pid in boxkited_process.descendants(daemon_pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[:len(argv)] == argv:
                    return pid
        except OSError:
            continue
    return None


PROBE = r"""
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", %d))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("REACHED", s.recv(12).decode())
except OSError as e:
    print("REFUSED", e)
"""


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ExposedPortTest(Base):
    def test_the_exposed_port_is_reachable_from_the_sidecar_side_only(self):
        port = 8000
        pid = self.start(argv=["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                         expose_port=port, tag="dev server")
        init = descendant_running(self.daemon.proc.pid, [b"boxkite-init", b""])
        self.assertIsNotNone(init, "the local sandbox's init")
        deadline, server = time.monotonic() + GUARD_S, None
        while server is None and time.monotonic() < deadline:
            server = descendant_running(self.daemon.proc.pid, [b"python3", b"-m", b"http.server"])
            time.sleep(0.05)
        self.assertIsNotNone(server, "the exposed-port process")
        # The sidecar's side: the sandbox's network namespace — the executor's, neither the
        # host's nor the sandbox init's — entered from the host where the server runs.
        net = os.readlink("/proc/%d/ns/net" % server)
        self.assertNotIn(net, (os.readlink("/proc/self/ns/net"), os.readlink("/proc/%d/ns/net" % init)))
        probe = ["nsenter", "--net=/proc/%d/ns/net" % server, "/usr/bin/python3", "-c", PROBE % port]
        deadline, out = time.monotonic() + GUARD_S, ""
        while time.monotonic() < deadline:
            out = subprocess.run(probe, capture_output=True, text=True).stdout
            if out.startswith("REACHED"):
                break
            time.sleep(0.2)
        self.assertTrue(out.startswith("REACHED HTTP/1."), out)
        # At the same time, a plain exec and another process have fresh, empty namespaces.
        r = self.call("Exec", pb.ExecRequest(argv=["python3", "-c", PROBE % port]), pb.ExecResponse)
        self.assertTrue(r.stdout.startswith(b"REFUSED"), r.stdout)
        other = self.start(argv=["python3", "-c", PROBE % port])
        out2, _, _ = self.read_all(other)
        self.assertTrue(out2.startswith(b"REFUSED"), out2)
        # The host's own namespace is not the sandbox's either.
        s = socket.socket()
        s.settimeout(2)
        host_reached = s.connect_ex(("127.0.0.1", port)) == 0
        s.close()
        if host_reached:
            self.skipTest("something on the host listens on 127.0.0.1:%d: the host-side check cannot tell" % port)
        info = self.status_of(pid)
        self.assertEqual((info.expose_port, info.tag), (port, "dev server"), "named as such in the list")
        self.assertEqual(self.status_of(other).expose_port, 0)
        # The exception is the sandbox's namespace, never the host's: a listener on the host's
        # loopback is out of reach of an exposed-port process.
        host = socket.socket()
        host.bind(("127.0.0.1", 0))
        host.listen(1)
        try:
            prober = self.start(argv=["python3", "-c", PROBE % host.getsockname()[1]], expose_port=port + 1)
            out3, _, _ = self.read_all(prober)
        finally:
            host.close()
        self.assertTrue(out3.startswith(b"REFUSED"), out3)
        # One process per exposed port.
        self.expect_error(6, "ProcessStart", pb.ProcessStartRequest(argv=["true"], expose_port=port),
                          pb.ProcessStartResponse)
        self.signal(pid, signal.SIGTERM)
        self.wait(pid)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class LimitsTest(Base):
    ARGS = ("--processes-max", "3", "--process-ring-max", "1M", "--process-ring-budget", "5M",
            "--contexts", "4", "--max-connections", "128")

    def test_limits_have_clear_statuses(self):
        for pid in [p.process_id for p in self.call("ProcessList", pb.ProcessListRequest(),
                                                   pb.ProcessListResponse).processes]:
            self.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=pid), pb.ProcessRemoveResponse)
        e = self.expect_error(3, "ProcessStart", pb.ProcessStartRequest(argv=["true"], ring_size=2 << 20),
                              pb.ProcessStartResponse)
        self.assertIn("--process-ring-max", e.message)
        a = self.start(argv=["sleep", "300"], ring_size=1 << 20)
        b = self.start(argv=["sleep", "300"], ring_size=1 << 20)
        e = self.expect_error(8, "ProcessStart", pb.ProcessStartRequest(argv=["true"], ring_size=1 << 20),
                              pb.ProcessStartResponse)
        self.assertIn("--process-ring-budget", e.message)
        c = self.start(argv=["true"], ring_size=1024)
        e = self.expect_error(8, "ProcessStart", pb.ProcessStartRequest(argv=["true"]), pb.ProcessStartResponse)
        self.assertIn("--processes-max", e.message)
        self.expect_error(9, "ProcessRemove", pb.ProcessRemoveRequest(process_id=a), pb.ProcessRemoveResponse)
        self.expect_error(5, "ProcessRead", pb.ProcessReadRequest(process_id="p999"), pb.ProcessReadResponse)
        for pid in (a, b):
            self.signal(pid, signal.SIGKILL)
            self.wait(pid)
        self.wait(c)
        for pid in (a, b, c):
            self.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=pid), pb.ProcessRemoveResponse)
        self.expect_error(5, "ProcessWait", pb.ProcessWaitRequest(process_id=a), pb.ProcessWaitResponse)
        self.assertEqual(self.read_all(self.start(argv=["echo", "room again"]))[0], b"room again\n")

    def test_waiting_readers_do_not_hold_the_server(self):
        # Four contexts (--contexts 4) and a hundred long-polls parked: Health and Exec are
        # still served, and every reader is answered when its process speaks.
        for pid in [p.process_id for p in self.call("ProcessList", pb.ProcessListRequest(),
                                                   pb.ProcessListResponse).processes]:
            st = self.status_of(pid).status
            if st.running:
                self.signal(pid, signal.SIGKILL)
                self.wait(pid)
            self.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=pid), pb.ProcessRemoveResponse)
        pid = self.start(argv=["cat"], stdin_open=True)
        answers, errors = [], []

        def reader():
            c = self.new_client()
            try:
                answers.append(self.read(pid, wait_ms=GUARD_S * 1000, client=c).stdout.data)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
            finally:
                c.close()

        threads = [threading.Thread(target=reader) for _ in range(100)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        probe = wire.Channel(self.daemon.url, key=self.key, timeout=10)
        self.assertTrue(probe.call("Health", pb.HealthRequest(), pb.HealthResponse).message.version)
        r = probe.call("Exec", pb.ExecRequest(argv=["echo", "served"]), pb.ExecResponse).message
        self.assertEqual(r.stdout, b"served\n")
        probe.close()
        self.assertEqual(answers, [], "the readers are still waiting")
        self.write(pid, b"wake\n", close=True)
        for t in threads:
            t.join(GUARD_S)
        self.assertEqual(errors, [])
        self.assertEqual(answers, [b"wake\n"] * 100)


PARKED_MAX = 1024  # server/rpc/call.h BK_PARKED_MAX: calls the server keeps waiting at once
MiB = 1 << 20


def audit_lines(log, method):
    """The audit lines (one JSON line per call, written when it is answered) of method in log."""
    return [line for line in log.splitlines() if '"method":"%s"' % method in line]


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ParkedLimitTest(Base):
    """Every place for a waiting call taken (BK_PARKED_MAX long-polls parked). Before, a read or
    wait past them was answered at once with nothing, and a follower asked again at once: `bkctl
    logs -f` of a quiet process made 19 578 reads in 3 s; a write the process did not take, and
    an Exec, kept one of the --contexts while it waited, so that four of them held them all and
    Health waited."""

    HTTP = "http://127.0.0.1:%d" % boxkited_process.free_tcp_port() if not SKIP_REASON else ""
    ARGS = ("--contexts", "4", "--http-listen", HTTP)

    def waiting(self):
        """The server's gauge of calls waiting (parked), from its metrics."""
        with urllib.request.urlopen(self.HTTP + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("boxkite_calls_waiting "):
                    return int(line.split()[1])
        self.fail("no boxkite_calls_waiting in /metrics")

    def setUp(self):
        self.quiet = self.start(argv=["sleep", "600"])
        self.parker = Parker(self.daemon.url, self.key,
                             [("ProcessRead", pb.ProcessReadRequest(process_id=self.quiet, wait_ms=60000))] * PARKED_MAX)
        deadline = time.monotonic() + GUARD_S
        while self.waiting() < PARKED_MAX:
            self.assertLess(time.monotonic(), deadline, "the reads never filled the server's places")
            time.sleep(0.05)
        # A read that would wait is answered at once, saying when to ask again.
        m = self.call("ProcessRead", pb.ProcessReadRequest(process_id=self.quiet, wait_ms=60000),
                      pb.ProcessReadResponse)
        self.assertEqual((m.retry_after_ms, m.stdout.length, m.status.running), (1000, 0, True))

    def tearDown(self):
        # Its end answers every parked read: the places are free again.
        if self.wait(self.quiet, wait_ms=0).running:
            self.signal(self.quiet, signal.SIGKILL)
        self.wait(self.quiet)
        self.parker.answers(PARKED_MAX)
        self.parker.close()
        for p in self.call("ProcessList", pb.ProcessListRequest(), pb.ProcessListResponse).processes:
            if p.status.running:
                self.signal(p.process_id, signal.SIGKILL)
                self.wait(p.process_id)
            self.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=p.process_id), pb.ProcessRemoveResponse)

    def count_reads(self, seconds, pid=None):
        """ProcessRead calls answered in the next `seconds`, and the CPU ticks pid used meanwhile."""
        before, cpu = len(audit_lines(self.daemon.log(), "ProcessRead")), pid and proc_stat(pid, "cpu")
        time.sleep(seconds)
        reads = len(audit_lines(self.daemon.log(), "ProcessRead")) - before
        return reads, pid and proc_stat(pid, "cpu") - cpu

    def test_followers_back_off_while_no_call_can_wait(self):
        tick = os.sysconf("SC_CLK_TCK")
        env = dict(os.environ, BOXKITE_URL=self.daemon.url, BOXKITE_KEY_FILE=self.daemon.key_file)
        # bkctl logs -f (libboxkite's bk_process_follow): about one read a second, not a spin.
        follower = subprocess.Popen([boxkited_process.BKCTL, "logs", "-f", self.quiet], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(0.5)
            reads, cpu = self.count_reads(3.0, follower.pid)
        finally:
            follower.kill()
            follower.wait()
        self.assertLessEqual(reads, 6, "bkctl logs -f made %d reads in 3 s" % reads)
        self.assertLess(cpu / tick, 0.5, "bkctl logs -f used %.2f s of CPU in 3 s" % (cpu / tick))
        # The package's Process.follow(): the same.
        with self.daemon.client(timeout=GUARD_S) as c:
            follow = threading.Thread(target=lambda: list(c.process(self.quiet).follow()), daemon=True)
            follow.start()
            time.sleep(0.5)
            reads, _ = self.count_reads(3.0)
            self.assertLessEqual(reads, 6, "Process.follow() made %d reads in 3 s" % reads)
            # A wait that cannot wait says so too, and Process.wait() waits its time out anyway.
            m = self.call("ProcessWait", pb.ProcessWaitRequest(process_id=self.quiet, wait_ms=60000),
                          pb.ProcessWaitResponse)
            self.assertEqual((m.status.running, m.retry_after_ms), (True, 1000))
            began = time.monotonic()
            self.assertTrue(c.process(self.quiet).wait(2.5).running)
            self.assertGreaterEqual(time.monotonic() - began, 2.4)
            self.signal(self.quiet, signal.SIGKILL)
            follow.join(GUARD_S)
            self.assertFalse(follow.is_alive())

    def test_writes_and_execs_hold_no_context_while_no_call_can_wait(self):
        pids = [self.start(argv=["sleep", "600"], stdin_open=True) for _ in range(8)]
        results = [None] * len(pids)

        def write(i):
            c = self.new_client()
            try:
                results[i] = c.call("ProcessWrite", pb.ProcessWriteRequest(process_id=pids[i], data=b"x" * MiB),
                                    pb.ProcessWriteResponse).message
            except Exception as e:  # noqa: BLE001 (reported below)
                results[i] = e
            finally:
                c.close()

        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(pids))]
        for t in threads:
            t.start()
        time.sleep(0.5)
        # Eight writes nobody reads and four contexts: Health is answered all the same.
        probe = wire.Channel(self.daemon.url, key=self.key, timeout=10)
        try:
            self.assertTrue(probe.call("Health", pb.HealthRequest(), pb.HealthResponse).message.version)
            # An Exec cannot wait without a context either: refused, not left to hold one.
            with self.assertRaises(boxkite.BoxkiteError) as cm:
                probe.call("Exec", pb.ExecRequest(argv=["true"]), pb.ExecResponse)
            self.assertEqual(cm.exception.code, 8, cm.exception)
            self.assertIn("calls wait already", cm.exception.message)
        finally:
            probe.close()
        for t in threads:
            t.join(GUARD_S)
        for r in results:
            self.assertIsInstance(r, pb.ProcessWriteResponse, r)
            # What the pipe took (its 64 KiB), and when to send the rest.
            self.assertLess(r.written, MiB)
            self.assertEqual(r.retry_after_ms, 1000)
        # The package's Process.write() sends the rest after the pause, until it all went in.
        reader = self.start(shell="sleep 1; exec cat >/dev/null", stdin_open=True)
        with self.daemon.client(timeout=GUARD_S) as c:
            self.assertEqual(c.process(reader).write(b"y" * 3 * MiB), 3 * MiB)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class AnswerBudgetTest(Base):
    """Reads of one process's output, many at once: each answer carries its own copy of the bytes,
    so what they take together is bounded (BK_PROCESS_ANSWER_BUDGET), not one copy per reader at
    once. Before, 200 reads parked on a process that then wrote 1 MiB made 200 copies at once:
    the front grew by 201 MiB."""

    READERS = 200
    BOUND_MIB = 40  # the budget's 16 MiB, the answer the connection is writing, the allocator's slack

    def front_growth_mib(self, run):
        """run(), and how far the front's resident memory rose above where it was before (its
        peak, VmHWM, reset first)."""
        front = self.daemon.proc.pid
        with open("/proc/%d/clear_refs" % front, "w") as f:
            f.write("5")  # the peak starts again from now
        base = proc_stat(front, "VmRSS")
        run()
        return (proc_stat(front, "VmHWM") - base) / 1024

    def check_answers(self, parker, n, offset=0):
        got = [r for _, r in parker.answers(n)]
        for r in got:
            self.assertEqual(r.message.stdout.offset, offset)
            self.assertGreater(r.message.stdout.length, 0)
            self.assertEqual(len(r.data), r.message.stdout.length)
            self.assertEqual(bytes(r.data), b"x" * len(r.data))

    def test_reads_of_output_already_there(self):
        pid = self.start(shell="head -c 1048576 /dev/zero | tr '\\0' x; exec sleep 600")
        deadline = time.monotonic() + GUARD_S
        while self.status_of(pid).stdout_end < MiB:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        reads = [("ProcessRead", pb.ProcessReadRequest(process_id=pid, wait_ms=60000))] * self.READERS
        parkers = []

        def run():
            # Nobody reads the answers for a while: what the server makes of them stays with it.
            parkers.append(Parker(self.daemon.url, self.key, reads))
            time.sleep(2)

        growth = self.front_growth_mib(run)
        self.check_answers(parkers[0], self.READERS)
        parkers[0].close()
        self.signal(pid, signal.SIGKILL)
        self.assertLess(growth, self.BOUND_MIB, "the front grew by %.0f MiB" % growth)

    def test_parked_reads_woken_by_one_large_write(self):
        pid = self.start(shell="read go; python3 -c 'import os; os.write(1, b\"x\" * 1048576)'; exec sleep 600",
                         stdin_open=True)
        calls = [("ProcessRead", pb.ProcessReadRequest(process_id=pid, wait_ms=60000))] * self.READERS
        # Last on the connection, answered at once: once its answer is back, every read before it
        # is parked (a connection's requests are taken in order).
        calls.append(("ProcessWait", pb.ProcessWaitRequest(process_id=pid)))
        parker = Parker(self.daemon.url, self.key, calls)
        (i, _), = parker.answers(1)
        self.assertEqual(i, self.READERS)

        def run():
            self.write(pid, b"go\n")
            time.sleep(2)

        growth = self.front_growth_mib(run)
        self.check_answers(parker, self.READERS)
        parker.close()
        self.signal(pid, signal.SIGKILL)
        self.assertLess(growth, self.BOUND_MIB, "the front grew by %.0f MiB" % growth)


if __name__ == "__main__":
    unittest.main()
