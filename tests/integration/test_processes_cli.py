"""Background processes and streaming exec from the command line, against a local-mode
boxkited: bkctl start, ps, logs [-f] [--from] [--stderr], send, close-stdin, kill, wait, prune,
reset [--new-key]; bkctl exec streaming as the command writes, its stdin streamed past the 8 MiB of
one Exec request, ^C and SIGTERM reaching the command, a bkctl killed with SIGKILL leaving nothing
running (the lease), and -it: a terminal whose size follows ours, raw mode given back.

Every wait here is a hang guard (bkit.wait_for, timeouts of tens of seconds), never a measured
duration: the machine is shared and slow.
"""
import calendar
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
import unittest

import bkit

D = None
SANDBOX_UID = 1001


def setUpModule():
    global D
    bkit.require_root()
    bkit.require_build()
    D = bkit.Daemon("proc-cli").start()
    r = D.bkctl("ps")
    if r.returncode != 0 and "UNIMPLEMENTED" in r.stderr:
        raise unittest.SkipTest("this boxkited does not serve the process rpcs yet (ProcessList: UNIMPLEMENTED)")
    assert r.returncode == 0, r.stderr


def bkctl_env(daemon=None):
    d = daemon or D
    e = {k: v for k, v in os.environ.items() if not k.startswith("BOXKITE_")}
    e.update(BOXKITE_URL=d.url, BOXKITE_KEY_FILE=str(d.key))
    return e


def start(*args, daemon=None):
    """bkctl start ARGS: the process id it printed."""
    r = (daemon or D).bkctl("start", *args)
    assert r.returncode == 0, r.stderr
    pid = r.stdout.strip()
    assert re.fullmatch(r"p[0-9]+", pid), r.stdout
    return pid


def wait_ended(pid, daemon=None):
    """Its status once it ended and its output is whole: an ended process's last bytes may
    reach its rings after the end (a stream is whole at eof), and logs -f returns only then."""
    d = daemon or D
    r = d.bkctl("-o", "json", "wait", "--timeout", "60", pid, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    f = d.bkctl("logs", "-f", pid, timeout=90)
    assert f.returncode == 0, f.stderr
    return json.loads(r.stdout)["status"]


def ps(daemon=None):
    r = (daemon or D).bkctl("-o", "json", "ps")
    assert r.returncode == 0, r.stderr
    return {p["process_id"]: p for p in json.loads(r.stdout)}


def sandbox_processes(*argv):
    return bkit.find_processes(uid=SANDBOX_UID, argv=list(argv))


class Terminal:
    """argv on a pty of its own (its controlling terminal, size rows x cols), read from the
    master side by a caller that waits for what it expects."""

    def __init__(self, argv, env, rows=24, cols=80):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.out = b""
        self.status = None
        bkit.defer(self.close)

    def read_until(self, pattern, timeout=60):
        """Read until the regex pattern (bytes) matches what the terminal showed (since the last
        consume()); the match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.out)
            if m:
                return m
            r, _, _ = select.select([self.fd], [], [], 0.5)
            if not r:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: every slave closed
                chunk = b""
            if not chunk:
                break
            self.out += chunk
        m = re.search(pattern, self.out)
        if not m:
            raise AssertionError(f"no {pattern!r} on the terminal; it showed {self.out[-2000:]!r}")
        return m

    def consume(self, m):
        """Drop what came up to the end of match m, so that the next read looks only after it."""
        self.out = self.out[m.end():]

    def write(self, data):
        os.write(self.fd, data)

    def resize(self, rows, cols):
        # The kernel sends SIGWINCH to the terminal's foreground process group: bkctl.
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def wait(self, timeout=60):
        bkit.wait_for(lambda: self._reap(), timeout, what="bkctl on the terminal to exit")
        return self.status

    def _reap(self):
        if self.status is None:
            try:
                self.out += os.read(self.fd, 65536) if select.select([self.fd], [], [], 0)[0] else b""
            except OSError:
                pass
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status is not None

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.status = -9
        try:
            os.close(self.fd)
        except OSError:
            pass


class StartPsLogs(unittest.TestCase):
    def test_start_prints_an_id_ps_lists_it_and_logs_read_each_stream(self):
        pid = start("--tag", "build-1", "--shell", "echo out-line; echo err-line >&2")
        self.assertEqual(wait_ended(pid)["exit_code"], 0)
        rec = ps()[pid]
        self.assertEqual((rec["tag"], rec["status"]["running"], rec["tty"]), ("build-1", False, False))
        self.assertEqual(rec["argv"], ["/bin/sh", "-c", "echo out-line; echo err-line >&2"])
        self.assertEqual((rec["stdout_end"], rec["stderr_end"]), (9, 9))
        r = D.bkctl("ps")
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l for l in r.stdout.splitlines() if l.startswith(pid + " ")]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertIn("exited 0", line[0])
        self.assertIn("build-1", line[0])
        r = D.bkctl("logs", pid)
        self.assertEqual((r.returncode, r.stdout), (0, "out-line\n"), r.stderr)
        r = D.bkctl("logs", "--stderr", pid)  # its stderr to ours, as docker logs
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", "err-line\n"))
        r = D.bkctl("logs", "--from", "4", pid)
        self.assertEqual((r.returncode, r.stdout), (0, "line\n"), r.stderr)
        r = D.bkctl("-o", "json", "logs", "--stderr", "--from", "4", pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["data"], j["offset"], j["next"], j["end"], j["eof"], j["lost"]),
                         ("line\n", 4, 9, 9, True, 0))

    def test_logs_from_past_the_end_is_refused_with_a_hint(self):
        pid = start("--", "echo", "abc")
        wait_ended(pid)
        r = D.bkctl("logs", "--from", "100", pid)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("OUT_OF_RANGE: stdout offset 100 is past its end, 4", r.stderr)
        self.assertNotIn("stderr offset", r.stderr)  # stderr was asked from its end: it is not past it
        self.assertIn("--from 100 is past what the process has written to its stdout so far (bkctl ps -o json "
                      "shows it as stdout_end)", r.stderr)
        r = D.bkctl("logs", "--stderr", "--from", "1", pid)
        self.assertIn("OUT_OF_RANGE: stderr offset 1 is past its end, 0", r.stderr)
        self.assertIn("(bkctl ps -o json shows it as stderr_end)", r.stderr)
        self.assertNotIn("stdout offset", r.stderr)
        # Where the hint sends the user (bkctl ps itself does not show it: it did say so).
        r = D.bkctl("ps", "-o", "json")
        proc = [p for p in json.loads(r.stdout) if p["process_id"] == pid][0]
        self.assertEqual((proc["stdout_end"], proc["stderr_end"]), (4, 0))

    def test_logs_tells_when_the_ring_dropped_bytes(self):
        pid = start("--ring-size", "64K", "--shell", "head -c 1048576 /dev/zero | tr '\\0' a")
        wait_ended(pid)
        r = D.bkctl("logs", pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"(\d+) bytes of its stdout lost: the ring dropped them before they were read; output goes "
                      r"on from offset (\d+)", r.stderr)
        self.assertTrue(m, r.stderr)
        lost, at = int(m.group(1)), int(m.group(2))
        self.assertEqual(lost, at)
        self.assertEqual(lost + len(r.stdout), 1 << 20)
        self.assertEqual(set(r.stdout), {"a"})
        self.assertLessEqual(len(r.stdout), 64 << 10)

    def test_lossless_waits_for_logs_f_instead_of_dropping(self):
        pid = start("--lossless", "--ring-size", "64K", "--shell", "head -c 1048576 /dev/zero | tr '\\0' b")
        r = D.bkctl("logs", "-f", pid, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("lost", r.stderr)
        self.assertEqual((len(r.stdout), set(r.stdout)), (1 << 20, {"b"}))

    def test_logs_follow_prints_as_produced_until_the_end(self):
        gate = f"gate-logs-{os.getpid()}"
        pid = start("--shell", f"echo first; while [ ! -e /tmp/{gate} ]; do sleep 0.1; done; echo second")
        p = subprocess.Popen([bkit.BKCTL, "logs", "-f", pid], env=bkctl_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"first\n")
        self.assertIsNone(p.poll(), "logs -f ended while the process still ran")
        r = D.bkctl("exec", "--", "touch", f"/tmp/{gate}")
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = p.communicate(timeout=60)
        self.assertEqual((p.returncode, out), (0, b"second\n"), err)

    def test_the_done_when_http_server_with_an_exposed_port(self):
        port = bkit.free_tcp_port()
        pid = start("--expose", str(port), "--", "python3", "-u", "-m", "http.server", str(port))
        bkit.defer(D.bkctl, "kill", "-s", "KILL", pid)
        self.assertEqual(ps()[pid]["expose_port"], port)
        # Another process exposing a port shares its network namespace and reaches it; a plain
        # exec at the same time has a fresh empty one and cannot.
        probe = ("import sys, time, urllib.request\n"
                 "for i in range(300):\n"
                 "    try:\n"
                 "        print(urllib.request.urlopen('http://127.0.0.1:%d/', timeout=2).status); sys.exit(0)\n"
                 "    except OSError:\n"
                 "        time.sleep(0.2)\n"
                 "sys.exit(1)\n" % port)
        client = start("--expose", str(bkit.free_tcp_port()), "--", "python3", "-c", probe)
        self.assertEqual(wait_ended(client)["exit_code"], 0, D.bkctl("logs", "--stderr", client).stderr)
        self.assertEqual(D.bkctl("logs", client).stdout, "200\n")
        rc, res, err = D.exec_json("python3", "-c", "import urllib.request; urllib.request.urlopen("
                                   "'http://127.0.0.1:%d/', timeout=3)" % port)
        self.assertNotEqual(rc, 0, "a plain exec reached the exposed port: %r" % (res,))
        # logs -f shows the server's request log as it comes, until it is stopped.
        p = subprocess.Popen([bkit.BKCTL, "logs", "-f", "--stderr", pid], env=bkctl_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertIn(b'"GET / HTTP/1.1" 200', p.stderr.readline())
        self.assertIsNone(p.poll())
        r = D.bkctl("kill", pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(wait_ended(pid)["signal"], signal.SIGTERM)


def iso_ms(ms):
    """ms since the epoch as bkctl logs --timestamps writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def wait_output(pid, total):
    """Until the process's two streams hold total bytes together (a hang guard)."""
    bkit.wait_for(lambda: sum(ps()[pid][k] for k in ("stdout_end", "stderr_end")) >= total, 60,
                  what=f"{pid} to have written {total} bytes")


def logs(*args, merged=True):
    """bkctl logs ARGS: its exit status, and what it wrote — stdout and stderr in one pipe, in the
    order bkctl wrote them, unless merged is False (then stdout alone)."""
    r = subprocess.run([bkit.BKCTL, "logs", *args], env=bkctl_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if merged else subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120)
    return r.returncode, r.stdout.decode()


class LogsInOrder(unittest.TestCase):
    """bkctl logs shows both streams in the order they were written, as docker logs does; --tail,
    --since, --timestamps. Each write of the commands here waits for the previous one to be in
    boxkited's ring (the test sends a line on its stdin once ps shows it): the order the server
    read them in is then the order they were written, whatever the load."""

    LINES = ["out1", "err1", "out2", "err2", "out3", "err3"]

    @classmethod
    def setUpClass(cls):
        script = "for i in 1 2 3; do echo out$i; read x; echo err$i >&2; read x; done"
        cls.pid = start("-i", "--shell", script)
        for k in range(len(cls.LINES)):
            wait_output(cls.pid, 5 * (k + 1))
            r = D.bkctl("send", cls.pid, input="go\n")
            assert r.returncode == 0, r.stderr
        wait_ended(cls.pid)

    def test_both_streams_interleaved_each_to_its_own(self):
        self.assertEqual(logs(self.pid), (0, "".join(l + "\n" for l in self.LINES)))
        r = D.bkctl("logs", self.pid)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "out1\nout2\nout3\n", "err1\nerr2\nerr3\n"))
        self.assertEqual(logs("--stdout", self.pid, merged=False), (0, "out1\nout2\nout3\n"))
        self.assertEqual(logs("--stderr", self.pid), (0, "err1\nerr2\nerr3\n"))

    def test_timestamps_are_the_times_each_line_was_read(self):
        before = D.bkctl("-o", "json", "ps")
        rc, out = logs("--timestamps", self.pid)
        self.assertEqual(rc, 0, out)
        lines = out.splitlines()
        self.assertEqual([l.split(" ", 1)[1] for l in lines], self.LINES)
        times = [l.split(" ", 1)[0] for l in lines]
        for t in times:
            self.assertRegex(t, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(times, sorted(times))
        started = [p for p in json.loads(before.stdout) if p["process_id"] == self.pid][0]["started_ms"]
        # The first was read once the process had started (the same clock: boxkited runs here).
        first = calendar.timegm(time.strptime(times[0][:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(times[0][20:23])
        self.assertGreaterEqual(first, started)
        self.assertEqual(times[0], iso_ms(first))

    def test_tail_counts_lines_across_both_streams(self):
        self.assertEqual(logs("--tail", "3", self.pid), (0, "err2\nout3\nerr3\n"))
        self.assertEqual(logs("-n", "1", "--stdout", self.pid), (0, "out3\n"))
        self.assertEqual(logs("--tail", "0", self.pid), (0, ""))
        self.assertEqual(logs("--tail", "100", self.pid), (0, "".join(l + "\n" for l in self.LINES)))

    def test_json_refuses_what_shapes_text(self):
        for args in (["--tail", "1"], ["--since", "1h"], ["-t"], ["-f"]):
            with self.subTest(args):
                r = D.bkctl("-o", "json", "logs", *args, self.pid)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("-o json prints one read of one stream", r.stderr)

    def test_since(self):
        pid = start("-i", "--shell", "echo early; read x; echo late; read x")
        wait_output(pid, 6)
        # A time after "early" was read and before "late" is written (the clock is this
        # machine's, as boxkited's: it runs here).
        cut = time.time()
        time.sleep(0.05)
        D.bkctl("send", pid, input="go\n")
        wait_output(pid, 11)
        D.bkctl("send", "--close", pid, input="")
        wait_ended(pid)
        iso = iso_ms(int(cut * 1000) + 1)
        self.assertEqual(logs("--since", iso, pid), (0, "late\n"))
        self.assertEqual(logs("--since", "1h", pid), (0, "early\nlate\n"))
        r = D.bkctl("logs", "--since", "yesterday", pid)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--since yesterday: expected a time ago", r.stderr)

    def test_follow_from_the_tail(self):
        pid = start("-i", "--shell", "for i in 1 2 3 4 5; do echo line$i; done; read x; echo after")
        bkit.defer(D.bkctl, "kill", "-s", "KILL", pid)
        wait_output(pid, 30)
        p = subprocess.Popen([bkit.BKCTL, "logs", "-f", "--tail", "2", pid], env=bkctl_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"line4\n")
        self.assertEqual(p.stdout.readline(), b"line5\n")
        self.assertIsNone(p.poll(), "logs -f ended while the process still ran")
        D.bkctl("send", pid, input="go\n")
        out, err = p.communicate(timeout=60)
        self.assertEqual((p.returncode, out), (0, b"after\n"), err)

    def test_a_running_process_without_f_shows_what_it_wrote_so_far(self):
        pid = start("-i", "--shell", "echo so-far; echo err-so-far >&2; read x")
        bkit.defer(D.bkctl, "kill", "-s", "KILL", pid)
        wait_output(pid, 17)
        self.assertEqual(logs(pid), (0, "so-far\nerr-so-far\n"))
        self.assertTrue(ps()[pid]["status"]["running"])


class StdinKillWaitPrune(unittest.TestCase):
    def test_send_from_a_file_and_stdin_then_close(self):
        pid = start("-i", "--", "cat")
        f = bkit.temp_dir("send") / "part1"
        f.write_bytes(b"from a file\n")
        r = D.bkctl("send", pid, str(f))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = D.bkctl("send", pid, input="from stdin\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(ps()[pid]["status"]["running"])
        r = D.bkctl("close-stdin", pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(wait_ended(pid)["exit_code"], 0)
        self.assertEqual(D.bkctl("logs", pid).stdout, "from a file\nfrom stdin\n")
        r = D.bkctl("send", pid, input="late\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("FAILED_PRECONDITION", r.stderr)

    def test_send_close_and_a_process_without_stdin(self):
        pid = start("-i", "--", "wc", "-c")
        r = D.bkctl("-o", "json", "send", "--close", pid, input="12345")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"written": 5, "closed": True})
        wait_ended(pid)
        self.assertEqual(D.bkctl("logs", pid).stdout.strip(), "5")
        pid = start("--", "sleep", "30")
        bkit.defer(D.bkctl, "kill", "-s", "KILL", pid)
        r = D.bkctl("send", pid, input="x")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("FAILED_PRECONDITION", r.stderr)

    def test_kill_with_a_signal_by_name_and_number(self):
        for sig, arg in ((signal.SIGINT, "INT"), (signal.SIGUSR1, "SIGUSR1"), (signal.SIGHUP, "1")):
            with self.subTest(arg):
                pid = start("--", "sleep", "60")
                r = D.bkctl("kill", "-s", arg, pid)
                self.assertEqual(r.returncode, 0, r.stderr)
                st = wait_ended(pid)
                self.assertEqual((st["running"], st["signal"]), (False, sig))
                r = D.bkctl("wait", pid)
                self.assertEqual(r.stdout, "%s killed by SIG%s\n" % (pid, signal.Signals(sig).name[3:]))
        r = D.bkctl("kill", "-s", "NOPE", "p1")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("expected a signal name", r.stderr)

    def test_kill_after_ends_a_tree_that_ignores_sigterm(self):
        # An ignored signal stays ignored across exec: sleep ignores SIGTERM too.
        pid = start("--shell", "trap '' TERM; sleep 4401")
        bkit.wait_for(lambda: sandbox_processes("sleep", "4401"), 30, what="sleep 4401 to run")
        r = D.bkctl("kill", "--kill-after", "1", pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = wait_ended(pid)
        self.assertEqual(st["signal"], signal.SIGKILL)
        bkit.wait_for(lambda: not sandbox_processes("sleep", "4401"), 30, what="the tree to be gone")
        r = D.bkctl("kill", pid)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("has ended already", r.stderr)

    def test_wait_timeout_on_a_running_process(self):
        pid = start("--", "sleep", "60")
        bkit.defer(D.bkctl, "kill", "-s", "KILL", pid)
        r = D.bkctl("wait", "--timeout", "0.5", pid)
        self.assertEqual((r.returncode, r.stdout), (1, "%s running\n" % pid), r.stderr)
        # A long-poll longer than the client's own timeout (--timeout before the command: 1 s) is
        # not cut by it: the wait asked for comes on top (boxkite.h, "Timeouts").
        r = D.bkctl("--timeout", "1", "wait", "--timeout", "3", pid)
        self.assertEqual((r.returncode, r.stdout), (1, "%s running\n" % pid), r.stderr)
        self.assertNotIn("DEADLINE_EXCEEDED", r.stderr)

    def test_max_runtime_and_an_exit_code(self):
        pid = start("--max-runtime", "1", "--", "sleep", "60")
        st = wait_ended(pid)
        self.assertTrue(st["runtime_exceeded"], st)
        self.assertIn("(timed out)", D.bkctl("wait", pid).stdout)
        pid = start("--shell", "exit 7")
        self.assertEqual(wait_ended(pid)["exit_code"], 7)
        self.assertEqual(D.bkctl("wait", pid).stdout, "%s exited 7\n" % pid)

    def test_prune_removes_ended_records_and_refuses_running_ones(self):
        ended = start("--", "true")
        wait_ended(ended)
        running = start("--", "sleep", "60")
        bkit.defer(D.bkctl, "kill", "-s", "KILL", running)
        r = D.bkctl("prune", ended, running)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        procs = ps()
        self.assertNotIn(ended, procs)
        self.assertIn(running, procs)
        r = D.bkctl("logs", ended)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("NOT_FOUND", r.stderr)
        r = D.bkctl("prune")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([p for p, v in ps().items() if not v["status"]["running"]], [])

    def test_unknown_id(self):
        for args in (["logs", "p999999"], ["kill", "p999999"], ["wait", "p999999"], ["close-stdin", "p999999"]):
            with self.subTest(args):
                r = D.bkctl(*args)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("NOT_FOUND", r.stderr)


class StreamingExec(unittest.TestCase):
    def test_output_arrives_before_the_command_ends(self):
        gate = f"gate-exec-{os.getpid()}"
        p = subprocess.Popen([bkit.BKCTL, "exec", "--shell",
                              f"echo 1; while [ ! -e /tmp/{gate} ]; do sleep 0.1; done; echo 2; echo e >&2; exit 3"],
                             env=bkctl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"1\n")
        self.assertIsNone(p.poll(), "bkctl exec ended while its command could not have")
        self.assertEqual(D.bkctl("exec", "--", "touch", f"/tmp/{gate}").returncode, 0)
        out, err = p.communicate(timeout=60)
        self.assertEqual((p.returncode, out, err), (3, b"2\n", b"e\n"))

    def test_the_issues_loop_line_by_line(self):
        p = subprocess.Popen([bkit.BKCTL, "exec", "--shell", "for i in 1 2 3; do echo $i; sleep 1; done"],
                             env=bkctl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        first = p.stdout.readline()
        # Line 1 arrives on its own: the rest is two seconds of the command away.
        self.assertEqual(first, b"1\n")
        out, err = p.communicate(timeout=60)
        self.assertEqual((p.returncode, out), (0, b"2\n3\n"), err)
        left = [v for v in ps().values() if v["argv"][-1:] == ["for i in 1 2 3; do echo $i; sleep 1; done"]]
        self.assertEqual(left, [], "bkctl exec left its record behind")

    def test_output_beyond_the_ring_arrives_whole(self):
        # 8 MiB through a 1 MiB ring: bkctl exec's process is lossless, so nothing is dropped.
        r = D.bkctl("exec", "--shell", "head -c 8388608 /dev/urandom | tee /tmp/out-%d | sha256sum >&2; "
                    "cat /tmp/out-%d" % (os.getpid(), os.getpid()), text=False, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), 8 << 20)
        self.assertEqual(hashlib.sha256(r.stdout).hexdigest(), r.stderr.split()[0].decode())

    def test_stdin_beyond_8_mib_is_streamed_whole(self):
        data = os.urandom(12 << 20)
        r = D.bkctl("exec", "-i", "--", "sha256sum", input=data, text=False, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())

    def test_signal_and_timeout_statuses(self):
        r = D.bkctl("exec", "--shell", "kill -KILL $$")
        self.assertEqual(r.returncode, 137, r.stderr)
        self.assertIn("killed by signal 9", r.stderr)
        r = D.bkctl("exec", "--timeout", "1", "--", "sleep", "60")
        self.assertEqual(r.returncode, bkit.EXIT_TIMEOUT, r.stderr)
        self.assertIn("timed out after", r.stderr)

    def test_t_without_a_terminal_is_refused(self):
        r = D.bkctl("exec", "-t", "--", "true", input="x")
        self.assertEqual(r.returncode, bkit.EXIT_FAILED, r.stderr)
        self.assertIn("-t: our standard input is not a terminal", r.stderr)
        r = D.bkctl("-o", "json", "exec", "-t", "--", "true")
        self.assertEqual(r.returncode, bkit.EXIT_FAILED, r.stderr)
        self.assertIn("-t does not go with -o json", r.stderr)


class StoppingExec(unittest.TestCase):
    """bkctl exec never leaves its command running: ^C, a second ^C, SIGTERM, SIGKILL."""

    def gone(self, *argv, timeout=60):
        bkit.wait_for(lambda: not sandbox_processes(*argv), timeout, what=f"{argv} to be gone from the sandbox")

    def test_ctrl_c_on_a_terminal_stops_the_remote_command(self):
        t = Terminal([str(bkit.BKCTL), "exec", "--shell", "echo ready; sleep 4402"], bkctl_env())
        t.read_until(rb"ready")
        bkit.wait_for(lambda: sandbox_processes("sleep", "4402"), 30, what="sleep 4402 to run")
        t.write(b"\x03")  # ^C: the terminal's SIGINT to bkctl, which passes it on
        self.assertEqual(t.wait(), 128 + signal.SIGINT, t.out)
        self.gone("sleep", "4402")

    def test_a_second_ctrl_c_kills_a_command_that_survives_the_first(self):
        script = "trap 'echo got-int' INT; echo ready; while :; do sleep 1; done"
        t = Terminal([str(bkit.BKCTL), "exec", "--shell", script], bkctl_env())
        t.consume(t.read_until(rb"ready"))
        t.write(b"\x03")
        # The first reaches the shell, which goes on (and only then the second is typed: two
        # SIGINTs pending at once would be one).
        t.consume(t.read_until(rb"got-int"))
        t.write(b"\x03")
        t.read_until(rb"interrupted again: killing the command")
        self.assertEqual(t.wait(), 128 + signal.SIGKILL, t.out)
        self.gone("/bin/sh", "-c", script)

    def test_sigterm_to_bkctl_stops_the_command(self):
        p = subprocess.Popen([bkit.BKCTL, "exec", "--shell", "echo ready; sleep 4404"], env=bkctl_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        bkit.wait_for(lambda: sandbox_processes("sleep", "4404"), 30, what="sleep 4404 to run")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        self.gone("sleep", "4404")

    def test_bkctl_killed_with_sigkill_leaves_nothing_running(self):
        p = subprocess.Popen([bkit.BKCTL, "exec", "--shell", "echo ready; sleep 4405"], env=bkctl_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        # The shell prints before it starts sleep: gone() below must not pass for a sleep that
        # has not started yet (it failed so under load, finding the process still running).
        bkit.wait_for(lambda: sandbox_processes("sleep", "4405"), 30, what="sleep 4405 to run")
        p.kill()
        p.wait()
        # The lease (15 s) runs out after the read bkctl left long-polling (10 s) has answered.
        self.gone("sleep", "4405", timeout=120)
        expired = [v for v in ps().values() if v["argv"][-1:] == ["echo ready; sleep 4405"]]
        self.assertEqual(len(expired), 1, ps())
        self.assertTrue(expired[0]["status"]["lease_expired"], expired[0])


    def test_a_bkctl_stopped_past_its_lease_exits_125_when_it_goes_on(self):
        # ^Z for longer than the lease: the command is killed, as for a bkctl that died, and bkctl
        # says so and exits 125 (bkctl's failure, as exec --help says), not 137 (the command's).
        p = subprocess.Popen([bkit.BKCTL, "exec", "--shell", "echo ready; sleep 4408"], env=bkctl_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        bkit.defer(bkit.stop_process, p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        bkit.wait_for(lambda: sandbox_processes("sleep", "4408"), 30, what="sleep 4408 to run")
        p.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        self.gone("sleep", "4408", timeout=120)
        # Stopped past the deadline of the read bkctl left waiting (its 10 s poll on top of the
        # 30 s client timeout): on SIGCONT that read's timer is due with its answer, and which
        # one nng takes first is chance — bkctl must tell the lease's kill either way (it asks
        # again). Not a timing assertion: the stop is made long enough for the worse case.
        time.sleep(max(0.0, stopped + 45 - time.monotonic()))
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, bkit.EXIT_FAILED, err)
        self.assertIn(b"killed because bkctl did not reach boxkited for 15 s", err)


class InteractiveTerminal(unittest.TestCase):
    def test_exec_it_sh_is_a_terminal_that_follows_resizes_and_takes_ctrl_c(self):
        t = Terminal([str(bkit.BKCTL), "exec", "-it", "--", "sh"], bkctl_env(), rows=30, cols=100)
        # What is typed is echoed by the remote terminal as it is typed: every answer is computed
        # by the shell ($((...)), tr), so that the echo of the command line never matches it.
        t.write(b"tty | tr / :; echo done-$((6*7))\r")
        m = t.read_until(rb"(\S*)\r\ndone-42\r\n")
        self.assertRegex(m.group(1), rb":dev:pts:\d+$")
        t.consume(m)
        t.write(b"echo size-$(stty size | tr ' ' x)-end\r")
        m = t.read_until(rb"size-(\d+x\d+)-end")
        self.assertEqual(m.group(1), b"30x100")
        t.consume(m)
        t.resize(41, 123)
        # The resize reaches the remote terminal asynchronously: ask until it shows (hang guard).
        deadline = time.monotonic() + 60
        while True:
            t.write(b"echo size-$(stty size | tr ' ' x)-end\r")
            m = t.read_until(rb"size-(\d+x\d+)-end")
            t.consume(m)
            if m.group(1) == b"41x123":
                break
            self.assertEqual(m.group(1), b"30x100")
            self.assertLess(time.monotonic(), deadline, "stty size never showed the new size")
        t.write(b"sleep 4406\r")
        bkit.wait_for(lambda: sandbox_processes("sleep", "4406"), 30, what="sleep 4406 to run")
        t.write(b"\x03")  # a byte for the remote terminal, whose line discipline interrupts sleep
        bkit.wait_for(lambda: not sandbox_processes("sleep", "4406"), 30, what="^C to interrupt sleep")
        t.write(b"echo still-$((40+2))\r")
        t.read_until(rb"still-42")
        t.write(b"exit 7\r")
        self.assertEqual(t.wait(), 7, t.out)

    def test_tty_output_shows_a_terminal(self):
        t = Terminal([str(bkit.BKCTL), "exec", "-it", "--", "tty"], bkctl_env())
        t.read_until(rb"/dev/pts/\d+")
        self.assertEqual(t.wait(), 0, t.out)

    def test_the_command_gets_our_term_and_clear_clears(self):
        # As docker exec -t: the remote terminal stands for ours, and full-screen programs need its
        # type (it was TERM=dumb, and clear failed).
        script = 'echo "term=$TERM-$((1+1))"; clear; echo "clear=$?-$((2+2))"'
        t = Terminal([str(bkit.BKCTL), "exec", "-it", "--", "sh", "-c", script],
                     dict(bkctl_env(), TERM="xterm-256color"))
        t.read_until(rb"term=xterm-256color-2\r\n")
        m = t.read_until(rb"clear=(\d+)-4")
        self.assertEqual(m.group(1), b"0", t.out)
        self.assertIn(b"\x1b[H\x1b[2J", t.out)  # what xterm-256color's terminfo says clears
        self.assertEqual(t.wait(), 0, t.out)
        # -e TERM=... is the caller's choice, kept.
        t = Terminal([str(bkit.BKCTL), "exec", "-it", "-e", "TERM=vt100", "--", "sh", "-c", 'echo "term=$TERM-$((1+1))"'],
                     dict(bkctl_env(), TERM="xterm-256color"))
        t.read_until(rb"term=vt100-2\r\n")
        self.assertEqual(t.wait(), 0, t.out)

    def test_raw_mode_is_given_back(self):
        script = f"stty -g; {bkit.BKCTL} exec -it -- sh -c 'exit 3'; echo rc=$?; stty -g"
        t = Terminal(["/bin/sh", "-c", script], bkctl_env())
        t.read_until(rb"rc=3\r\n[0-9a-f:]+\r\n")
        self.assertEqual(t.wait(), 0, t.out)
        settings = re.findall(rb"^[0-9a-f]+(?::[0-9a-f]+){10,}\r$", t.out, re.M)
        self.assertEqual(len(settings), 2, t.out)
        self.assertEqual(settings[0], settings[1], "the terminal's settings changed across bkctl exec -it")


class Reset(unittest.TestCase):
    """On a boxkited of its own: reset changes its key."""

    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("proc-reset", tcp=("127.0.0.1", bkit.free_tcp_port())).start()
        r = cls.d.bkctl("-o", "json", "reset")
        if r.returncode != 0 and "UNIMPLEMENTED" in r.stderr:
            raise unittest.SkipTest("this boxkited does not serve Reset yet (UNIMPLEMENTED)")
        assert r.returncode == 0, r.stdout + r.stderr

    def test_reset_kills_processes_empties_the_workspace_and_rotates_the_key(self):
        d = self.d
        pid = start("--", "sleep", "4407", daemon=d)
        bkit.wait_for(lambda: sandbox_processes("sleep", "4407"), 30, what="sleep 4407 to run")
        r = d.bkctl("exec", "--shell", "mkdir -p locked/in && echo x > locked/in/f && chmod 000 locked/in && "
                    "chmod 0555 locked && echo y > /tmp/t")
        self.assertEqual(r.returncode, 0, r.stderr)
        new_key = bkit.temp_dir("newkey") / "key"
        bkit.run([bkit.BKCTL, "keygen", "--id", "tenant2", new_key], check=True)
        r = d.bkctl("-o", "json", "reset", "--new-key", str(new_key), timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = json.loads(r.stdout)
        self.assertGreaterEqual(res["processes_killed"], 1)
        self.assertEqual((res["key_id"], res["key_file"]), ("tenant2", str(new_key)))
        self.assertFalse(sandbox_processes("sleep", "4407"))
        # The old key is refused, and the hint names the key a reset installed as one to use; the
        # new one works and finds a clean sandbox.
        r = d.bkctl("ps")
        self.assertEqual(r.returncode, 4, r.stderr)  # bkctl(1): authentication refused
        self.assertIn("or the one the last bkctl reset --new-key installed", r.stderr)
        env = dict(bkctl_env(d), BOXKITE_KEY_FILE=str(new_key))
        r = bkit.run([bkit.BKCTL, "-o", "json", "ps"], env=env)
        self.assertEqual((r.returncode, json.loads(r.stdout or "null")), (0, []), r.stderr)
        self.assertNotIn(pid, r.stdout)
        r = bkit.run([bkit.BKCTL, "-o", "json", "exec", "--shell", "ls -A /workspace /tmp"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["stdout"], "/tmp:\n\n/workspace:\n")

    def test_reset_new_key_says_which_key_file_to_use(self):
        d = bkit.Daemon("proc-reset-text").start()
        new_key = bkit.temp_dir("newkey-text") / "key"
        bkit.run([bkit.BKCTL, "keygen", new_key], check=True)
        r = d.bkctl("reset", "--new-key", str(new_key), timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"from now on: export BOXKITE_KEY_FILE={new_key} (or --key-file {new_key})", r.stdout)
        # The same key id, another secret: the old file's MAC is refused with the same hint.
        r = d.bkctl("ls")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("BAD_MAC", r.stderr)
        self.assertIn("or the one the last bkctl reset --new-key installed", r.stderr)

    def test_a_new_key_is_refused_over_plain_tcp(self):
        new_key = bkit.temp_dir("tcpkey") / "key"
        bkit.run([bkit.BKCTL, "keygen", new_key], check=True)
        host, port = self.d.tcp
        r = self.d.bkctl("reset", "--new-key", str(new_key), url=f"tcp://{host}:{port}")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("would cross the network in clear on a tcp:// URL", r.stderr)


if __name__ == "__main__":
    unittest.main()
