"""make install into a temporary PREFIX, then a program built against that prefix with nothing
but `pkg-config --cflags --libs boxkite` (shared), `pkg-config --static ...` with -static (a wholly
static program) and `pkg-config --libs boxkite-static` (libboxkite.a in a dynamic program), and
run: the installed boxkite.pc must describe where it was installed (it once said /usr/local
whatever PREFIX was), and its private libraries must be enough for a static link.

Then make install as a new user runs it, into the real root's /usr/local (in a scratch root:
nothing lands on this machine): a program built with pkg-config's flags and no rpath starts at
once (install ran ldconfig), and make uninstall takes away exactly what install put."""

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

    def test_static_library_in_a_dynamic_program(self):
        r = run(["pkg-config", "--cflags", "--libs", "boxkite-static"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        exe = self.build("probe-static-lib", r.stdout.split())
        ldd = run(["ldd", exe])
        self.assertEqual(ldd.returncode, 0, "not a dynamic program: %s" % ldd.stderr)
        self.assertNotIn("libboxkite", ldd.stdout)
        self.assertIn("libc.so", ldd.stdout)
        r = run([exe, version()])
        self.assertEqual((r.returncode, r.stdout), (0, "libboxkite %s\n" % version()), r.stderr)

    def test_shell_completions_are_bkctls(self):
        for shell, path in (("bash", "share/bash-completion/completions/bkctl"),
                            ("zsh", "share/zsh/site-functions/_bkctl")):
            with self.subTest(shell):
                script = run([os.path.join(self.prefix, "bin", "bkctl"), "completion", shell])
                self.assertEqual(script.returncode, 0, script.stderr)
                with open(os.path.join(self.prefix, path)) as f:
                    self.assertEqual(f.read(), script.stdout)

    def test_the_library_exports_only_its_api(self):
        lib = os.path.join(self.prefix, "lib", f"libboxkite.so.{SONAME_MAJOR}")
        r = run(["nm", "-D", "--defined-only", lib])
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
        self.assertIn("bk_version", names)
        self.assertEqual([n for n in names if not n.startswith("bk_")], [], "symbols outside the API")
        self.assertRegex(run(["objdump", "-p", lib]).stdout, rf"SONAME\s+libboxkite\.so\.{SONAME_MAJOR}\b")


# Run by scratch-root.sh in a scratch root, in the checkout: every file under /usr/local and /etc
# (and boxkite's own directories) before make install, after it and after make uninstall; the probe built with pkg-config's flags
# alone, run after each.
SCRATCH_SCRIPT = r"""
snap() { find /usr/local /etc -xdev \( ! -type d -o -name '*boxkite*' \) ! -path /etc/ld.so.cache | sort; }
probe() { echo "@probe $1"; /tmp/probe %(version)s; echo "@rc $?"; }
snap > /tmp/before
echo @install; make -s install 2>&1; echo "@rc $?"
snap > /tmp/installed
echo @added; comm -13 /tmp/before /tmp/installed
echo @build; cc -o /tmp/probe tests/install/libprobe.c $(pkg-config --cflags --libs boxkite) 2>&1; echo "@rc $?"
probe installed
echo @uninstall; make -s uninstall 2>&1; echo "@rc $?"
snap > /tmp/after
echo @left; comm -3 /tmp/before /tmp/after
probe uninstalled
echo @end
"""


def sections(text):
    """{name: lines} of the script's output, split at its @name lines."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("@") and " " not in line[1:].split(" ", 1)[0] and not line.startswith("@rc"):
            name = line[1:]
            out[name] = []
        elif name:
            out[name].append(line)
    return out


class InstallIntoTheRealRoot(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIP: needs root (a scratch root's mount namespace, and /usr/local)")
        for tool in ("unshare", "pivot_root", "mountpoint", "pkg-config", "cc", "ldconfig"):
            if not shutil.which(tool):
                self.skipTest("SKIP: %s is not installed (make deps)" % tool)
        with open("/proc/filesystems") as f:
            if "overlay" not in f.read():
                self.skipTest("SKIP: no overlay filesystem in this kernel")
        self.tmp = tempfile.mkdtemp(prefix="boxkite-install-root-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_ldconfig_then_uninstall_removes_exactly_what_install_put(self):
        script = os.path.join(self.tmp, "script.sh")
        with open(script, "w") as f:
            f.write(SCRATCH_SCRIPT % {"version": version()})
        root = os.path.join(self.tmp, "root")
        os.mkdir(root)
        r = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
                            os.path.join(HERE, "scratch-root.sh"), root, REPO, script],
                           capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        s = sections(r.stdout)
        self.assertIn("end", s, "the script did not reach its end:\n%s\n%s" % (r.stdout[-3000:], r.stderr[-3000:]))
        self.assertEqual(s["install"][-1:], ["@rc 0"], s["install"])
        added = set(s["added"])
        for path in ("/usr/local/bin/bkctl", "/usr/local/lib/libboxkite.so.%s" % SONAME_MAJOR,
                     "/usr/local/lib/pkgconfig/boxkite.pc", "/usr/local/share/bash-completion/completions/bkctl",
                     "/usr/local/share/zsh/site-functions/_bkctl", "/usr/local/include/boxkite/boxkite.h",
                     "/usr/local/include/boxkite", "/usr/local/libexec/boxkite"):
            self.assertIn(path, added)
        self.assertEqual(s["build"], ["@rc 0"])
        # No rpath, no LD_LIBRARY_PATH: the dynamic linker's cache has the library.
        self.assertEqual(s["probe installed"], ["libboxkite %s" % version(), "@rc 0"])
        self.assertEqual(s["uninstall"][-1:], ["@rc 0"], s["uninstall"])
        self.assertEqual(s["left"], [], "make uninstall left these (or removed what it did not put)")
        self.assertNotEqual(s["probe uninstalled"][-1:], ["@rc 0"], "the library still loads after uninstall")
