"""The egress grant through the Python client: a second language grants a command one destination
(ExecRequest.allow_net, docs/PROTOCOL.md "Egress") and the command reaches it through the
sidecar's proxy and nothing else; a grant beyond the ceiling is PERMISSION_DENIED before anything
runs. The destination is an HTTP server on the machine's loopback, which the ceiling names
exactly (loopback is never dialled otherwise): nothing outside the machine is dialled."""

import http.server
import os
import threading
import unittest

try:
    import boxkite_client as bk
    from boxkite_client import pb
    import boxkited_process
    IMPORT_ERROR = None
except ImportError as e:  # python3-protobuf missing, or gen/python not generated
    IMPORT_ERROR = "cannot import the client (%s); run with /usr/bin/python3 after make gen" % e

PERMISSION_DENIED = 7


def skip_reason():
    if IMPORT_ERROR:
        return IMPORT_ERROR
    if os.geteuid() != 0:
        return "boxkited makes a sandbox: needs root"
    return boxkited_process.missing_binaries()


SKIP_REASON = skip_reason()  # the runner (tests/integration/run.py) prints it after "SKIP"

# Fetched inside the sandbox through the proxy its environment names. NO_PROXY lists loopback, and
# this one destination is on loopback: the request's own variables replace it (they may replace
# any of the base's).
FETCH = ("import os, sys, urllib.request\n"
         "p = urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY']})\n"
         "try:\n"
         "    r = urllib.request.build_opener(p).open(sys.argv[1], timeout=10)\n"
         "    print(r.status, r.read().decode())\n"
         "except urllib.error.HTTPError as e:\n"
         "    print(e.code, e.headers.get('X-Boxkite-Egress'))\n")


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
        cls.daemon = boxkited_process.Boxkited(args=["--egress-allow", "127.0.0.1:%d" % cls.port]).__enter__()
        key_id, secret = bk.load_key_file(cls.daemon.key_file)
        cls.client = bk.Client("127.0.0.1", cls.daemon.port, key_id, secret, timeout=30.0)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.web.shutdown()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def exec(self, **kw):
        kw.setdefault("env", [pb.EnvVar(name="no_proxy", value=""), pb.EnvVar(name="NO_PROXY", value="")])
        reply = self.client.call("Exec", pb.ExecRequest(**kw), pb.ExecResponse)
        self.assertTrue(reply.verified)
        return reply.message

    def test_the_granted_destination_and_nothing_else(self):
        url = "http://127.0.0.1:%d/through-the-proxy" % self.port
        r = self.exec(argv=["/usr/bin/python3", "-c", FETCH, url], allow_net=["127.0.0.1:%d" % self.port])
        self.assertEqual((r.exit_code, r.stdout), (0, b"200 hello /through-the-proxy\n"), r.stderr)
        # Another port of the same address: the proxy refuses it (403, its header says so).
        other = "http://127.0.0.1:%d/" % (self.port + 1 if self.port < 65535 else self.port - 1)
        r = self.exec(argv=["/usr/bin/python3", "-c", FETCH, other], allow_net=["127.0.0.1:%d" % self.port])
        self.assertEqual((r.exit_code, r.stdout), (0, b"403 refused\n"), r.stderr)

    def test_no_grant_no_proxy(self):
        r = self.exec(shell="env | grep -ci _proxy; exit 0", env=[])
        self.assertEqual(r.stdout, b"0\n")

    def test_beyond_the_ceiling_nothing_runs(self):
        marker = os.path.join(self.daemon.workspace, "ran")
        for grant in ("127.0.0.1:%d" % (self.port ^ 1), "*:443", "pkg.example:80"):
            with self.assertRaises(bk.CallError) as e:
                self.exec(argv=["touch", "/workspace/ran"], allow_net=[grant])
            self.assertEqual(e.exception.code, PERMISSION_DENIED, e.exception)
            self.assertTrue(e.exception.verified)
            self.assertFalse(os.path.exists(marker), grant)
        with self.assertRaises(bk.CallError) as e:
            self.client.call("ProcessStart", pb.ProcessStartRequest(argv=["true"], allow_net=["*:443"]),
                             pb.ProcessStartResponse)
        self.assertEqual(e.exception.code, PERMISSION_DENIED)
