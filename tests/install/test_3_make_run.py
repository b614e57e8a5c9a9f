"""make run's script (scripts/run-demo) leaves nothing behind: a plain run removes its directory
(key, socket, pid file, log, workspace) and stops its daemon; `KEEP=1 ... | tail` ends although
the daemon goes on (it does not hold the pipe); `run-demo stop` (make run-stop) stops that
daemon and removes the directory. RUN points it at a temporary directory, not build/run.

And README.md's set-up as written — `make deps`, then `make run` — in a scratch root
(scratch-root.sh: a fresh machine's /usr/local and /etc, nothing of it landing on this one): make
deps finds every package it installs present (the scratch root sees this machine's dpkg
database, read-only: nothing may change it) and make run goes through."""

import os
import re
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


class ReadmeSetUp(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIP: make run needs root (boxkited makes a sandbox)")
        for tool in ("unshare", "pivot_root", "mountpoint", "ip"):
            if not shutil.which(tool):
                self.skipTest("SKIP: %s is not installed" % tool)
        with open("/proc/filesystems") as f:
            if "overlay" not in f.read():
                self.skipTest("SKIP: no overlay filesystem in this kernel")
        self.tmp = tempfile.mkdtemp(prefix="boxkite-setup-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_make_deps_then_make_run_as_written(self):
        with open(os.path.join(REPO, "README.md")) as f:
            readme = f.read()
        setup = readme[readme.index("## Set-up on a fresh Debian 12 machine"):readme.index("Run the whole test suite")]
        first = re.search(r"(?m)^    (apt-get .* && make deps)$", setup)
        self.assertTrue(first, "README's set-up no longer reads 'apt-get ... && make deps'")
        self.assertRegex(setup, r"(?m)^    make run$")
        # Its apt-get part needs the network and changes the machine: the scratch root runs what
        # follows it, as written (make run's directory in the scratch root's /tmp, not in the
        # checkout, where a run of someone's may be kept).
        script = os.path.join(self.tmp, "setup.sh")
        with open(script, "w") as f:
            f.write("export RUN=/tmp/make-run\nmake deps && make run; echo \"@rc $?\"\n")
        root = os.path.join(self.tmp, "root")
        os.mkdir(root)
        r = subprocess.run(["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--propagation",
                            "private", os.path.join(HERE, "scratch-root.sh"), root, REPO, script, "net"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                           stdin=subprocess.DEVNULL)
        self.assertIn("@rc 0", r.stdout, r.stdout[-3000:])
        self.assertIn("deps: all build packages present", r.stdout)
        self.assertNotIn("npm", r.stdout)
        self.assertIn("uid=1001", r.stdout)
        self.assertIn("isolated: 0 failed", r.stdout)
