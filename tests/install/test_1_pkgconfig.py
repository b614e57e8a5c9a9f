"""make install into a temporary PREFIX, then a program built against that prefix with nothing
but `pkg-config --cflags --libs boxkite` (shared) and `pkg-config --static ...` (static), and
run: the installed boxkite.pc must describe where it was installed (it once said /usr/local
whatever PREFIX was), and its private libraries must be enough for a static link."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# The soname's number, as the Makefile sets it (docs/ABI.md).
SONAME_MAJOR = re.search(r"(?m)^SONAME_MAJOR\s*:=\s*(\d+)", open(os.path.join(REPO, "Makefile")).read()).group(1)
PROBE_SRC = os.path.join(HERE, "libprobe.c")


def version():
    with open(os.path.join(REPO, "common", "version.h")) as f:
        return re.search(r'BK_VERSION "([^"]*)"', f.read()).group(1)


def run(argv, env=None, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, **kw)


class InstalledPrefix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("pkg-config", "cc", "make", "nm", "objdump", "ldd"):
            if not shutil.which(tool):
                raise unittest.SkipTest("SKIP: %s is not installed (make deps)" % tool)
        cls.prefix = tempfile.mkdtemp(prefix="boxkite-prefix-")
        r = run(["make", "-s", "-C", REPO, "install", "PREFIX=" + cls.prefix])
        if r.returncode != 0:
            shutil.rmtree(cls.prefix)
            raise AssertionError("make install PREFIX=%s failed:\n%s%s" % (cls.prefix, r.stdout, r.stderr))
        cls.env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(cls.prefix, "lib", "pkgconfig"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)

    def pkgconfig(self, *args):
        r = run(["pkg-config", *args, "boxkite"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def build(self, name, flags):
        exe = os.path.join(self.prefix, name)
        r = run(["cc", "-o", exe, PROBE_SRC, *flags], env=self.env)
        self.assertEqual(r.returncode, 0, "cc %s:\n%s" % (" ".join(flags), r.stderr))
        return exe

    def test_pc_names_the_prefix_it_was_installed_under(self):
        self.assertEqual(self.pkgconfig("--variable=prefix"), [self.prefix])
        self.assertEqual(self.pkgconfig("--modversion"), [version()])
        self.assertIn("-I%s/include" % self.prefix, self.pkgconfig("--cflags"))

    def test_shared_build_runs_against_the_installed_library(self):
        libdir = self.pkgconfig("--variable=libdir")[0]
        exe = self.build("probe-shared", self.pkgconfig("--cflags", "--libs") + ["-Wl,-rpath," + libdir])
        r = run([exe, version()])
        self.assertEqual((r.returncode, r.stdout), (0, "libboxkite %s\n" % version()), r.stderr)
        ldd = run(["ldd", exe]).stdout
        self.assertRegex(ldd, rf"libboxkite\.so\.{SONAME_MAJOR} => {re.escape(libdir)}/libboxkite\.so\.{SONAME_MAJOR} ", ldd)

    def test_static_build_runs_with_no_shared_library(self):
        exe = self.build("probe-static", ["-static"] + self.pkgconfig("--static", "--cflags", "--libs"))
        self.assertNotEqual(run(["ldd", exe]).returncode, 0, "ldd found shared libraries in a static build")
        r = run([exe, version()])
        self.assertEqual((r.returncode, r.stdout), (0, "libboxkite %s\n" % version()), r.stderr)

    def test_the_library_exports_only_its_api(self):
        lib = os.path.join(self.prefix, "lib", f"libboxkite.so.{SONAME_MAJOR}")
        r = run(["nm", "-D", "--defined-only", lib])
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
        self.assertIn("bk_version", names)
        self.assertEqual([n for n in names if not n.startswith("bk_")], [], "symbols outside the API")
        self.assertRegex(run(["objdump", "-p", lib]).stdout, rf"SONAME\s+libboxkite\.so\.{SONAME_MAJOR}\b")
