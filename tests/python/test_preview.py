"""Previews through a real boxkited (local mode, as root): --preview-listen relays
/preview/PORT/TOKEN/PATH to a port a background process exposes, for the holder of a signed,
expiring, per-port token — and refuses everything else before it reaches the sandbox. Tokens are
minted here from common/preview.h's format alone, as a client in another language would."""

import http.client
import json
import os
import socket
import subprocess
import time
import unittest

import boxkited_process

try:
    from boxkite import errors, wire
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)
GUARD_S = 30


def token(key_id, secret, port, expires):
    return wire.preview_token(wire.Key(key_id, secret), port, expires)


ECHO = r"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d))
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
head = b""
while b"\r\n\r\n" not in head:
    head += c.recv(4096)
c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
          + b"line:" + head.split(b"\r\n")[0] + b"\n")
while True:
    b = c.recv(4096)
    if not b:
        break
    c.sendall(b.upper())
"""


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PreviewTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.preview_port = boxkited_process.free_tcp_port()
        cls.daemon = boxkited_process.Boxkited(args=[
            "--preview-listen", "http://127.0.0.1:%d" % cls.preview_port, "--preview-ttl-max", "3600"]).__enter__()
        cls.key = wire.load_key_file(cls.daemon.key_file)
        cls.client = wire.Channel(cls.daemon.url, key=cls.key, timeout=GUARD_S)
        with open(os.path.join(cls.daemon.workspace, "hello.txt"), "w") as f:
            f.write("hello from the sandbox\n")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def start(self, **kw):
        return self.client.call("ProcessStart", pb.ProcessStartRequest(**kw), pb.ProcessStartResponse).message.process_id

    def stop(self, pid):
        # A process may end first on its own (the echo ends with its connection): then there is
        # nothing to signal, and the wait below still collects it.
        try:
            self.client.call("ProcessSignal", pb.ProcessSignalRequest(process_id=pid, signal=9),
                             pb.ProcessSignalResponse)
        except errors.FailedPreconditionError as e:
            if "has ended" not in str(e):
                raise
        self.client.call("ProcessWait", pb.ProcessWaitRequest(process_id=pid, wait_ms=GUARD_S * 1000),
                         pb.ProcessWaitResponse)

    def wait_output(self, pid, needle):
        deadline, got = time.monotonic() + GUARD_S, b""
        while needle not in got and time.monotonic() < deadline:
            r = self.client.call("ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=len(got),
                                                                    stderr_offset=0, wait_ms=2000),
                                 pb.ProcessReadResponse)
            got += r.data[:r.message.stdout.length]
        self.assertIn(needle, got)

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.preview_port, timeout=GUARD_S)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def good(self, port, ttl=600):
        return token(self.key.key_id, self.key.secret, port, int(time.time()) + ttl)

    def test_a_preview_reaches_the_exposed_port_and_nothing_else_does(self):
        port = 8100
        pid = self.start(argv=["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                         cwd="/workspace", expose_port=port)
        try:
            deadline = time.monotonic() + GUARD_S
            status, body = 0, b""
            while time.monotonic() < deadline:
                status, body = self.get("/preview/%d/%s/hello.txt" % (port, self.good(port)))
                if status == 200:
                    break
                time.sleep(0.2)
            self.assertEqual((status, body), (200, b"hello from the sandbox\n"))
            # Query strings and the bare root pass too.
            self.assertEqual(self.get("/preview/%d/%s?x=1" % (port, self.good(port)))[0], 200)
            # Refused, and why: forged, expired, another port's, too long-lived, another key's.
            t = self.good(port)
            forged = t[:-2] + ("AA" if t[-2:] != "AA" else "BB")
            for path, code, why in (
                    ("/preview/%d/%s/hello.txt" % (port, forged), 403, b"bad_mac"),
                    ("/preview/%d/%s/hello.txt" % (port, token(self.key.key_id, self.key.secret, port, int(time.time()) - 1)),
                     403, b"expired"),
                    ("/preview/%d/%s/hello.txt" % (port, self.good(port + 1)), 403, b"wrong_port"),
                    ("/preview/%d/%s/hello.txt" % (port, self.good(port, ttl=7200)), 403, b"too_long"),
                    ("/preview/%d/%s/hello.txt" % (port, token(self.key.key_id, os.urandom(32), port,
                                                               int(time.time()) + 60)), 403, b"bad_mac"),
                    ("/preview/%d/%s/hello.txt" % (port + 1, self.good(port + 1)), 404, b"no process exposes"),
                    ("/hello.txt", 400, b"/preview/PORT/TOKEN/PATH"),
                    ("/preview/0/%s/" % t, 400, b"/preview/PORT/TOKEN/PATH")):
                got = self.get(path)
                self.assertEqual(got[0], code, (path, got))
                self.assertIn(why, got[1].lower() if why.islower() else got[1], (path, got))
                self.assertNotIn(b"hello from the sandbox", got[1])
        finally:
            self.stop(pid)
        # Once the process is gone, so is its preview.
        self.assertEqual(self.get("/preview/%d/%s/hello.txt" % (port, self.good(port)))[0], 404)

    def test_bkctl_preview_prints_a_url_that_works(self):
        port = 8400
        pid = self.start(argv=["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                         cwd="/workspace", expose_port=port)
        try:
            base = "http://127.0.0.1:%d" % self.preview_port
            r = subprocess.run([boxkited_process.BKCTL, "--key-file", self.daemon.key_file, "-o", "json", "preview",
                                "--ttl", "120", "--base", base + "/", str(port)], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertTrue(out["url"].startswith(base + "/preview/%d/" % port), out)
            self.assertEqual(out["port"], port)
            self.assertLessEqual(abs(out["expires"] - (time.time() + 120)), 5)
            path = out["url"][len(base):] + "hello.txt"
            deadline, status, body = time.monotonic() + GUARD_S, 0, b""
            while time.monotonic() < deadline:
                status, body = self.get(path)
                if status == 200:
                    break
                time.sleep(0.2)
            self.assertEqual((status, body), (200, b"hello from the sandbox\n"))
            # Past the server's --preview-ttl-max (3600 here): refused.
            r = subprocess.run([boxkited_process.BKCTL, "--key-file", self.daemon.key_file, "preview", "--ttl",
                                "7200", "--base", base, str(port)], capture_output=True, text=True)
            self.assertEqual(self.get(r.stdout.strip()[len(base):] + "hello.txt")[0], 403)
            # Without a key there is nothing to sign with.
            r = subprocess.run([boxkited_process.BKCTL, "preview", str(port)], capture_output=True, text=True,
                               env={"PATH": os.environ.get("PATH", "")})
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn("key", r.stderr)
        finally:
            self.stop(pid)

    def test_a_port_listened_on_without_exposing_it_is_not_reachable(self):
        port = 8200
        pid = self.start(argv=["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"])
        try:
            time.sleep(1.0)
            self.assertEqual(self.get("/preview/%d/%s/" % (port, self.good(port)))[0], 404)
        finally:
            self.stop(pid)

    def test_an_upgraded_connection_is_relayed_both_ways(self):
        # What a WebSocket needs: the 101 answer, then bytes both ways on the same connection.
        port = 8300
        pid = self.start(argv=["python3", "-c", ECHO % port], expose_port=port)
        try:
            self.wait_output(pid, b"listening")
            s = socket.create_connection(("127.0.0.1", self.preview_port), timeout=GUARD_S)
            s.sendall(("GET /preview/%d/%s/chat?room=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\n\r\n" % (port, self.good(port))).encode())
            got = b""
            while b"\nline:" not in got or not got.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            self.assertTrue(got.startswith(b"HTTP/1.1 101 "), got)
            self.assertIn(b"line:GET /chat?room=1 HTTP/1.1\n", got, "the preview's part of the path is gone")
            for msg in (b"ping", b"x" * 100000):
                s.sendall(msg)
                back = b""
                while len(back) < len(msg):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    back += chunk
                self.assertEqual(back, msg.upper())
            s.close()
        finally:
            self.stop(pid)

    def test_a_listener_that_never_accepts_holds_up_no_exec(self):
        # Backlog 0 and never an accept(): loopback takes one connection into the queue, and
        # every SYN after it waits for its retries (two minutes). The executor made those
        # connections itself, blocked in connect(), and every exec waited behind it (6.2 s
        # measured, up to two minutes each). Now it hands the socket over at once and the relay
        # waits (5 s, then 502): execs run meanwhile. Previews are kept pending all along here.
        import threading
        port = 8500
        pid = self.start(argv=["python3", "-c", BACKLOG0 % port], expose_port=port)
        try:
            self.wait_output(pid, b"listening")
            stop, pending, answers = threading.Event(), [0], []
            lock = threading.Lock()

            def previews():
                while not stop.is_set():
                    with lock:
                        pending[0] += 1
                    try:
                        answers.append(self.get("/preview/%d/%s/" % (port, self.good(port)))[0])
                    except OSError as e:
                        answers.append(str(e))
                    with lock:
                        pending[0] -= 1
            threads = [threading.Thread(target=previews, daemon=True) for _ in range(3)]
            for t in threads:
                t.start()
            time.sleep(0.5)  # the previews on their way in; asserted below, not timed
            with wire.Channel(self.daemon.url, key=self.key, timeout=GUARD_S) as c:
                for i in range(20):
                    r = c.call("Exec", pb.ExecRequest(argv=["echo", str(i)]), pb.ExecResponse).message
                    self.assertEqual(r.stdout, b"%d\n" % i)
                    with lock:
                        self.assertGreater(pending[0], 0, "no preview was waiting while the execs ran")
            stop.set()
            for t in threads:
                t.join(GUARD_S)
            # The connections that could not be made were answered, not left hanging.
            self.assertIn(502, answers, answers)
        finally:
            self.stop(pid)


BACKLOG0 = r"""
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d))
s.listen(0)
print("listening", flush=True)
time.sleep(600)
"""


if __name__ == "__main__":
    unittest.main()
