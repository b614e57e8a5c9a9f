"""5. bkctl health against a running local-mode boxkited: mode local, sandbox ready (pod mode's
is asserted in test_4_pod.py), over ipc:// and tcp://; and the local sandbox coming back after
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
        t0 = time.monotonic()
        bkit.wait_for(lambda: D.health().get("sandbox_ready") is True and bkit.proc_children(D.executor_pid())
                      and D.local_init_pid() != old, 5, what="a new local sandbox")
        self.assertLess(time.monotonic() - t0, 3.0)
        rc, res, err = D.exec_json("--", "id", "-u")
        self.assertEqual((rc, res["stdout"]), (0, "1001\n"), f"{res} {err}")


class Shutdown(unittest.TestCase):
    """SIGTERM stops boxkited cleanly: its processes, its sandbox and every cgroup directory its
    executor made beneath its own cgroup are gone."""

    def test_sigterm_leaves_nothing_behind(self):
        d = bkit.Daemon("shutdown").start()
        rc, res, err = d.exec_json("--", "true")
        self.assertEqual(rc, 0, f"{res} {err}")
        if "cgroup-none" in res["isolation_profile"]:
            self.skipTest("no per-exec cgroups on this machine: nothing to check there")
        pids = [d.front_pid(), d.executor_pid(), d.local_init_pid()]
        made = list(d.cgroup_dirs)
        self.assertTrue(made, "the executor made no boxkite-<pid> cgroup directory")
        t0 = time.monotonic()
        d.stop()
        problems = []
        if d.proc.returncode != 0 or d.stop_escalated:
            problems.append(f"boxkited did not exit by itself within {bkit.STOP_WAIT} s of SIGTERM "
                            f"(status {d.proc.returncode}, after {time.monotonic() - t0:.1f} s)")
        problems += [f"pid {pid} survived the shutdown" for pid in pids if bkit.proc_alive(pid)]
        if d.leaked_cgroups:
            problems.append(f"cgroup directories left behind (the test removed them): {d.leaked_cgroups}")
        if problems:
            self.fail("\n".join(problems) + "\nlog:\n" + d.log_text()[-1500:])
