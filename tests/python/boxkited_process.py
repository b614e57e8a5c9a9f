"""Run a real build/boxkited for a test: a key file from `bkctl keygen`, a free 127.0.0.1 TCP
port, the sandbox's workspace and the daemon's log in a temp dir; stopped with SIGTERM.

With ipc=True it listens on a Unix socket in that temp dir too (ipc_url), beside tcp (url).

Also the process helpers the other Python tiers share (tests/files/fileskit.py and
tests/integration/bkit.py import this module): free_tcp_port(), die_with_parent() and
descendants(). Standard library only at import time (the boxkite package, and so
python3-protobuf, is imported when a daemon is first waited for), so that bkit can use it
without the package.
"""

import base64
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# BOXKITE_BUILD names the build directory (python.mk passes $(B)); build/ by default.
BUILD_DIR = os.environ.get("BOXKITE_BUILD", os.path.join(REPO_ROOT, "build"))
BOXKITED = os.path.join(BUILD_DIR, "boxkited")
BKCTL = os.path.join(BUILD_DIR, "bkctl")

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def missing_binaries():
    """Why the daemon cannot be run here, or None."""
    for path in (BOXKITED, BKCTL):
        if not os.access(path, os.X_OK):
            return "%s is not built (make all)" % path
    return None


def skip_reason(import_error=None):
    """Why a test of a live boxkited cannot run here (the runner prints it after "SKIP"), or None:
    import_error, the test module's failed import of the boxkite package, first."""
    if import_error:
        return import_error
    if os.geteuid() != 0:
        return "boxkited makes a sandbox: needs root"
    return missing_binaries()


def free_tcp_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tls_files(directory, name="bk-ptest"):
    """A sidecar's certificate and key as `bkctl kube NAME` makes them (its Secret's tls.crt and
    tls.key, decoded), written to directory; returns (cert path, key path)."""
    r = subprocess.run([BKCTL, "kube", name], check=True, capture_output=True, text=True)
    secret = r.stdout.split("\n---\n", 1)[0]
    data = dict(line.strip().split(": ", 1) for line in secret.split("data:\n", 1)[1].splitlines() if ": " in line)
    cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
    with open(cert, "wb") as f:
        f.write(base64.b64decode(data["tls.crt"]))
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as f:
        f.write(base64.b64decode(data["tls.key"]))
    return cert, key


def die_with_parent(sig=signal.SIGTERM):
    """In a child between fork and exec (a preexec_fn, or called from one): receive sig when the
    thread that started it exits, so that nothing outlives a killed test run."""
    _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def descendants(pid):
    """Pids of every live process below pid (children, theirs, ...), parents before children."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, seen, i = [], {pid}, 0
    todo = [pid]
    while i < len(todo):
        for c in sorted(children.get(todo[i], ())):
            if c not in seen:
                seen.add(c)
                out.append(c)
                todo.append(c)
        i += 1
    return out


class Boxkited:
    """with Boxkited() as d: d.port, d.key_file, d.log() ...

    args: extra flags (e.g. ["--root", "/usr:ro"]); workspace: a host directory to serve as
    /workspace (default <temp dir>/workspace); key_file: a key file to copy (the same tenant as
    another daemon's), instead of a fresh key; ipc: also listen on ipc_url. The daemon gets
    SIGTERM when the thread that started it exits (PR_SET_PDEATHSIG). A subclass waits for more
    in _after_ready()."""

    START_TIMEOUT_S = 10.0

    def __init__(self, args=(), workspace=None, key_file=None, ipc=False):
        self.dir = tempfile.mkdtemp(prefix="boxkite-pytest-")
        self.ipc_url = "ipc://" + os.path.join(self.dir, "boxkited.sock") if ipc else None
        self.key_file = os.path.join(self.dir, "key")
        self.key_from = key_file  # another daemon's key (the same tenant), or None: a fresh one
        self.log_path = os.path.join(self.dir, "boxkited.log")
        self.args = [str(a) for a in args]
        self.workspace = workspace or os.path.join(self.dir, "workspace")
        self.proc = None
        self.port = None
        self.died_early, self.hung, self.leftover = False, False, []
        self.last_log = ""

    def __enter__(self):
        try:
            if self.key_from:
                shutil.copyfile(self.key_from, self.key_file)
                os.chmod(self.key_file, 0o600)
            else:
                subprocess.run([BKCTL, "keygen", self.key_file], check=True, capture_output=True)
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        return "tcp://127.0.0.1:%d" % self.port

    def client(self, **kw):
        """A boxkite.Client of this daemon, over tcp:// with its key unless told otherwise."""
        import boxkite
        kw.setdefault("key_file", self.key_file)
        return boxkite.Client(kw.pop("url", self.url), **kw)

    def _start(self):
        # The port may be taken between free_tcp_port() and the daemon's bind: try a few.
        for _ in range(5):
            self.port = free_tcp_port()
            listen = ["--listen", self.url] + (["--listen", self.ipc_url] if self.ipc_url else [])
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [BOXKITED] + listen + ["--key-file", self.key_file, "--workspace", self.workspace,
                                           "--state-dir", os.path.join(self.dir, "state")] + self.args,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            if self._wait_ready():
                self._after_ready()
                return
            if "address in use" not in self.log().lower():
                break
        why = "boxkited did not start (exit %s); its log:\n%s" % (self.proc.poll(), self.log())
        if os.geteuid() != 0:
            # The daemon sets up a sandbox, which takes root: not a failure of the code under test.
            raise unittest.SkipTest("not root: " + why)
        raise RuntimeError(why)

    def _wait_ready(self):
        """True once an SP connection succeeds; False if the daemon exited or never answered."""
        from boxkite import UnavailableError, wire

        deadline = time.monotonic() + self.START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with wire.Channel(self.url, timeout=1.0) as ch:
                    ch.connect()
                return True
            except UnavailableError:
                time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        return False

    def _after_ready(self):
        """Called once the daemon accepts connections; raise if what else it needs never comes."""

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def restart(self, sig=signal.SIGTERM):
        """Stop the daemon (with sig: SIGKILL for a crash) and start it again on the same
        directory: its key, workspace and state. Returns the old process's exit status."""
        if sig != signal.SIGTERM and self.proc is not None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        status = self.stop(remove=False)
        self._start()
        return status

    def stop(self, term_wait=10.0, remove=True):
        """SIGTERM; SIGKILL after term_wait s. Then whatever it started and left behind is killed
        too: nothing outlives a test. Returns the exit status (None if never started); sets
        died_early (it had exited before we asked), hung (SIGTERM was not enough), leftover (pids
        that outlived it) and last_log (its log, read after it stopped). remove=False keeps its
        directory for a restart."""
        status = None
        if self.proc is not None:
            self.died_early, self.hung, self.leftover = False, False, []
            pids = descendants(self.proc.pid)
            if self.proc.poll() is not None:
                self.died_early = True
            else:
                self.proc.terminate()
                try:
                    self.proc.wait(term_wait)
                except subprocess.TimeoutExpired:
                    self.hung = True
                    self.proc.kill()
                    self.proc.wait()
            status = self.proc.returncode
            # The executor and its helpers die with the front (PR_SET_PDEATHSIG): a hang guard
            # for that, then SIGKILL for what is still there.
            deadline = time.monotonic() + 3
            left = [p for p in pids if os.path.exists("/proc/%d" % p)]
            while left and time.monotonic() < deadline:
                time.sleep(0.05)
                left = [p for p in left if os.path.exists("/proc/%d" % p)]
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.leftover = sorted(left)
            self.proc = None
        if self.dir is not None and remove:
            self.last_log = self.log()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        return status
