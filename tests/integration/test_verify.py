"""bkctl verify against a real sidecar: boxkited in a "pod" network namespace (bkit.NetPair)
whose address the client dials, with a cloud-metadata stand-in reachable from that namespace
that counts every connection it gets. verify must pass layers one and three from their vantage
points, say that a local-mode sidecar has no layer two, name each layer -- and never dial the
metadata address. Then: without the key it skips layer one and exits 5 (not a pass); against a
sidecar without a key layer three fails; on the pod emulation it prints layer two's kubectl
commands, and a probe made to hang inside the exec is reported as a hang."""
import json
import os
import subprocess
import unittest

import bkit

N = D = HITS = None

# A TCP listener that prints one line per connection it accepts (and closes it).
COUNTING_LISTENER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("listening", flush=True)
while True:
    c, a = s.accept()
    print("hit", a[0], flush=True)
    c.close()
"""


def setUpModule():
    global N, D, HITS
    bkit.require_root()
    bkit.require_build()
    bkit.require_tools("ip")
    N = bkit.NetPair(tag="verify")
    HITS = bkit.popen([bkit.PYTHON, "-u", "-c", COUNTING_LISTENER, N.METADATA, 80], netns=N.cloud,
                      stdout=subprocess.PIPE, text=True)
    assert HITS.stdout.readline().strip() == "listening"
    D = bkit.Daemon("verify", tcp=(N.POD_ADDR, 7700), netns=N.pod).start()


def verify(daemon, *args, url, netns=None):
    r = daemon.bkctl("-o", "json", "verify", *args, url=url, netns=netns, timeout=90)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"bkctl verify: {r.returncode} {r.stdout!r} {r.stderr!r}")
    return r.returncode, {(c["layer"], c["check"]): c for c in out["checks"]}, out


class Verify(unittest.TestCase):
    def test_layers_from_their_vantage_points(self):
        url = f"tcp://{N.POD_ADDR}:7700"
        # Control: the sidecar's address is reachable from the pod's namespace (the client's
        # side here), so an exec that were in it would connect.
        r = bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, N.POD_ADDR, 7700], netns=N.pod)
        self.assertEqual(r.stdout.strip(), "connected", r)
        rc, checks, out = verify(D, "--pod", "sb-7", url=url, netns=N.pod)
        self.assertEqual((rc, out["failed"]), (0, 0), out)
        want = {
            (1, "interfaces"): ("PASS", "inside an exec", r"^lo$"),
            (1, "routes"): ("PASS", "inside an exec", r"^none"),
            (1, "the sidecar's port"): ("PASS", "inside an exec",
                                        rf"^{N.POD_ADDR}:7700 refused .*unreachable.*; 127\.0\.0\.1:7700 refused"),
            (1, "the cloud metadata endpoint"): ("NOT RUN HERE", "inside an exec", r"bkctl exec -- curl"),
            (1, "the egress proxy's port, for an exec granted nothing"): ("PASS", "inside an exec",
                                                                         r"^nothing listens on 127\.0\.0\.1:3128$"),
            (1, "egress ceiling"): ("PASS", "keyed Health", r"^none: no exec can be granted"),
            (2, "the pod's NetworkPolicy"): ("NO SUCH LAYER", "the sidecar's network namespace",
                                             r"local mode: there is no pod, so no NetworkPolicy"),
            (3, "Health without a key"): ("PASS", "without the key", r"a key is configured"),
            (3, "Exec without a key"): ("PASS", "without the key", r"^UNAUTHENTICATED/UNKNOWN_KEY$"),
            (3, "Exec with a guessed key"): ("PASS", "without the key", r"UNAUTHENTICATED/BAD_MAC$"),
        }
        for key, (verdict, vantage, detail) in want.items():
            with self.subTest(key):
                c = checks.get(key)
                self.assertIsNotNone(c, sorted(checks))
                self.assertEqual(c["verdict"], verdict, c)
                self.assertIn(vantage, c["vantage"])
                self.assertRegex(c["detail"], detail)
        self.assertEqual(out["mode"], "local")
        self.assertFalse([k for k in checks if k[0] == 2 and "kubectl" in checks[k]["detail"]],
                         "no kubectl command for a layer that is not there")

    def test_without_the_key_layer_one_is_skipped_and_that_is_no_pass(self):
        url = f"tcp://{N.POD_ADDR}:7700"
        env = {k: v for k, v in os.environ.items() if not k.startswith("BOXKITE_")}
        r = bkit.run([bkit.BKCTL, "--url", url, "-o", "json", "verify"], env=env, netns=N.pod, timeout=90)
        out = json.loads(r.stdout)
        checks = {(c["layer"], c["check"]): c for c in out["checks"]}
        self.assertEqual(checks[(1, "exec")]["verdict"], "SKIPPED", out)
        # The egress ceiling too: the sidecar tells it a keyed caller only.
        self.assertEqual(checks[(1, "egress ceiling")]["verdict"], "SKIPPED", out)
        self.assertNotIn("egress_ceiling", out)
        self.assertEqual((r.returncode, out["failed"], out["skipped"]), (5, 0, 2), out)
        self.assertEqual(checks[(3, "Exec without a key")]["verdict"], "PASS", "layer three runs without one")
        r = bkit.run([bkit.BKCTL, "--url", url, "verify"], env=env, netns=N.pod, timeout=90)
        self.assertEqual(r.returncode, 5)
        self.assertIn("verify: INCOMPLETE: 2 check(s) skipped, which is not a pass", r.stdout)
        self.assertNotIn("every check run here passed", r.stdout)

    def test_over_ipc_the_socket_is_invisible(self):
        rc, checks, out = verify(D, url=D.url)
        self.assertEqual(rc, 0, out)
        self.assertEqual(checks[(1, "the sidecar's ipc socket")]["verdict"], "PASS")
        self.assertTrue(D.sock.exists(), "control: the socket is there on the sidecar's side")

    def test_metadata_never_dialled(self):
        """Everything above ran; the stand-in (reachable from the pod namespace) saw nothing.
        Control: a connect from the pod namespace is counted."""
        self.test_layers_from_their_vantage_points()
        bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, N.METADATA, 80], netns=N.pod, check=True)
        line = HITS.stdout.readline().strip()
        self.assertEqual(line, f"hit {N.POD_ADDR}", "the control connection is the first one the stand-in saw")


class VerifyCanFail(unittest.TestCase):
    def test_a_sidecar_without_a_key_fails_layer_three(self):
        d = bkit.Daemon("verify-nokey")
        argv = [a for a in d.argv() if a not in ("--key-file", str(d.key))]
        log = open(d.log, "wb")
        p = bkit.popen(argv, stdout=log, stderr=log)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BOXKITE_")}
        bkit.wait_for(lambda: bkit.run([bkit.BKCTL, "--url", d.url, "health"], env=env).returncode == 0, 15,
                      what="the keyless boxkited")
        r = bkit.run([bkit.BKCTL, "--url", d.url, "-o", "json", "verify"], env=env, timeout=90)
        out = json.loads(r.stdout)
        rc, checks = r.returncode, {(c["layer"], c["check"]): c for c in out["checks"]}
        self.assertEqual(checks[(1, "exec")]["verdict"], "SKIPPED", "no key: no exec")
        self.assertEqual(rc, 1, out)
        self.assertEqual(checks[(3, "Health without a key")]["verdict"], "FAIL")
        self.assertEqual(checks[(3, "Exec without a key")]["verdict"], "FAIL")
        self.assertRegex(checks[(3, "Exec without a key")]["detail"], "^UNAVAILABLE/AUTH_NOT_CONFIGURED$")
        bkit.stop_process(p)
        log.close()


# Stands in for bash in the sandbox container: the probe's connect, which fails at once when layer
# one holds, waits instead -- as a connect whose packets left the exec's namespace would.
HANGING_BASH = "#!/bin/sh\nexec sleep 600\n"


class VerifyInAPod(unittest.TestCase):
    """On the pod emulation (bkit.Pod, mode "pod"): layer two is printed as the kubectl commands
    to run; a probe that hangs is a hang (exit 1), not "did not run"."""

    @classmethod
    def setUpClass(cls):
        bkit.require_tools("unshare", "nsenter", "setpriv")
        cls.scope = bkit.scope()
        cls.scope.__enter__()
        port = bkit.free_tcp_port()
        cls.pod = bkit.Pod(tag="verify-pod")
        cls.d = cls.pod.daemon
        cls.d.tcp = ("127.0.0.1", port)
        cls.d.start()
        cls.pod.start_container()
        bkit.wait_for(lambda: cls.d.health().get("sandbox_ready") is True, 30, what="the sandbox container")
        cls.url = f"tcp://127.0.0.1:{port}"

    @classmethod
    def tearDownClass(cls):
        cls.scope.__exit__(None, None, None)

    def test_layer_two_is_printed_for_the_pod(self):
        rc, checks, out = verify(self.d, "--pod", "sb-9", url=self.url)
        self.assertEqual((rc, out["mode"], out["failed"], out["skipped"]), (0, "pod", 0, 0), out)
        self.assertEqual(checks[(1, "interfaces")]["verdict"], "PASS")
        for check in ("egress to the metadata endpoint", "the policy selects the live pod"):
            self.assertEqual(checks[(2, check)]["verdict"], "NOT RUN HERE")
        self.assertRegex(checks[(2, "egress to the metadata endpoint")]["detail"],
                         r"kubectl exec -n boxkite sb-9 -c sidecar -- curl")

    def test_a_hanging_probe_is_a_hang(self):
        fake = self.pod.workspace / "hanging-bash"
        fake.write_text(HANGING_BASH)
        os.chmod(fake, 0o755)
        bkit.run(["nsenter", "-t", str(self.pod.init_pid), "-m", "-p", "--", "mount", "--bind", "/workspace/hanging-bash",
                  "/usr/bin/bash"], check=True)
        try:
            # Control: inside the sandbox container, bash is now the stand-in.
            r = self.pod.nsenter_container("/bin/sh", "-c", "command -v bash && head -c 9 /usr/bin/bash")
            self.assertIn("#!/bin/sh", r.stdout)
            rc, checks, out = verify(self.d, url=self.url)
        finally:
            bkit.run(["nsenter", "-t", str(self.pod.init_pid), "-m", "-p", "--", "umount", "/usr/bin/bash"], check=True)
        c = checks[(1, "exec")]
        self.assertEqual(c["verdict"], "HANG", out)
        self.assertRegex(c["detail"], r"did not finish in 20 s: .*\(a connect to 127\.0\.0\.1")
        self.assertEqual((rc, out["failed"]), (1, 1), out)


if __name__ == "__main__":
    unittest.main()
