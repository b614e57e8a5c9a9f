"""The transport around the envelope: tls+tcp:// with a pinned certificate, the second (HTTP)
listener's probes and Prometheus metrics, the per-request audit line, and a key given by
environment variable (--key-env, as a Kubernetes secretKeyRef gives it). All on loopback."""
import json
import os
import re
import secrets
import signal
import unittest

import bkit

D = None
API = HTTP = CERT = OTHER_CERT = None


def setUpModule():
    global D, API, HTTP, CERT, OTHER_CERT
    bkit.require_root()
    bkit.require_build()
    tls = bkit.temp_dir("tls")
    CERT, key = bkit.tls_files(tls, "bk-transport")
    other = bkit.temp_dir("tls-other")
    OTHER_CERT, _ = bkit.tls_files(other, "bk-transport")  # same name, another key: a forgery
    API = f"tls+tcp://127.0.0.1:{bkit.free_tcp_port()}"
    HTTP = f"http://127.0.0.1:{bkit.free_tcp_port()}"
    D = bkit.Daemon("transport", key_env="BOXKITE_TEST_KEY",
                    args=["--listen", API, "--tls-cert", CERT, "--tls-key", key, "--http-listen", HTTP]).start()


def metrics():
    code, text = bkit.http_get(HTTP + "/metrics")
    assert code == 200, (code, text)
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class Tls(unittest.TestCase):
    def test_pinned_certificate_works_and_the_envelope_stays_on(self):
        r = D.bkctl("--url", API, "--tls-cert", CERT, "-o", "json", "exec", "--", "id", "-u")
        self.assertEqual((r.returncode, json.loads(r.stdout).get("stdout")), (0, "1001\n"), r.stderr)
        # Inside TLS, a request without a key is still refused by the envelope.
        env = {k: v for k, v in os.environ.items() if k != "BOXKITE_KEY_FILE"}
        r = bkit.run([bkit.BKCTL, "--url", API, "--tls-cert", CERT, "exec", "--", "true"], env=env)
        self.assertEqual(r.returncode, bkit.EXIT_FAILED, r.stderr)
        self.assertIn("UNAUTHENTICATED", r.stderr)

    def test_another_certificate_of_the_same_name_is_refused(self):
        r = D.bkctl("--url", API, "--tls-cert", OTHER_CERT, "--timeout", "5", "health")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("cannot connect", r.stderr)

    def test_no_pin_is_refused_before_dialling(self):
        r = D.bkctl("--url", API, "--timeout", "5", "health")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs the server's certificate", r.stderr)

    def test_plain_tcp_to_the_tls_port_gets_nothing(self):
        r = D.bkctl("--url", API.replace("tls+tcp", "tcp"), "--timeout", "5", "health")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)

    def test_what_goes_on_the_wire_is_not_the_envelope(self):
        """A TLS ClientHello is what the port speaks: an SP (nng) greeting gets no SP answer."""
        import socket
        host, port = API.split("://")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), 5) as s:
            s.settimeout(5)
            s.sendall(b"\x00SP\x00\x00\x30\x00\x00")  # nng's REQ greeting, in the clear
            try:
                data = s.recv(64)
            except OSError:
                data = b""
        self.assertFalse(data.startswith(b"\x00SP\x00"), f"a plain SP answer on the TLS port: {data!r}")


class Http(unittest.TestCase):
    def test_probes(self):
        self.assertEqual(bkit.http_get(HTTP + "/livez"), (200, "ok\n"))
        self.assertEqual(bkit.http_get(HTTP + "/readyz"), (200, "ready\n"))
        self.assertEqual(bkit.http_get(HTTP + "/nothing")[0], 404)
        self.assertEqual(bkit.http_get(HTTP + "/metrics", method="POST")[0], 405)

    def test_readyz_wants_an_executor_that_answers(self):
        ex = D.executor_pid()
        os.kill(ex, signal.SIGSTOP)
        try:
            code, body = bkit.wait_for(lambda: (lambda r: r if r[0] == 503 else None)(bkit.http_get(HTTP + "/readyz")),
                                       15, interval=0.25, what="/readyz to say not ready")
            self.assertEqual(body, "not ready: the executor does not answer\n")
            self.assertEqual(bkit.http_get(HTTP + "/livez")[0], 200, "the process still answers")
        finally:
            os.kill(ex, signal.SIGCONT)
        bkit.wait_for(lambda: bkit.http_get(HTTP + "/readyz")[0] == 200, 15, what="/readyz to come back")

    def test_metrics_count_what_happened(self):
        before = metrics()
        ok = 'boxkite_requests_total{method="Exec",status="OK"}'
        unauth = 'boxkite_requests_total{method="Exec",status="UNAUTHENTICATED"}'
        bad_mac = 'boxkite_auth_failures_total{reason="bad_mac"}'
        rc, res, err = D.exec_json("--", "true")
        self.assertEqual(rc, 0, err)
        rc, res, err = D.exec_json("--timeout", "1", "--", "sleep", "30")
        self.assertEqual(rc, bkit.EXIT_TIMEOUT, err)
        wrong = D.dir / "wrong-key"
        wrong.write_text(f"k1 {secrets.token_hex(32)}\n")
        os.chmod(wrong, 0o600)
        # -o json: the one Exec call these counters are about (streamed, bkctl exec is ProcessStart).
        r = bkit.run([bkit.BKCTL, "--url", D.url, "--key-file", wrong, "-o", "json", "exec", "--", "true"])
        self.assertIn("BAD_MAC", r.stderr)
        after = metrics()
        delta = lambda k: after.get(k, 0) - before.get(k, 0)
        self.assertEqual(delta(ok), 2, "the exec and the timed-out exec both answered OK")
        self.assertEqual(delta(unauth), 1)
        self.assertEqual(delta(bad_mac), 1)
        self.assertEqual(delta("boxkite_exec_timeouts_total"), 1)
        self.assertEqual(delta("boxkite_exec_duration_seconds_count"), 2)
        self.assertGreaterEqual(delta("boxkite_exec_duration_seconds_sum"), 1.0, "the timed-out one ran 1 s")
        self.assertEqual(delta('boxkite_exec_duration_seconds_bucket{le="+Inf"}'), 2)
        self.assertGreater(delta("boxkite_received_bytes_total"), 0)
        self.assertGreater(delta("boxkite_sent_bytes_total"), 0)
        self.assertEqual(after["boxkite_execs_running"], 0)
        self.assertGreaterEqual(after["boxkite_replay_cache_entries"], 2)
        self.assertEqual(after["boxkite_sandbox_ready"], 1)
        self.assertEqual(after["boxkite_exec_oom_kills_total"], before["boxkite_exec_oom_kills_total"])

    def test_execs_running_gauge(self):
        token = f"30.{secrets.randbelow(10**6):06d}"
        bg = bkit.popen([bkit.BKCTL, "--url", D.url, "--key-file", D.key, "-o", "json", "exec", "--timeout", "30",
                         "--", "sleep", token], stdout=bkit.subprocess.DEVNULL, stderr=bkit.subprocess.DEVNULL)
        bkit.wait_for(lambda: bkit.find_processes(bkit.SANDBOX_UID, ["sleep", token]), 10, what="the sleep")
        self.assertEqual(metrics()["boxkite_execs_running"], 1)
        for pid in bkit.find_processes(bkit.SANDBOX_UID, ["sleep", token]):
            os.kill(pid, signal.SIGKILL)
        bg.wait(timeout=10)
        bkit.wait_for(lambda: metrics()["boxkite_execs_running"] == 0, 5, what="the gauge to fall back")


class Audit(unittest.TestCase):
    def test_one_json_line_per_request_and_no_secret(self):
        marker = f"audit-{secrets.token_hex(4)}"
        before = len(D.log.read_text(errors="replace").splitlines())
        rc, res, err = D.exec_json("--", "echo", marker)
        self.assertEqual(rc, 0, err)
        D.bkctl("--key-file", "/dev/null", "health")
        lines = [json.loads(l) for l in D.log.read_text(errors="replace").splitlines()[before:] if '"method"' in l]
        execs = [l for l in lines if l["method"] == "Exec"]
        self.assertEqual(len(execs), 1, lines)
        e = execs[0]
        self.assertEqual((e["key"], e["status"]), ("k1", "OK"))
        for field in ("ts", "duration_us", "bytes_in", "bytes_out"):
            self.assertIn(field, e)
        self.assertGreater(e["bytes_in"], 0)
        self.assertGreater(e["bytes_out"], 0)
        log = D.log.read_text(errors="replace")
        self.assertNotIn(D.key_secret, log)
        self.assertNotIn(marker, log, "command output is not logged")

    def test_the_key_left_the_environment(self):
        """--key-env: the variable is gone from boxkited's environment (what /proc shows of it)."""
        for pid in (D.front_pid(), D.executor_pid()):
            env = open(f"/proc/{pid}/environ", "rb").read()
            self.assertNotIn(D.key_secret.encode(), env, pid)
            self.assertNotIn(b"BOXKITE_TEST_KEY=k", env)
        rc, res, err = D.exec_json("--", "true")
        self.assertEqual(rc, 0, "and the key works: " + err)


class SecretFiles(unittest.TestCase):
    """A TLS private key and S3 credentials are secrets like the key file: boxkited refuses to
    start with one that group or others may read (it accepted both before)."""

    def start_with(self, tag, *args):
        d = bkit.Daemon(tag, args=args)
        r = bkit.run(d.argv(), timeout=30)
        return r.returncode, r.stderr

    def test_a_tls_key_others_may_read_is_refused(self):
        tls = bkit.temp_dir("tls-open")
        cert, key = bkit.tls_files(tls, "bk-open")
        os.chmod(key, 0o644)
        url = f"tls+tcp://127.0.0.1:{bkit.free_tcp_port()}"
        rc, err = self.start_with("tls-open", "--listen", url, "--tls-cert", cert, "--tls-key", key)
        self.assertNotEqual(rc, 0, err)
        self.assertIn(f"--tls-key {key} has mode 0644: group or others may access it", err)
        os.chmod(key, 0o600)
        d = bkit.Daemon("tls-closed", args=["--listen", url, "--tls-cert", cert, "--tls-key", key]).start()
        d.stop()

    def test_s3_credentials_others_may_read_are_refused(self):
        creds = bkit.temp_dir("s3-open") / "credentials"
        creds.write_text("AKIDEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n")
        os.chmod(creds, 0o640)
        rc, err = self.start_with("s3-open", "--s3-credentials", creds)
        self.assertNotEqual(rc, 0, err)
        self.assertIn(f"--s3-credentials {creds} has mode 0640: group or others may access it", err)
        self.assertNotIn("wJalrXUtnFEMI", err)


if __name__ == "__main__":
    unittest.main()
