"""make deps installs what the build and make run need, and nothing of the tests' (no npm package,
no test-only Debian package); make test-deps (which make test runs) installs the rest. Run on a
copy of scripts/install-deps and the two npm lock files, with stand-ins for dpkg-query (nothing is
installed), apt-get and npm that record what they were asked: nothing is installed on this
machine. What the build links is checked against the Makefile itself: every library of its
LDLIBS_* belongs to a package make deps installs."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LOCKS = ("tests/k8s/package-lock.json", "tests/files/s3/package-lock.json")
# What only the tests use: none of it may come with make deps.
TEST_ONLY = {"npm", "nodejs", "libcmocka-dev", "clang", "libclang-rt-14-dev", "mypy", "zsh", "python3-yaml",
             "sqlite3", "bc"}

STUB = """#!/bin/sh
echo "%s $*" >> %s
%s
"""


class InstallDeps(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIP: install-deps installs only as root (its stand-ins record what it would)")
        self.tmp = tempfile.mkdtemp(prefix="boxkite-deps-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        os.makedirs(os.path.join(self.tmp, "scripts"))
        shutil.copy(os.path.join(REPO, "scripts", "install-deps"), os.path.join(self.tmp, "scripts"))
        for lock in LOCKS:
            os.makedirs(os.path.join(self.tmp, os.path.dirname(lock)))
            shutil.copy(os.path.join(REPO, lock), os.path.join(self.tmp, lock))
        self.bin = os.path.join(self.tmp, "bin")
        self.log = os.path.join(self.tmp, "log")
        os.mkdir(self.bin)
        for name, action in (("dpkg-query", "exit 1"), ("apt-get", "exit 0"),
                             ("npm", "mkdir -p node_modules")):
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(STUB % (name, self.log, action))
            os.chmod(path, 0o755)

    def run_deps(self, what):
        r = subprocess.run([os.path.join(self.tmp, "scripts", "install-deps"), what], capture_output=True,
                           text=True, timeout=60, cwd=self.tmp,
                           env={"PATH": self.bin + ":/usr/bin:/bin", "LANG": "C.UTF-8"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(self.log) as f:
            calls = f.read().splitlines()
        installed = set()
        for call in calls:
            if call.startswith("apt-get ") and " install " in call:
                installed.update(w for w in call.split(" install ", 1)[1].split() if not w.startswith("-"))
        return installed, [c for c in calls if c.startswith("npm ")]

    def test_make_deps_has_nothing_of_the_tests(self):
        installed, npm = self.run_deps("build")
        self.assertEqual(npm, [], "make deps ran npm")
        self.assertEqual(installed & TEST_ONLY, set(), "make deps installs test-only packages")
        for lock in LOCKS:
            self.assertFalse(os.path.exists(os.path.join(self.tmp, os.path.dirname(lock), "node_modules")))

    def test_make_deps_has_every_library_the_build_links(self):
        installed, _ = self.run_deps("build")
        with open(os.path.join(REPO, "Makefile")) as f:
            libs = set(re.findall(r"-l(\w+)", " ".join(re.findall(r"(?m)^LDLIBS_\w+\s*:=(.*)$", f.read()))))
        self.assertIn("nng", libs)
        owners = {}
        for lib in sorted(libs):
            path = subprocess.run(["cc", "-print-file-name=lib%s.so" % lib], capture_output=True, text=True).stdout.strip()
            if not os.path.isabs(path):
                continue  # in libc itself (pthread)
            r = subprocess.run(["dpkg", "-S", os.path.normpath(path)], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "no package owns %s" % path)
            owners[lib] = r.stdout.split(":")[0]
        self.assertGreaterEqual(len(owners), 6, owners)
        self.assertEqual({lib: p for lib, p in owners.items() if p not in installed}, {},
                         "libraries the build links that make deps does not install")

    def test_make_test_deps_installs_the_rest(self):
        build, _ = self.run_deps("build")
        os.unlink(self.log)
        installed, npm = self.run_deps("test")
        self.assertLessEqual(build, installed)
        self.assertLessEqual(TEST_ONLY - {"npm"}, installed)
        self.assertEqual(sorted(npm), ["npm ci --no-audit --no-fund --ignore-scripts --loglevel=error"] * 2)
        for lock in LOCKS:
            d = os.path.join(self.tmp, os.path.dirname(lock))
            with open(os.path.join(d, "node_modules", ".package-lock.installed")) as f, open(os.path.join(d, "package-lock.json")) as g:
                self.assertEqual(f.read(), g.read())
        # Again: nothing to do.
        os.unlink(self.log)
        self.assertEqual(self.run_deps("test")[1], [])
