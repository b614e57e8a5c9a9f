"""The boxkite package itself, as a user installs it: what this tier imports is the installed
package (never sdk/python's sources); it installs offline with Debian's pip and setuptools as its
README says, and a wheel builds the same way; it needs the standard library and the protobuf
runtime only; its type hints check (mypy --strict, on the package and on the examples that use
it); and what it writes by hand of the proto (the status details) is the proto's."""

import ast
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

try:
    import boxkite
    from boxkite import wire
    from boxkite.v1 import boxkite_pb2 as pb
    import boxkited_process
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e

DEBIAN_PYTHON = "/usr/bin/python3"  # the pip and setuptools of the README's command
GUARD_S = 300  # hang guard of a build or a type check: never a timing assertion


def sdk_dir():
    return os.path.join(boxkited_process.REPO_ROOT, "sdk", "python")


def scratch_copy(test):
    """A copy of sdk/python in a temp dir (setuptools writes build/ and *.egg-info beside what it
    builds: the source tree stays clean), without what a build there may have left."""
    top = tempfile.mkdtemp(prefix="boxkite-pytest-sdk-")
    test.addCleanup(shutil.rmtree, top, True)
    src = os.path.join(top, "python")
    shutil.copytree(sdk_dir(), src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    return top, src


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=GUARD_S, **kw)


@unittest.skipIf(IMPORT_ERROR, IMPORT_ERROR)
class InstalledTest(unittest.TestCase):
    def test_the_package_imported_is_the_installed_one(self):
        where = os.path.realpath(boxkite.__file__)
        self.assertNotEqual(sys.prefix, sys.base_prefix, "the tier runs in a venv")
        self.assertTrue(where.startswith(os.path.realpath(sys.prefix) + os.sep), where)
        self.assertFalse(where.startswith(os.path.realpath(sdk_dir()) + os.sep), where)
        self.assertEqual(os.path.dirname(os.path.realpath(pb.__file__)), os.path.join(os.path.dirname(where), "v1"))

    def test_its_version_is_boxkiteds(self):
        with open(os.path.join(boxkited_process.REPO_ROOT, "common", "version.h")) as f:
            version = f.read().split('BK_VERSION "', 1)[1].split('"', 1)[0]
        self.assertEqual(boxkite.__version__, version)
        self.assertEqual(importlib.metadata.version("boxkite"), version)

    def test_it_needs_the_standard_library_and_protobuf_only(self):
        # Requires-Dist, as setuptools writes it: "protobuf (>=3.20)".
        self.assertEqual([r.translate(str.maketrans("", "", " ()")) for r in importlib.metadata.requires("boxkite")],
                         ["protobuf>=3.20"])
        top = os.path.dirname(boxkite.__file__)
        seen = set()
        for here, _, files in os.walk(top):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(here, name)) as f:
                        tree = ast.parse(f.read())
                    for node in ast.walk(tree):
                        if isinstance(node, ast.Import):
                            seen.update(a.name.split(".")[0] for a in node.names)
                        elif isinstance(node, ast.ImportFrom) and node.level == 0:
                            seen.add(node.module.split(".")[0])
        self.assertIn("google", seen)
        self.assertEqual(sorted(seen - set(sys.stdlib_module_names) - {"google", "boxkite"}), [])

    def test_it_ships_its_type_information(self):
        top = os.path.dirname(boxkite.__file__)
        for rel in ("py.typed", "v1/boxkite_pb2.pyi", "store/snapshot_pb2.pyi", "store/snapshot_pb2.py"):
            self.assertTrue(os.path.isfile(os.path.join(top, rel)), rel)

    def test_the_status_details_are_the_protos(self):
        proto = {v.number: v.name[len("STATUS_DETAIL_"):] for v in pb.StatusDetail.DESCRIPTOR.values}
        self.assertEqual({d.value: d.name for d in boxkite.Detail}, proto)

    def test_the_wire_layer_knows_every_rpc(self):
        for method in pb.DESCRIPTOR.services_by_name["Sandbox"].methods:
            self.assertIs(wire.response_type(method.name), getattr(pb, method.output_type.name))
        self.assertEqual(wire.ANSWERS_WITH_DATA, {"FileDownload", "ProcessRead"})


@unittest.skipIf(IMPORT_ERROR, IMPORT_ERROR)
class BuildTest(unittest.TestCase):
    def test_pip_installs_it_offline_as_the_readme_says(self):
        top, src = scratch_copy(self)
        venv = os.path.join(top, "venv")
        r = run([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", venv])
        self.assertEqual(r.returncode, 0, r.stderr)
        py = os.path.join(venv, "bin", "python3")
        # The README's command, with --no-index: nothing may come from a package index.
        r = run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-cache-dir", src],
                env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = run([py, "-c", "import boxkite, boxkite.v1.boxkite_pb2 as pb; print(boxkite.__file__); "
                           "print(boxkite.Client.__name__, pb.ExecRequest(shell='x').shell)"], cwd=top)
        self.assertEqual(r.returncode, 0, r.stderr)
        where, names = r.stdout.splitlines()
        self.assertTrue(where.startswith(venv + os.sep), where)
        self.assertEqual(names, "Client x")

    def test_a_wheel_builds_the_same_way(self):
        top, src = scratch_copy(self)
        out = os.path.join(top, "dist")
        r = run([DEBIAN_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                 "--no-cache-dir", "-w", out, src], env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        [wheel] = os.listdir(out)
        self.assertEqual(wheel, "boxkite-%s-py3-none-any.whl" % boxkite.__version__)
        with zipfile.ZipFile(os.path.join(out, wheel)) as z:
            names = set(z.namelist())
        package = {n for n in names if not n.startswith("boxkite-")}
        want = {"boxkite/%s" % n for n in ("__init__.py", "_sp.py", "_transfer.py", "client.py", "errors.py",
                                           "process.py", "py.typed", "results.py", "watch.py", "wire.py",
                                           "v1/boxkite_pb2.py", "v1/boxkite_pb2.pyi",
                                           "store/snapshot_pb2.py", "store/snapshot_pb2.pyi")}
        self.assertEqual(package, want, "the wheel holds the package and nothing else")

    def test_type_hints_check(self):
        mypy = shutil.which("mypy")
        if not mypy:
            self.skipTest("mypy is not installed (make test-deps installs Debian's)")
        examples = os.path.join(sdk_dir(), "examples")
        with tempfile.TemporaryDirectory() as cache:
            # The package as installed here, and the examples as a user's code typed against it.
            for what in (["-p", "boxkite"], sorted(os.path.join(examples, n) for n in os.listdir(examples)
                                                   if n.endswith(".py"))):
                r = run([mypy, "--config-file", os.path.join(sdk_dir(), "pyproject.toml"), "--cache-dir", cache,
                         "--python-executable", sys.executable] + what, cwd=cache)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("Success: no issues found", r.stdout)


if __name__ == "__main__":
    unittest.main()
