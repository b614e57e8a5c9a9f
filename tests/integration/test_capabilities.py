"""The sidecar's capability list is proven, not guessed (DESIGN.md section 8).

The list is read from the manifest (deploy/sandbox/pod.yaml, the sidecar's
securityContext.capabilities.add, with drop: [ALL]). The real boxkited --pod, with the manifest's
arguments (its TLS listener, HTTP probes and --key-env, on loopback ports here, and an egress
ceiling naming one loopback destination), runs on the
emulated pod (bkit.Pod) as a container with exactly that list would (sidecar_container.sh: bounding set
reduced to it, inheritable and ambient empty, /sys/fs/cgroup read-only) and must pass the exec
and file checks below. Then once per listed capability with that one removed: some check must
fail, or the capability is not needed and the manifest must lose it. So the test fails when the
manifest's list and the proven list differ either way -- whatever the executor becomes, it
re-proves the list the manifest says.
"""
import filecmp
import json
import os
import secrets
import time
import unittest

import bkit

MANIFEST = bkit.REPO / "deploy" / "sandbox" / "pod.yaml"


def manifest_sidecar():
    import yaml  # python3-yaml (make test-deps)
    pod = yaml.safe_load(MANIFEST.read_text())
    return next(c for c in pod["spec"]["containers"] if c["name"] == "sidecar")


def manifest_caps():
    caps = manifest_sidecar()["securityContext"]["capabilities"]
    return caps.get("drop"), list(caps.get("add", []))


class SidecarArgs:
    """The manifest's boxkited arguments, for this machine: its listeners on 127.0.0.1 and free
    ports, its TLS files (a Secret volume there) made here by bkctl kube, its --key-env kept
    (bkit gives the variable the daemon's key)."""

    def __init__(self, directory):
        self.cert, self.key = bkit.tls_files(directory)
        self.args, self.key_env, self.api, self.http, self.preview = [], None, None, None, None
        given = manifest_sidecar()["args"]
        for i, a in enumerate(given):
            prev = given[i - 1] if i else None
            if a == "--pod":
                continue  # bkit.Pod passes it
            if prev == "--key-env":
                self.key_env = a
                self.args.pop()
                continue
            if a.startswith(("tls+tcp://0.0.0.0:", "tcp://0.0.0.0:", "http://0.0.0.0:")):
                scheme = a.split("://")[0]
                a = f"{scheme}://127.0.0.1:{bkit.free_tcp_port()}"
                if prev == "--preview-listen":
                    self.preview = a
                elif scheme == "http":
                    self.http = a
                else:
                    self.api = a
            elif prev == "--tls-cert":
                a = str(self.cert)
            elif prev == "--tls-key":
                a = str(self.key)
            self.args.append(a)


def attempt(what, fn, failures):
    """Run one check; on failure, record it (with what it said) and return None."""
    try:
        return fn()
    except Exception as e:  # a check of this suite failing is data here, not an error
        failures.append(f"{what}: {str(e).splitlines()[0][:300] if str(e) else type(e).__name__}")
        return None


def run_checks(caps, tag):
    """The sidecar with exactly `caps` on a fresh emulated pod: exec and file checks. Returns the
    list of failed checks (empty: everything worked) and the daemon's log."""
    failures = []
    with bkit.scope():
        tls_dir = bkit.temp_dir(f"{tag}-tls")
        sa = SidecarArgs(tls_dir)
        # A destination on the pod's loopback (the emulated pod's network is the machine's), for
        # the egress check: the executor starts the proxy and makes each grant's listener.
        port, marker = bkit.free_tcp_port(), f"egress-{secrets.token_hex(6)}"
        bkit.popen([bkit.PYTHON, "-c", bkit.HTTP_STANDIN, "127.0.0.1", str(port), marker])
        bkit.wait_for(lambda: bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, "127.0.0.1", str(port)]).returncode == 0,
                      10, what="the egress destination")
        pod = bkit.Pod(tag=tag, caps=caps, daemon_args=[*sa.args, f"--egress-allow=127.0.0.1:{port}"],
                       key_env=sa.key_env)
        d = pod.daemon
        if attempt("boxkited starts and answers Health", d.start, failures) is None:
            return failures, d.log_text()
        d.workspace = pod.workspace
        attempt("the sandbox container starts", pod.start_container, failures)
        if attempt("the sandbox is found", lambda: bkit.wait_for(
                lambda: d.health().get("sandbox_ready") is True, 5, what="sandbox_ready"), failures) is None:
            return failures, d.log_text()

        def exec_identity():
            rc, res, err = d.exec_json("--shell", "cat /container-marker; id -u; id -g")
            if (rc, res and res.get("stdout")) != (0, f"{pod.marker}\n1001\n1001\n"):
                raise AssertionError(f"exec: rc {rc} {res} {err}")
        attempt("exec runs in the sandbox as 1001", exec_identity, failures)

        def exec_isolated():
            d.install_probe()
            for args, reason in ((("caps",), "caps-0-nnp-seccomp2"), (("interfaces",), "only-lo"),
                                 (("pids",), "own-tree-only")):
                r = d.probe(*args)
                if r.verdict != "DENIED" or r.reason != reason:
                    raise AssertionError(r.describe())
        attempt("exec is isolated (probes)", exec_isolated, failures)

        def egress():
            rc, res, err = d.exec_json("--allow-net", f"127.0.0.1:{port}", "--shell",
                                       f"curl -sS -m 10 --noproxy '' http://127.0.0.1:{port}/")
            if (rc, res and res.get("stdout")) != (0, marker):
                raise AssertionError(f"a granted exec through the egress proxy: rc {rc} {res} {err}")
        attempt("a granted exec reaches its destination through the egress proxy", egress, failures)

        def timeout_kills():
            secs = f"100.{secrets.randbelow(10**6):06d}"
            rc, res, err = d.exec_json("--timeout", "1", "--shell", f"(setsid sleep {secs} &); sleep {secs}")
            if (rc, (res or {}).get("timed_out")) != (bkit.EXIT_TIMEOUT, True):
                raise AssertionError(f"timeout: rc {rc} {res} {err}")
            bkit.wait_for(lambda: not bkit.find_processes(bkit.SANDBOX_UID, ["sleep", secs]), 5,
                          what="the timed-out tree to be gone")
        attempt("a timeout kills the whole tree", timeout_kills, failures)

        def files():
            src = d.dir / "up.bin"
            src.write_bytes(secrets.token_bytes(300_000))
            back = d.dir / "down.bin"
            steps = (("mkdir", "-p", "a/b"), ("cp", src, ":a/b/f"), ("ls", "-l", "a/b"), ("stat", "a/b/f"),
                     ("mv", "a/b/f", "a/g"), ("cp", ":a/g", back), ("rm", "-r", "a"))
            for step in steps:
                r = d.bkctl(*map(str, step))
                if r.returncode != 0:
                    raise AssertionError(f"bkctl {' '.join(map(str, step))}: {r.returncode} {r.stderr.strip()}")
            if not filecmp.cmp(src, back, shallow=False):
                raise AssertionError("the file came back different")
            if (pod.workspace / "a").exists():
                raise AssertionError("rm -r left the tree")
        attempt("file operations as the sandbox user", files, failures)

        def manifest_listeners():
            if sa.api:
                r = d.bkctl("--url", sa.api, "--tls-cert", str(sa.cert), "-o", "json", "exec", "--", "id", "-u")
                if r.returncode != 0 or json.loads(r.stdout).get("stdout") != "1001\n":
                    raise AssertionError(f"exec over {sa.api}: {r.returncode} {r.stdout} {r.stderr}")
            if sa.http:
                code, body = bkit.http_get(sa.http + "/readyz")
                if code != 200:
                    raise AssertionError(f"/readyz: {code} {body}")
            if sa.preview:
                # Up, and refusing what is not a preview (the relay itself: tests/python/test_preview.py).
                code, body = bkit.http_get(sa.preview + "/readyz")
                if code != 400:
                    raise AssertionError(f"the preview listener: {code} {body}")
        attempt("the manifest's listeners (TLS API, HTTP probes, previews) answer", manifest_listeners, failures)

        def executor_narrowed():
            log = d.log_text()
            if "cannot narrow" in log:
                raise AssertionError("the executor could not narrow its capabilities")
        attempt("the executor narrows to its list", executor_narrowed, failures)
        return failures, d.log_text()


class CapabilityList(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        bkit.require_root()
        bkit.require_build()
        bkit.require_tools("unshare", "nsenter", "setpriv")
        try:
            cls.drop, cls.caps = manifest_caps()
        except ImportError:
            raise unittest.SkipTest("needs python3-yaml to read the manifest (make test-deps)")

    def test_manifest_drops_all_and_adds_a_list(self):
        self.assertEqual(self.drop, ["ALL"])
        self.assertTrue(self.caps, "the sidecar adds no capability: pod mode cannot work")
        self.assertEqual(len(set(self.caps)), len(self.caps), f"duplicates in {self.caps}")

    def test_the_list_is_enough(self):
        failures, log = run_checks(self.caps, "caps-all")
        self.assertEqual(failures, [], f"with exactly {self.caps}:\n" + "\n".join(failures) + f"\nlog:\n{log}")

    def test_every_capability_in_the_list_is_needed(self):
        unneeded = []
        for cap in self.caps:
            with self.subTest(without=cap):
                fewer = [c for c in self.caps if c != cap]
                failures, _ = run_checks(fewer, f"caps-no-{cap.lower().replace('_', '')}")
                print(f"  without {cap}: {'; '.join(failures) if failures else 'everything passed'}", flush=True)
                if not failures:
                    unneeded.append(cap)
        self.assertEqual(unneeded, [], f"{MANIFEST} lists capabilities no check needs: remove them, or add "
                                       f"the check that needs them")


if __name__ == "__main__":
    unittest.main()
