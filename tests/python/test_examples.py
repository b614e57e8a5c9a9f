"""Every example of sdk/python/examples, run as its docstring says (configured from BOXKITE_URL and
BOXKITE_KEY_FILE, with the installed package) against a real boxkited (local mode, as root), its
output checked against what the sandbox did. An example without a test here fails the tier."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import wire
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e

GUARD_S = 120  # hang guard of a whole example: never a timing assertion


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"
EXAMPLES = (os.path.join(boxkited_process.REPO_ROOT, "sdk", "python", "examples")
            if not IMPORT_ERROR else "")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ExamplesTest(unittest.TestCase):
    def setUp(self):
        self.store = tempfile.mkdtemp(prefix="boxkite-pytest-store-")
        self.addCleanup(shutil.rmtree, self.store, True)
        self.daemon = boxkited_process.Boxkited(args=["--sync-store", "file://" + self.store], ipc=True).__enter__()
        self.addCleanup(self.daemon.stop)
        with self.daemon.client() as c:
            deadline = time.monotonic() + GUARD_S
            while not c.health().sandbox_ready:
                self.assertLess(time.monotonic(), deadline, "the sandbox never became ready")
                time.sleep(0.05)

    def run_example(self, name, *args, url=None):
        """The example's stdout; it must exit 0. Run from a scratch directory, so that nothing but
        the installed package can be imported for boxkite."""
        env = dict(os.environ, BOXKITE_URL=url or self.daemon.url, BOXKITE_KEY_FILE=self.daemon.key_file)
        env.pop("PYTHONPATH", None)
        with tempfile.TemporaryDirectory() as cwd:
            r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)] + list(args), cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=GUARD_S)
        self.assertEqual(r.returncode, 0, "%s failed:\n%s%s" % (name, r.stdout, r.stderr))
        return r.stdout

    def test_every_example_has_a_test(self):
        names = sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".py"))
        tested = sorted(n[len("test_"):] + ".py" for n in dir(self) if n.startswith("test_") and
                        n != "test_every_example_has_a_test")
        self.assertEqual(names, tested)

    def test_quickstart(self):
        out = self.run_example("quickstart.py")
        self.assertIn("boxkited %s, sandbox ready: True" % boxkite.__version__, out)
        self.assertIn("exec: ['Linux', '1001'] exit 0", out)
        self.assertIn("script: summed 6", out)
        self.assertIn("total.txt: 6", out)
        self.assertIn("a failing command is a result: exited 3", out)
        with open(os.path.join(self.daemon.workspace, "total.txt")) as f:
            self.assertEqual(f.read(), "6\n")

    def test_stream_output(self):
        out = self.run_example("stream_output.py")
        self.assertEqual(out.splitlines(), ["[stdout] configure...", "[stdout] compile...", "[stdout] link...",
                                            "[stderr] warning: 1", "the build exited 2"])

    def test_background_process(self):
        out = self.run_example("background_process.py")
        self.assertRegex(out, r"terminal: 24 80\n")
        self.assertRegex(out, r"resized: 40 120\n")
        self.assertIn("the shell exited 3", out)
        m = re.search(r"started (p\d+) -> Serving HTTP on 0\.0\.0\.0 port 8000 ", out)
        self.assertTrue(m, out)
        self.assertIn("listed: [('%s', 'dev server', 8000)]" % m.group(1), out)
        self.assertIn("the server was killed by SIGTERM\n", out)
        with self.daemon.client() as c:
            self.assertEqual(c.processes(), [], "the example left nothing behind")

    def test_files_roundtrip(self):
        out = self.run_example("files_roundtrip.py")
        self.assertIn("in the sandbox: ['./README', './docs/big.bin']", out)
        self.assertIn("2 files back, identical: True", out)
        self.assertEqual(os.path.getsize(os.path.join(self.daemon.workspace, "roundtrip", "docs", "big.bin")), 9 << 20)

    def test_mirror_directory(self):
        with self.daemon.client() as c:
            c.exec("mkdir -p mirror/old && echo keep > mirror/old/a && echo gone > mirror/b && mkdir -p src/in "
                   "&& echo y > src/in/y", check=True)
            env = dict(os.environ, BOXKITE_URL=self.daemon.url, BOXKITE_KEY_FILE=self.daemon.key_file)
            env.pop("PYTHONPATH", None)
            with tempfile.TemporaryDirectory() as cwd:
                p = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "mirror_directory.py")], cwd=cwd,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    self.assertRegex(p.stdout.readline(), r"^watching mirror \(2 directories\)$")
                    # An editor's save, a removal, a deep new tree, a directory renamed and written
                    # in, one moved in with its content; then STOP.
                    c.exec("cd mirror && echo new > .c.tmp && mv .c.tmp c && rm b && mkdir -p d/e && "
                           "echo deep > d/e/f && mv old moved && echo more >> moved/a && mv ../src/in in && "
                           "echo z > in/z", check=True)
                    c.exec("touch mirror/STOP", check=True)
                    out, err = p.communicate(timeout=GUARD_S)
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            self.assertEqual(p.returncode, 0, err)
            want = []
            for path in ("c", "d/e/f", "in/y", "in/z", "moved/a"):
                want.append("%s %s" % (path, hashlib.sha256(c.download("mirror/" + path)).hexdigest()))
        self.assertEqual(out.splitlines(), want)

    def test_warm_pool(self):
        next_key = os.path.join(self.daemon.dir, "next-key")
        out = self.run_example("warm_pool.py", next_key, url=self.daemon.ipc_url)
        self.assertRegex(out, r"A pushed \S+: 1 files\n")
        self.assertIn("reset for B: 0 processes killed, 1 entries removed\n", out)
        self.assertIn("B finds: [] snapshots: []\n", out)
        self.assertIn("A's work is back: work of tenant A\n", out)
        self.assertIn("B's key now: unknown key id\n", out)
        self.assertEqual(boxkite.load_key_file(next_key).key_id, "tenant-b")
        self.assertEqual(os.stat(next_key).st_mode & 0o777, 0o600)
        # A's snapshot lies under A's store prefix, and nothing under B's.
        a, b = boxkite.load_key_file(self.daemon.key_file), boxkite.load_key_file(next_key)
        self.assertEqual(len(os.listdir(os.path.join(self.store, wire.store_prefix(a), "snapshots"))), 1)
        self.assertFalse(os.path.exists(os.path.join(self.store, wire.store_prefix(b))))


if __name__ == "__main__":
    unittest.main()
