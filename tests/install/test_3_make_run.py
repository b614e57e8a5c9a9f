"""make run's script (scripts/run-demo) leaves nothing behind: a plain run removes its directory
(key, socket, pid file, log, workspace) and stops its daemon; `KEEP=1 ... | tail` ends although
the daemon goes on (it does not hold the pipe); `run-demo stop` (make run-stop) stops that
daemon and removes the directory. RUN points it at a temporary directory, not build/run."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BOXKITE_BUILD", os.path.join(REPO, "build"))
SCRIPT = os.path.join(REPO, "scripts", "run-demo")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ")[-1][0] != "Z"


class MakeRun(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIP: make run needs root (boxkited makes a sandbox)")
        self.tmp = tempfile.mkdtemp(prefix="boxkite-make-run-")
        self.run_dir = os.path.join(self.tmp, "run")
        self.env = dict(os.environ, B=BUILD, RUN=self.run_dir)
        self.env.pop("KEEP", None)
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # Whatever happens, no daemon of ours outlives the test.
        self.addCleanup(subprocess.run, [SCRIPT, "stop"], env=self.env, capture_output=True, timeout=60)

    def test_a_run_leaves_nothing_behind(self):
        r = subprocess.run([SCRIPT], env=self.env, capture_output=True, text=True, timeout=300, cwd=REPO,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        self.assertIn("uid=1001", r.stdout)
        self.assertIn("isolated: 0 failed", r.stdout)
        self.assertFalse(os.path.exists(self.run_dir), "make run left %s behind" % self.run_dir)

    def test_keep_through_a_pipe_ends_and_stop_cleans_up(self):
        # As `KEEP=1 make run | tail`: the pipe must reach EOF while the daemon goes on.
        env = dict(self.env, KEEP="1")
        run = subprocess.Popen([SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO,
                               stdin=subprocess.DEVNULL)
        tail = subprocess.run(["tail", "-n", "3"], stdin=run.stdout, capture_output=True, text=True, timeout=300)
        run.stdout.close()
        self.assertEqual(run.wait(timeout=30), 0, tail.stdout)
        self.assertIn("make run-stop", tail.stdout)
        with open(os.path.join(self.run_dir, "boxkited.pid")) as f:
            pid = int(f.read())
        self.assertTrue(alive(pid), "KEEP=1 did not keep boxkited running")
        r = subprocess.run([SCRIPT, "stop"], env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(alive(pid), "make run-stop left boxkited running")
        self.assertFalse(os.path.exists(self.run_dir), "make run-stop left %s behind" % self.run_dir)
