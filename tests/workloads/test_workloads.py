"""Ordinary tools in the sandbox (tests/workloads/workloads.mk): each runs as an agent would run
it, through bkctl exec against a local-mode boxkited with its default limits, and its result is
checked, not only its exit status."""
import io
import os
import shutil
import sys
import unittest
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
import bkit  # noqa: E402

D = None


def setUpModule():
    global D
    bkit.require_root()
    bkit.require_build()
    D = bkit.Daemon("workloads").start()


def need(*tools):
    """Skip unless every tool is on this machine (the local sandbox shows the host's /usr)."""
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise unittest.SkipTest(f"this machine has no {', '.join(missing)} (make test-deps installs it)")


def run(test, script, timeout=180):
    rc, res, err = D.exec_json("--timeout", str(timeout), "--shell", script, timeout=timeout + 30)
    test.assertIsNotNone(res, err)
    test.assertEqual(rc, 0, f"exit {rc}\nstdout: {res.get('stdout')}\nstderr: {res.get('stderr')}\n{err}")
    return res["stdout"]


def wheel(path):
    """A pure-Python wheel of package bkdemo, built here with zipfile (no network, no setuptools)."""
    files = {
        "bkdemo/__init__.py": "def hello():\n    return 'hello from bkdemo'\n",
        "bkdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: bkdemo\nVersion: 1.0\n",
        "bkdemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: boxkite-tests\nRoot-Is-Purelib: true\n"
                                      "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "bkdemo-1.0.dist-info/RECORD,,\n"
    files["bkdemo-1.0.dist-info/RECORD"] = record
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    path.write_bytes(buf.getvalue())


class Python(unittest.TestCase):
    def test_venv_and_pip_install_of_a_local_wheel(self):
        need("python3")
        if not Path("/usr/lib/python3/dist-packages/pip").exists() and \
                not list(Path("/usr/share/python-wheels").glob("pip-*.whl")):
            self.skipTest("no pip for venvs here (python3-venv / python3-pip-whl; make test-deps installs them)")
        wheel(D.workspace / "bkdemo-1.0-py3-none-any.whl")
        out = run(self, "set -e; python3 -m venv /tmp/bk-venv; "
                        "PIP_DISABLE_PIP_VERSION_CHECK=1 /tmp/bk-venv/bin/pip install -q --no-index "
                        "/workspace/bkdemo-1.0-py3-none-any.whl; "
                        "/tmp/bk-venv/bin/python -c 'import bkdemo; print(bkdemo.hello())'; rm -rf /tmp/bk-venv")
        self.assertEqual(out.strip().splitlines()[-1], "hello from bkdemo")

    def test_multiprocessing_pool(self):
        need("python3")
        out = run(self, "python3 -c 'from multiprocessing import Pool\n"
                        "with Pool(4) as p: print(sum(p.map(abs, range(-500, 500))))'")
        self.assertEqual(out.strip(), "250000")

    def test_a_process_that_handles_its_own_signals(self):
        need("python3")
        out = run(self, "python3 -c '\n"
                        "import os, signal\n"
                        "got = []\n"
                        "for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                        "    signal.signal(s, lambda n, f: got.append(n))\n"
                        "    os.kill(os.getpid(), s)\n"
                        "print(len(got))'")
        self.assertEqual(out.strip(), "4")


class Build(unittest.TestCase):
    def test_gcc_and_make_j(self):
        need("gcc", "make")
        src = D.workspace / "bk-build"
        src.mkdir(exist_ok=True)
        for i in range(4):
            (src / f"f{i}.c").write_text(f"int f{i}(void) {{ return {i + 1}; }}\n")
        (src / "main.c").write_text("#include <stdio.h>\nint f0(void), f1(void), f2(void), f3(void);\n"
                                    "int main(void) { printf(\"%d\\n\", f0() + f1() + f2() + f3()); return 0; }\n")
        (src / "Makefile").write_text("OBJ = main.o f0.o f1.o f2.o f3.o\nhello: $(OBJ)\n\t$(CC) -o $@ $(OBJ)\n")
        for p in [src, *src.iterdir()]:
            os.chown(p, bkit.SANDBOX_UID, bkit.SANDBOX_UID)
        out = run(self, "cd bk-build && make -s -j4 && ./hello")
        self.assertEqual(out.strip(), "10")

    def test_git_init_add_commit(self):
        need("git")
        out = run(self, "set -e; rm -rf /tmp/bk-repo; git init -q /tmp/bk-repo; cd /tmp/bk-repo; "
                        "echo one > a; git add a; git -c user.name=agent -c user.email=agent@example.invalid "
                        "commit -qm first; git config --global user.name agent; "
                        "git config --global user.email agent@example.invalid; echo two >> a; "
                        "git commit -qam second; git log --format=%s | tr '\\n' ' '")
        self.assertEqual(out.strip(), "second first")
        self.assertFalse((D.workspace / ".gitconfig").exists(), "~/.gitconfig went to the workspace")

    def test_tar_and_gzip(self):
        need("tar", "gzip")
        out = run(self, "set -e; mkdir -p /tmp/bk-t/d; for i in 1 2 3; do echo $i > /tmp/bk-t/d/$i; done; "
                        "tar -C /tmp/bk-t -czf /tmp/bk-t.tgz d; tar -tzf /tmp/bk-t.tgz | sort | tr '\\n' ' '; "
                        "gzip -t /tmp/bk-t.tgz; rm -rf /tmp/bk-t /tmp/bk-t.tgz")
        self.assertEqual(out.split(), ["d/", "d/1", "d/2", "d/3"])


class Node(unittest.TestCase):
    def test_node_worker_threads(self):
        need("node")
        out = run(self, "node -e \"const {Worker} = require('worker_threads'); "
                        "const w = new Worker('require(\\\\'worker_threads\\\\').parentPort.postMessage(6 * 7)', "
                        "{eval: true}); w.on('message', m => { console.log(m); w.terminate(); });\"")
        self.assertEqual(out.strip(), "42")


class Data(unittest.TestCase):
    def test_sqlite3(self):
        need("sqlite3")
        out = run(self, "sqlite3 /tmp/bk.db 'create table t(x); insert into t values (1), (2), (39); "
                        "select sum(x) from t;'; rm -f /tmp/bk.db")
        self.assertEqual(out.strip(), "42")

    def test_ps_sees_the_exec_and_its_init(self):
        need("ps")
        out = run(self, "ps -e -o pid=,comm= | sort -n")
        rows = [line.split() for line in out.strip().splitlines()]
        self.assertEqual(rows[0], ["1", "boxkite-init"], out)
        self.assertIn("ps", [r[1] for r in rows], out)


if __name__ == "__main__":
    unittest.main()
