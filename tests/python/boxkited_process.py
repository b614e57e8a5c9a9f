"""Run a real build/boxkited for a test: a key file from `bkctl keygen`, a free 127.0.0.1 TCP
port, the sandbox's workspace and the daemon's log in a temp dir; stopped with SIGTERM."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from boxkite_client import REPO_ROOT, SPRequester

# BOXKITE_BUILD names the build directory (python.mk passes $(B)); build/ by default.
BUILD_DIR = os.environ.get("BOXKITE_BUILD", os.path.join(REPO_ROOT, "build"))
BOXKITED = os.path.join(BUILD_DIR, "boxkited")
BKCTL = os.path.join(BUILD_DIR, "bkctl")


def missing_binaries():
    """Why the daemon cannot be run here, or None."""
    for path in (BOXKITED, BKCTL):
        if not os.access(path, os.X_OK):
            return "%s is not built (make all)" % path
    return None


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Boxkited:
    """with Boxkited() as d: d.port, d.key_file, d.log() ..."""

    START_TIMEOUT_S = 10.0

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="boxkite-pytest-")
        self.key_file = os.path.join(self.dir, "key")
        self.log_path = os.path.join(self.dir, "boxkited.log")
        self.proc = None
        self.port = None

    def __enter__(self):
        try:
            subprocess.run([BKCTL, "keygen", self.key_file], check=True, capture_output=True)
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _start(self):
        # The port may be taken between free_tcp_port() and the daemon's bind: try a few.
        for _ in range(5):
            self.port = free_tcp_port()
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [BOXKITED, "--listen", "tcp://127.0.0.1:%d" % self.port, "--key-file", self.key_file,
                     "--workspace", os.path.join(self.dir, "workspace")],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            if self._wait_ready():
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
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                SPRequester("127.0.0.1", self.port, 1.0).close()
                return True
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        return False

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; returns the exit status (None if never started)."""
        status = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            status = self.proc.returncode
            self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        return status
