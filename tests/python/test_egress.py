"""The egress grant through the boxkite package: a second language grants a command one
destination (``allow_net``, docs/PROTOCOL.md "Egress") and the command reaches it through the
sidecar's proxy and nothing else; a grant beyond the ceiling is PermissionDeniedError before
anything runs; Health tells a keyed caller the ceiling, and no one else. The destination is an HTTP
server on the machine's loopback, which the ceiling names exactly (loopback is never dialled
otherwise): nothing outside the machine is dialled."""

import http.server
import os
import threading
import unittest

import boxkited_process

try:
    import boxkite
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"

# Fetched inside the sandbox through the proxy its environment names; NO_PROXY lists loopback,
# which this one destination is, so the request's own variables empty it (a request's variables
# may replace any of the base's). Prints the status, and the proxy's header on a refusal.
FETCH = ("import os, sys, urllib.error, urllib.request\n"
         "p = urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY']})\n"
         "try:\n"
         "    r = urllib.request.build_opener(p).open(sys.argv[1], timeout=10)\n"
         "    print(r.status, r.read().decode())\n"
         "except urllib.error.HTTPError as e:\n"
         "    print(e.code, e.headers.get('X-Boxkite-Egress'))\n")
NO_NO_PROXY = {"no_proxy": "", "NO_PROXY": ""}


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class EgressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.web = http.server.HTTPServer(("127.0.0.1", 0), Hello)
        threading.Thread(target=cls.web.serve_forever, daemon=True).start()
        cls.port = cls.web.server_address[1]
        cls.grant = "127.0.0.1:%d" % cls.port
        cls.daemon = boxkited_process.Boxkited(args=["--egress-allow", cls.grant]).__enter__()
        cls.client = cls.daemon.client(timeout=30.0)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.web.shutdown()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def fetch(self, path, grant, port=None):
        url = "http://127.0.0.1:%d%s" % (port or self.port, path)
        return self.client.exec(["/usr/bin/python3", "-c", FETCH, url], env=NO_NO_PROXY, allow_net=grant)

    def test_the_granted_destination_and_nothing_else(self):
        r = self.fetch("/through-the-proxy", [self.grant])
        self.assertEqual((r.exit_code, r.stdout), (0, b"200 hello /through-the-proxy\n"), r.stderr)
        # One str is one pattern, not its characters.
        r = self.fetch("/one-str", self.grant)
        self.assertEqual((r.exit_code, r.stdout), (0, b"200 hello /one-str\n"), r.stderr)
        # Another port of the same address: the proxy refuses it (403, its header says so).
        other = self.port + 1 if self.port < 65535 else self.port - 1
        r = self.fetch("/", [self.grant], port=other)
        self.assertEqual((r.exit_code, r.stdout), (0, b"403 refused\n"), r.stderr)

    def test_a_background_process_too(self):
        url = "http://127.0.0.1:%d/process" % self.port
        p = self.client.start(["/usr/bin/python3", "-c", FETCH, url], env=NO_NO_PROXY, allow_net=[self.grant])
        status = p.wait(timeout=30)
        self.assertEqual(status.exit_code, 0, status)
        self.assertEqual(p.read().stdout.data, b"200 hello /process\n")

    def test_no_grant_no_proxy(self):
        r = self.client.exec("env | grep -ci _proxy; exit 0")
        self.assertEqual(r.stdout, b"0\n")

    def test_beyond_the_ceiling_nothing_runs(self):
        marker = os.path.join(self.daemon.workspace, "ran")
        for grant in ("127.0.0.1:%d" % (self.port ^ 1), "*:443", "pkg.example:80"):
            with self.assertRaises(boxkite.PermissionDeniedError) as e:
                self.client.exec(["touch", "/workspace/ran"], allow_net=[grant])
            self.assertTrue(e.exception.verified, e.exception)
            self.assertFalse(os.path.exists(marker), grant)
        with self.assertRaises(boxkite.PermissionDeniedError):
            self.client.start(["touch", "/workspace/ran"], allow_net="*:443")
        self.assertFalse(os.path.exists(marker))
        with self.assertRaises(ValueError):
            self.client.exec("true", allow_net=[""])

    def test_health_tells_a_keyed_caller_the_ceiling(self):
        self.assertEqual(self.client.health().egress_ceiling, (self.grant,))
        with self.daemon.client(key_file=None, timeout=30.0) as anonymous:
            h = anonymous.health()
        self.assertFalse(h.authenticated)
        self.assertEqual(h.egress_ceiling, ())


if __name__ == "__main__":
    unittest.main()
