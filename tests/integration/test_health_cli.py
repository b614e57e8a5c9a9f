"""bkctl health against a running local-mode boxkited: mode local, sandbox ready (pod mode's
is asserted in test_pod.py), over ipc:// and tcp://; and the local sandbox coming back after
its init is killed.
"""
import json
import os
import signal
import time
import unittest

import bkit

D = None


def setUpModule():
    global D
    bkit.require_root()
    bkit.require_build()
    D = bkit.Daemon("health", tcp=("127.0.0.1", bkit.free_tcp_port())).start()


class Health(unittest.TestCase):
    def test_health_json_local_ready(self):
        for url in (D.url, f"tcp://{D.tcp[0]}:{D.tcp[1]}"):
            with self.subTest(url):
                r = D.bkctl("-o", "json", "health", url=url)
                self.assertEqual(r.returncode, 0, r.stderr)
                h = json.loads(r.stdout)
                self.assertEqual((h["status"], h["mode"], h["sandbox_ready"]), ("OK", "local", True), h)
                self.assertIs(h["auth_configured"], True, h)
                self.assertIs(h["authenticated"], True, h)

    def test_health_text_local_ready(self):
        r = D.bkctl("health")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("mode local", r.stdout)
        self.assertIn("sandbox ready", r.stdout)

    def test_local_sandbox_is_remade_after_its_init_dies(self):
        old = D.local_init_pid()
        os.kill(old, signal.SIGKILL)
        # Until the front has heard that the old init died, Health still says ready while the
        # executor has no sandbox init child at all: a state to wait through, not a failure.
        def remade():
            inits = [p for p in bkit.proc_children(D.executor_pid()) if bkit.is_sandbox_init(p)]
            return D.health().get("sandbox_ready") is True and len(inits) == 1 and inits[0] != old

        bkit.wait_for(remade, 5, what="a new local sandbox")
        rc, res, err = D.exec_json("--", "id", "-u")
        self.assertEqual((rc, res["stdout"]), (0, "1001\n"), f"{res} {err}")


class Shutdown(unittest.TestCase):
    """SIGTERM stops boxkited cleanly: it exits 0 by itself, its processes and its sandbox are
    gone, and so is every cgroup directory its executor made beneath its own cgroup. One daemon,
    stopped once in setUpClass; on a machine without per-exec cgroups only the cgroup test is
    skipped."""

    @classmethod
    def setUpClass(cls):
        d = cls.d = bkit.Daemon("shutdown").start()
        rc, res, err = d.exec_json("--", "true")
        if rc != 0:
            raise AssertionError(f"exec of true before the shutdown: {rc} {res} {err}")
        cls.profile = res["isolation_profile"]
        cls.pids = [d.front_pid(), d.executor_pid(), d.local_init_pid()]
        cls.made = list(d.cgroup_dirs)
        t0 = time.monotonic()
        d.stop()
        cls.stop_secs = time.monotonic() - t0

    def test_sigterm_exits_and_leaves_no_process(self):
        d = self.d
        problems = []
        if d.proc.returncode != 0 or d.stop_escalated:
            problems.append(f"boxkited did not exit by itself within {bkit.STOP_WAIT} s of SIGTERM "
                            f"(status {d.proc.returncode}, after {self.stop_secs:.1f} s)")
        problems += [f"pid {pid} survived the shutdown" for pid in self.pids if bkit.proc_alive(pid)]
        if problems:
            self.fail("\n".join(problems) + "\nlog:\n" + d.log_text()[-1500:])

    def test_sigterm_leaves_no_cgroup_directory(self):
        if "cgroup-none" in self.profile:
            self.skipTest(f"no per-exec cgroups on this machine (isolation profile {self.profile}): "
                          "nothing to leak; the exit and process checks run all the same")
        self.assertTrue(self.made, "the executor made no boxkite-<pid> cgroup directory")
        self.assertEqual(self.d.leaked_cgroups, [], "cgroup directories left behind (the test removed them)\nlog:\n"
                         + self.d.log_text()[-1500:])
