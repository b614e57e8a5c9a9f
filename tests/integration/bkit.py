"""Shared machinery of the integration tier (tests/integration): the real boxkited, run as root.

What is here, and nothing more:
  * cleanup  -- one LIFO stack of undo actions, run by the test that made them, by the class or
                module that made them, and (whatever happened) at exit or on SIGTERM/SIGINT;
  * Daemon   -- a boxkited of build/, started directly (local mode, optionally in a network
                namespace) or through a prefix (nsenter into a pod's PID namespace), with its own
                key, workspace, config file and log, driven with build/bkctl;
  * probes   -- build/bk-probe run as the sandboxed command; its one line parsed
                ("PROBE <name> DENIED|ALLOWED|ERROR ...", tests/escape/bk-probe.c);
  * /proc    -- status fields, children, descendants, finding processes by uid and argv;
  * NetPair  -- a "pod" and a "cloud" network namespace joined by a veth pair;
  * Pod      -- a Kubernetes pod with shareProcessNamespace, emulated as in
                /work/shared/notes/k8s-tooling.md section 5 (see pod_container.sh).

Nothing here touches the machine's own interfaces or routes: every link lives in a namespace
this file creates, and only loopback is dialled in the machine's own namespace.
"""

import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "python"))
import boxkited_process  # noqa: E402  (its process helpers only: standard library, no client)

BUILD = Path(os.environ.get("BOXKITE_BUILD", REPO / "build")).resolve()
BOXKITED = BUILD / "boxkited"
EXECUTOR = BUILD / "boxkite-executor"
EXECUTOR_COMM = "boxkite-executo"  # its name as the kernel keeps it: 15 characters
BKCTL = BUILD / "bkctl"
INIT = BUILD / "boxkite-init"
PROBE = BUILD / "bk-probe"
PYTHON = "/usr/bin/python3"  # not a pyenv shim: the tests run commands as other users too
SANDBOX_UID = 1001

STOP_WAIT = 5  # seconds boxkited has to exit after SIGTERM before stop() SIGKILLs it

# bkctl exec's own exit codes (client/cli/bkctl.h): the command's status, 128+signal, these.
EXIT_TIMEOUT = 124
EXIT_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000

# --- cleanup ----------------------------------------------------------------------------------

_cleanups = []
_cleanup_lock = threading.Lock()


def defer(fn, *args, **kwargs):
    """Register an undo action; returns a token for undo_now()."""
    entry = [fn, args, kwargs]
    with _cleanup_lock:
        _cleanups.append(entry)
    return entry


def undo_now(entry):
    """Run one registered undo action now (once), and forget it."""
    with _cleanup_lock:
        if entry not in _cleanups:
            return
        _cleanups.remove(entry)
    _run(entry)


def _run(entry):
    fn, args, kwargs = entry
    try:
        fn(*args, **kwargs)
    except Exception as e:  # cleanup goes on whatever one step did
        print(f"bkit: cleanup {getattr(fn, '__name__', fn)}: {e}", file=sys.stderr)


@contextlib.contextmanager
def scope():
    """Undo, on leaving the block, everything registered inside it (LIFO): for a test that makes
    and tears down several daemons or pods in turn."""
    with _cleanup_lock:
        mark = len(_cleanups)
    try:
        yield
    finally:
        while True:
            with _cleanup_lock:
                if len(_cleanups) <= mark:
                    break
                entry = _cleanups.pop()
            _run(entry)


def cleanup_all():
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the undoing short
    while True:
        with _cleanup_lock:
            if not _cleanups:
                return
            entry = _cleanups.pop()
        _run(entry)


atexit.register(cleanup_all)


def _on_signal(signum, frame):
    # unittest lets KeyboardInterrupt through (it records any other exception as an error and
    # goes on): the run stops, the tests' own cleanups unwind, then cleanup_all() undoes the rest.
    raise KeyboardInterrupt(f"signal {signum}")


for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


def _child_setup(netns=None, cgroup=None):
    """preexec_fn: die with the test runner; optionally join a network namespace and a
    ContainerCgroup first."""
    procs = cgroup.procs_files() if cgroup else []

    def setup():
        boxkited_process.die_with_parent(signal.SIGKILL)
        for f in procs:
            fd = os.open(f, os.O_WRONLY)
            os.write(fd, b"0")
            os.close(fd)
        if netns:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                os._exit(121)
            os.close(fd)
    return setup


def popen(argv, netns=None, **kw):
    """A child process that dies with the runner (PR_SET_PDEATHSIG), stopped at cleanup."""
    p = subprocess.Popen([str(a) for a in argv], preexec_fn=_child_setup(netns), **kw)
    defer(stop_process, p)
    return p


def stop_process(p, sig=signal.SIGTERM, wait=5.0):
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
    for f in (p.stdin, p.stdout, p.stderr):
        if f:
            f.close()


def run(argv, timeout=30, check=False, netns=None, **kw):
    """A short command, bounded by its timeout. A preexec_fn (unsafe with threads, which the
    concurrency test runs this from) only when it must join a network namespace."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    if netns:
        kw["preexec_fn"] = _child_setup(netns)
    return subprocess.run([str(a) for a in argv], timeout=timeout, check=check, **kw)


def temp_dir(tag):
    d = Path(tempfile.mkdtemp(prefix=f"bk-itest-{os.getpid()}-{tag}."))
    defer(shutil.rmtree, d, ignore_errors=True)
    return d


free_tcp_port = boxkited_process.free_tcp_port


def wait_for(pred, timeout, interval=0.05, what="condition"):
    """Poll pred() until it returns a true value (returned) or timeout (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# --- skips ------------------------------------------------------------------------------------

def require_root():
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root (it runs boxkited, makes namespaces and cgroups)")


def require_tools(*tools):
    for t in tools:
        if not shutil.which(t) and not os.path.exists(t):
            raise unittest.SkipTest(f"needs {t}")


def require_build():
    for b in (BOXKITED, EXECUTOR, BKCTL, INIT, PROBE):
        if not b.exists():
            raise unittest.SkipTest(f"{b} is not built (make all {BUILD.name}/bk-probe)")


# --- /proc ------------------------------------------------------------------------------------

def proc_status(pid):
    """/proc/PID/status as a dict of strings, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def proc_alive(pid):
    st = proc_status(pid)
    return st is not None and not st.get("State", "").startswith(("Z", "X"))


def proc_comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def proc_cmdline(pid):
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def proc_uid(pid):
    st = proc_status(pid)
    return int(st["Uid"].split()[0]) if st else None


def proc_nspids(pid):
    """NSpid: this process's pid in each nested PID namespace, outermost (the host's) first."""
    st = proc_status(pid)
    return [int(x) for x in st["NSpid"].split()] if st else []


def proc_children(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [int(x) for x in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


proc_descendants = boxkited_process.descendants  # pids below pid, parents before children


def is_sandbox_init(pid):
    """A sandbox's boxkite-init (started without arguments), not an exec's (boxkite-init --exec)."""
    argv = proc_cmdline(pid)
    return len(argv) == 1 and os.path.basename(argv[0]) == "boxkite-init"


def find_processes(uid=None, argv=None):
    """Host pids of live processes with this real uid and exactly this argv."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if uid is not None and proc_uid(pid) != uid:
            continue
        if argv is not None and proc_cmdline(pid) != list(argv):
            continue
        if proc_alive(pid):
            found.append(pid)
    return found


def cap_mask(status, field):
    return int(status[field], 16)


def executor_cgroup_dirs(executor):
    """The per-daemon cgroup directories an executor makes (sidecar/exec/cgroup.c): boxkite-<its pid,
    as its own PID namespace numbers it> beneath the cgroup it started in, in the pids and memory
    v1 hierarchies or in the v2 one. The executor may itself sit below that directory (waiting in
    an exec's cgroup), so it is looked for on the executor's own path first. Only those that
    exist now."""
    name = f"boxkite-{proc_nspids(executor)[-1]}"
    found = []
    for line in Path(f"/proc/{executor}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        parts = [p for p in path.split("/") if p]
        base = parts[:parts.index(name) + 1] if name in parts else parts + [name]
        for c in ctrls.split(",") if ctrls else [""]:
            if c in ("pids", "memory"):
                found.append(Path("/sys/fs/cgroup", c, *base))
            elif c == "":  # v2: at /sys/fs/cgroup itself, or at .../unified on a hybrid machine
                found += [Path("/sys/fs/cgroup", *base), Path("/sys/fs/cgroup/unified", *base)]
    return [d for d in found if d.is_dir()]


class ContainerCgroup:
    """A cgroup of its own for an emulated container (as a pod's containers each have one), made
    beneath the runner's own cgroup in the pids and memory v1 hierarchies, removed at cleanup.
    Without v1 hierarchies it is empty and the container stays in the runner's cgroup.

    Why the pod's sidecar gets one: boxkited names its cgroup directory boxkite-<pid> after its
    pid in its own PID namespace and, at start, removes such directories whose pid is not alive
    -- in its own namespace. A sidecar in a pod's PID namespace sharing a cgroup parent with
    other boxkiteds on this machine would take theirs for stale (and they its)."""

    def __init__(self, name):
        self.dirs = []
        own = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(","):
                own[c] = path
        for c in ("pids", "memory"):
            if c in own and Path(f"/sys/fs/cgroup/{c}/cgroup.procs").exists():
                d = Path(f"/sys/fs/cgroup/{c}{own[c].rstrip('/')}/{name}")
                d.mkdir()
                self.dirs.append(d)
                defer(self.remove, d)

    def procs_files(self):
        return [str(d / "cgroup.procs") for d in self.dirs]

    @staticmethod
    def remove(d):
        if d.exists():
            rmdir_tree(d)


def rmdir_tree(d):
    """rmdir a cgroup directory and its child cgroups, deepest first (they must be empty). One
    that goes away meanwhile (boxkited's own cgroup remover finishing) is what was wanted."""
    for child in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(FileNotFoundError):
            child.rmdir()
    with contextlib.suppress(FileNotFoundError):
        d.rmdir()


# --- bk-probe ---------------------------------------------------------------------------------

PROBE_LINE = re.compile(r"^PROBE (\S+) (DENIED|ALLOWED|ERROR|INFO) ?(.*)$")


class ProbeResult:
    """One bk-probe run in the sandbox: the exec result and the probe's verdict."""

    def __init__(self, argv, rc, result):
        self.argv, self.rc, self.result = argv, rc, result or {}
        out = self.result.get("stdout", "")
        lines = [line for line in out.splitlines() if line]
        self.line = lines[0] if len(lines) == 1 else None
        m = PROBE_LINE.match(self.line or "")
        self.name = m.group(1) if m else None
        self.verdict = m.group(2) if m else None
        rest = m.group(3) if m else ""
        self.reason = rest.split(" ", 1)[0] if rest else ""
        self.detail = rest

    def describe(self):
        return (f"probe {' '.join(self.argv)}: bkctl exit {self.rc}, line {self.line!r}, "
                f"result {json.dumps(self.result)[:1500]}")


# --- sanitizer reports -----------------------------------------------------------------------

# What AddressSanitizer, LeakSanitizer and UBSan write when they find something (make test runs
# this tier once more against the SAN=1 build): a daemon's log with one fails the run (run.py).
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "AddressSanitizer: CHECK",
                   "WARNING: ASan")
SANITIZER_REPORTS = []


def sanitizer_check(tag, log):
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        if any(m in line for m in SANITIZER_MARKS):
            at = text.index(line)
            SANITIZER_REPORTS.append(f"boxkited ({tag}): {text[at:at + 3000]}")
            return


# --- the daemon -------------------------------------------------------------------------------

class Daemon:
    """One boxkited with its own temp dir: key, config file, ipc socket, log, workspace.

    prefix: argv put before boxkited (e.g. nsenter into a pod's PID namespace); netns: a network
    namespace (by name) to start it in. env: extra environment for boxkited. args: extra flags.
    config_name: the config file's name (it is passed as --config PATH, so it shows in cmdline).
    """

    def __init__(self, tag, args=(), env=None, prefix=(), netns=None, workspace=True, tcp=None,
                 config_name="boxkited.conf", config_text="# integration tests\n", tty=None, key_env=None,
                 claim=False, nofile=None):
        self.tag = tag
        self.tty = tty  # a pty's slave fd: boxkited's stdio and controlling terminal, as from a shell
        self.nofile = nofile  # (soft, hard) RLIMIT_NOFILE to start boxkited with
        self.dir = temp_dir(tag)
        os.chmod(self.dir, 0o755)  # the pod emulation's sandbox init is copied from here
        self.key = self.dir / "key"
        self.sock = self.dir / "s.sock"
        self.url = f"ipc://{self.sock}"
        self.tcp = tcp  # (host, port) or None
        self.log = self.dir / "boxkited.log"
        self.config = self.dir / config_name
        self.config.write_text(config_text)
        self.workspace = self.dir / "ws" if workspace else None
        self.netns = netns
        self.prefix = [str(a) for a in prefix]
        self.extra_env = dict(env or {})
        self.args = [str(a) for a in args]
        self.proc = None
        self._front = None
        self.cgroup_dirs = []
        self.leaked_cgroups = []
        self.stop_escalated = False  # SIGTERM was not enough: stop() had to SIGKILL it
        self.cgroup = None  # a ContainerCgroup to start it in, like a pod's container
        run([BKCTL, "keygen", self.key], check=True)
        self.key_id, self.key_secret = self.key.read_text().split()[-2:]
        # key_env: boxkited reads the key from this variable (--key-env, as a Kubernetes
        # secretKeyRef gives it), not from the file; clients still use the file.
        self.key_env = key_env
        if key_env:
            self.extra_env[key_env] = self.key.read_text()
        # claim: the key is a warm pool's claim key (--claim-key-env / --claim-key-file).
        self.claim = claim

    @property
    def tcp_url(self):
        """The tcp:// URL of self.tcp (None without one)."""
        return f"tcp://{self.tcp[0]}:{self.tcp[1]}" if self.tcp else None

    def argv(self):
        a = self.prefix + [str(BOXKITED), "--config", str(self.config), "--listen", self.url]
        option = "--claim-key" if self.claim else "--key"
        a += [f"{option}-env", self.key_env] if self.key_env else [f"{option}-file", str(self.key)]
        if self.tcp:
            a += ["--listen", self.tcp_url]
        if self.workspace:
            a += ["--workspace", str(self.workspace)]
        # Its own state (the replay log), kept across restarts of this daemon.
        a += ["--state-dir", str(self.dir / "state")]
        return a + self.args

    def start(self, ready_timeout=15):
        env = dict(os.environ)
        env.pop("BOXKITE_URL", None)
        env.pop("BOXKITE_KEY_FILE", None)
        env.update(self.extra_env)
        self._logf = open(self.log, "wb")
        setup = _child_setup(self.netns, self.cgroup)
        if self.nofile:
            def setup_with_limit(setup=setup, nofile=self.nofile):
                setup()
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
            setup = setup_with_limit
        stdio = dict(stdin=subprocess.DEVNULL, stdout=self._logf, stderr=self._logf)
        if self.tty is not None:
            def setup_with_terminal(setup=setup):
                setup()
                os.setsid()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            stdio = dict(stdin=self.tty, stdout=self.tty, stderr=self.tty)
            setup = setup_with_terminal
        self.proc = subprocess.Popen(self.argv(), env=env, preexec_fn=setup, **stdio)
        defer(self.stop)
        try:
            wait_for(self._ready, ready_timeout, interval=0.1, what=f"boxkited ({self.tag}) to answer Health")
        except AssertionError:
            raise AssertionError(f"boxkited ({self.tag}) did not come up; log:\n{self.log_text()}")
        self.cgroup_dirs = executor_cgroup_dirs(self.executor_pid())
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"boxkited ({self.tag}) exited {self.proc.returncode}; log:\n{self.log_text()}")
        h = self.health()
        return h if h.get("status") == "OK" else None

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    # Processes: the front (talks to clients), its child the executor (boxkite-executor), and
    # (local mode) the executor's child boxkite-init.
    def front_pid(self):
        if self._front is None:
            if not self.prefix:
                self._front = self.proc.pid
            else:
                def find():
                    for pid in proc_descendants(self.proc.pid):
                        if proc_comm(pid) == "boxkited":
                            return pid
                    return None
                self._front = wait_for(find, 5, what="the boxkited front process")
        return self._front

    def executor_pid(self):
        kids = [p for p in proc_children(self.front_pid()) if proc_comm(p) == EXECUTOR_COMM]
        if len(kids) != 1:
            raise AssertionError(f"expected one executor child of the front, found {kids}")
        return kids[0]

    def local_init_pid(self):
        # The sandbox's init, not an exec's (boxkite-init --exec ..., also the executor's child).
        kids = [p for p in proc_children(self.executor_pid()) if is_sandbox_init(p)]
        if len(kids) != 1:
            raise AssertionError(f"expected one boxkite-init child of the executor, found {kids}")
        return kids[0]

    def stop(self):
        """SIGTERM the front and wait. Afterwards, cgroup directories the executor made and left
        behind are removed here (we started it) and listed in .leaked_cgroups."""
        if not self.proc:
            return
        self._stop()
        self.leaked_cgroups = [d for d in self.cgroup_dirs if d.exists()]
        for d in self.leaked_cgroups:
            rmdir_tree(d)

    def _stop(self):
        if self.proc.poll() is None:
            front = self._front or (self.proc.pid if not self.prefix else None)
            if front is None:
                try:
                    front = self.front_pid()
                except AssertionError:
                    front = self.proc.pid
            family = [front] + proc_descendants(front)  # executor, its helpers, a local sandbox
            try:
                os.kill(front, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.stop_escalated = True
                print(f"bkit: boxkited ({self.tag}) still running {STOP_WAIT} s after SIGTERM: SIGKILL",
                      file=sys.stderr)
                try:
                    os.kill(front, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.kill()
                self.proc.wait(timeout=5)
            # The executor and its helpers die with the front (PR_SET_PDEATHSIG): wait for that,
            # so that their cgroups are empty when stop() looks at them.
            try:
                wait_for(lambda: not any(proc_alive(p) for p in family), 5,
                         what=f"boxkited ({self.tag})'s processes to exit")
            except AssertionError as e:
                print(f"bkit: {e}: {[p for p in family if proc_alive(p)]}", file=sys.stderr)
        self._logf.close()
        sanitizer_check(self.tag, self.log)

    # --- bkctl ---
    def bkctl(self, *args, timeout=60, url=None, netns=None, input=None, text=True):
        env = dict(os.environ)
        env["BOXKITE_URL"] = url or self.url
        env["BOXKITE_KEY_FILE"] = str(self.key)
        kw = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return run([BKCTL, *args], timeout=timeout, env=env, netns=netns, text=text, **kw)

    def health(self, **kw):
        r = self.bkctl("-o", "json", "health", timeout=10, **kw)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"status": "UNPARSED", "rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr}

    def exec_json(self, *args, timeout=60):
        """bkctl -o json exec ARGS: (exit status, the parsed JSON object, stderr)."""
        r = self.bkctl("-o", "json", "exec", *args, timeout=timeout)
        try:
            obj = json.loads(r.stdout)
        except ValueError:
            obj = None
        return r.returncode, obj, r.stderr

    def install_probe(self, name="bk-probe"):
        """Copy bk-probe into the workspace; returns its path inside the sandbox."""
        dst = self.workspace / name
        shutil.copyfile(PROBE, dst)
        os.chmod(dst, 0o755)
        return f"/workspace/{name}"

    def probe(self, *args, probe_path="/workspace/bk-probe", exec_opts=(), timeout=90):
        argv = [str(a) for a in args]
        rc, obj, err = self.exec_json(*exec_opts, "--", probe_path, *argv, timeout=timeout)
        if obj is not None and "stderr" in obj and err:
            obj["bkctl_stderr"] = err
        elif obj is None:
            obj = {"bkctl_stderr": err}
        return ProbeResult(argv, rc, obj)


# --- assertions -------------------------------------------------------------------------------

class ProbeAssertions:
    """Mixin for unittest.TestCase: a probe's named denial, asserted from inside the sandbox."""

    def assertDenied(self, daemon, *args, reason=None, **kw):
        """bk-probe ARGS must say DENIED (exit 0), with a reason token matching regex `reason`."""
        r = daemon.probe(*args, **kw)
        self.assertEqual(r.verdict, "DENIED", r.describe())
        self.assertEqual(r.name, str(args[0]), r.describe())
        self.assertEqual(r.result.get("exit_code"), 0, r.describe())
        self.assertEqual(r.rc, 0, r.describe())
        if reason is not None:
            self.assertRegex(r.reason, f"^(?:{reason})$", r.describe())
        return r


# --- network namespaces -----------------------------------------------------------------------

def netns_add(name):
    run(["ip", "netns", "add", name], check=True)
    defer(netns_del, name)
    run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)


def netns_del(name):
    if Path(f"/run/netns/{name}").exists():
        run(["ip", "netns", "del", name], check=True)


def sweep_stale_netns():
    """Remove bk-itest network namespaces left by a runner that was SIGKILLed (its pid is in the
    name and no longer alive)."""
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return
    for n in names:
        m = re.match(r"^bkit(\d+)[a-z]+$", n)
        if m and int(m.group(1)) != os.getpid() and not Path(f"/proc/{m.group(1)}").exists():
            run(["ip", "netns", "del", n])


def sweep_stale_temp_dirs():
    """Remove bk-itest temp directories of a runner that was SIGKILLed (its pid is in the name)."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob("bk-itest-*-*"):
        m = re.match(r"^bk-itest-(\d+)-", d.name)
        if m and int(m.group(1)) != os.getpid() and not Path(f"/proc/{m.group(1)}").exists():
            shutil.rmtree(d, ignore_errors=True)


class NetPair:
    """A "pod" and a "cloud" network namespace joined by a veth pair (created inside the pod
    namespace with its peer moved straight into the cloud one: it never exists in the machine's
    own namespace).

      pod:   lo, vpod 169.254.10.1/30, route 169.254.169.254/32 via 169.254.10.2
      cloud: lo (+169.254.169.254/32), vcloud 169.254.10.2/30
    """

    POD_ADDR = "169.254.10.1"
    CLOUD_ADDR = "169.254.10.2"
    METADATA = "169.254.169.254"

    def __init__(self, tag=""):
        # tag (lowercase letters): another pair in the same runner (each module's lives until exit)
        self.pod = f"bkit{os.getpid()}{tag}p"
        self.cloud = f"bkit{os.getpid()}{tag}c"
        netns_add(self.pod)
        netns_add(self.cloud)
        ip = lambda ns, *a: run(["ip", "-n", ns, *a], check=True)
        ip(self.pod, "link", "add", "vpod", "type", "veth", "peer", "name", "vcloud", "netns", self.cloud)
        ip(self.pod, "addr", "add", f"{self.POD_ADDR}/30", "dev", "vpod")
        ip(self.pod, "link", "set", "vpod", "up")
        ip(self.cloud, "addr", "add", f"{self.CLOUD_ADDR}/30", "dev", "vcloud")
        ip(self.cloud, "link", "set", "vcloud", "up")
        ip(self.cloud, "addr", "add", f"{self.METADATA}/32", "dev", "lo")
        ip(self.pod, "route", "add", f"{self.METADATA}/32", "via", self.CLOUD_ADDR)


# A tiny HTTP server answering every GET with a marker (the cloud metadata stand-in), or a bare
# TCP listener (accepts and closes). Run with /usr/bin/python3 -c.
HTTP_STANDIN = r"""
import http.server, sys
marker = sys.argv[3].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(marker)))
        self.end_headers()
        self.wfile.write(marker)
    def log_message(self, *a):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""

TCP_LISTENER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.close()
"""

TCP_CONNECT = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()
    print("connected")
except OSError as e:
    print("refused", e)
    sys.exit(1)
"""

HTTP_GET = r"""
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())
"""


def tcp_listener(host, port, netns=None):
    p = popen([PYTHON, "-c", TCP_LISTENER, host, port], netns=netns, stdout=subprocess.DEVNULL)
    wait_for(lambda: run([PYTHON, "-c", TCP_CONNECT, host, port], netns=netns).returncode == 0, 10,
             what=f"a listener on {host}:{port}")
    return p


# --- TLS and HTTP ------------------------------------------------------------------------------

def tls_files(directory, name="bk-itest"):
    """A sidecar's certificate and key as `bkctl kube NAME` makes them: (cert path, key path)."""
    return tuple(Path(p) for p in boxkited_process.tls_files(directory, name))


def http_get(url, timeout=5, method="GET"):
    """(status, body text) of one plain HTTP request to a loopback URL."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


# --- the pod emulation ------------------------------------------------------------------------

class Pod:
    """A Kubernetes pod with shareProcessNamespace: true, emulated (k8s-tooling.md section 5).

      pause      `unshare --pid --fork --mount-proc sleep infinity`: PID 1 of the pod's PID
                 namespace, in a mount namespace of its own with that namespace's /proc;
      sandbox    pod_container.sh, started INTO that PID namespace with nsenter (so its parent is
                 outside it: ppid 0 as the pod sees it) in new mount/UTS/IPC namespaces: a
                 read-only root of its own (a tmpfs holding the marker file and the init, with
                 the host's /usr and /etc bound read-only, no nosuid), a tmpfs /tmp, a minimal
                 /dev, a writable /workspace bound from a temp dir, pivot_root'ed; then
                 boxkite-init as uid 1001 with no capabilities and no_new_privs;
      sidecar    `boxkited --pod`, started into the same PID namespace with nsenter, in a mount
                 namespace of its own showing the pod's /proc and in a cgroup of its own (as a
                 container's would; see ContainerCgroup).

    The pod's PID namespace starts its pids above 1000 (ns_last_pid), so that no pod pid can be
    mistaken for one of the few small pids inside an exec's own PID namespace.
    """

    def __init__(self, tag="pod", daemon_args=(), caps=None, key_env=None, claim=False):
        require_tools("unshare", "nsenter", "setpriv")
        self.dir = temp_dir(tag)
        os.chmod(self.dir, 0o755)
        self.root = self.dir / "root"  # a mount point only; the tmpfs is in the container's namespace
        self.root.mkdir()
        self.workspace = self.dir / "ws"
        self.workspace.mkdir()
        os.chown(self.workspace, SANDBOX_UID, SANDBOX_UID)
        self.marker = f"container-marker-{secrets.token_hex(6)}"
        # A marker that only the sidecar (the host's filesystem) shows.
        self.sidecar_marker = self.dir / "sidecar-marker"
        self.sidecar_marker.write_text("sidecar\n")
        self.containers = []
        self.container_of = {}  # init host pid -> its nsenter
        # pause dies with the runner (setpriv --pdeathsig) and takes the whole PID namespace along.
        self.pause_parent = popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                                   "setpriv", "--pdeathsig", "KILL", "--", "sleep", "infinity"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pause = wait_for(lambda: next(iter(proc_children(self.pause_parent.pid)), None), 5,
                              what="the pod's pause process")
        wait_for(lambda: proc_comm(self.pause) == "sleep", 5, what="pause to exec sleep")
        defer(self._kill_pause)
        # Random, so that two runs at once do not number their sidecars alike: the executor names
        # its cgroup directory after its pid in its own namespace.
        run(["nsenter", "-t", self.pause, "-p", "-m", "--", "sh", "-c",
             f"echo {1000 + secrets.randbelow(20000)} > /proc/sys/kernel/ns_last_pid"], check=True)
        self.init_pid = None
        # caps: the sidecar as a container with exactly these capabilities (manifest names,
        # e.g. SYS_ADMIN) and a read-only /sys/fs/cgroup (sidecar_container.sh).
        container = [] if caps is None else ["/bin/bash", HERE / "sidecar_container.sh", ",".join(caps), "--"]
        self.daemon = Daemon(f"{tag}-sidecar", args=["--pod", *daemon_args], workspace=False, key_env=key_env,
                             claim=claim,
                             prefix=["nsenter", "-t", self.pause, "-p", "--",
                                     "unshare", "--mount", "--propagation", "private", "--mount-proc",
                                     *container])
        self.daemon.cgroup = ContainerCgroup(f"bk-itest-{os.getpid()}-{tag}-sidecar")

    def _kill_pause(self):
        if proc_alive(self.pause):
            os.kill(self.pause, signal.SIGKILL)  # PID 1: the whole pod's PID namespace goes with it
        stop_process(self.pause_parent)
        for c in self.containers:
            stop_process(c)

    def start_container(self, timeout=10):
        """Start a sandbox container; returns the host pid of its boxkite-init (also .init_pid)."""
        p = popen(["nsenter", "-t", self.pause, "-p", "--",
                   "unshare", "--mount", "--uts", "--ipc", "--propagation", "private", "--",
                   "/bin/bash", HERE / "pod_container.sh", self.root, self.workspace, INIT, self.marker],
                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.containers.append(p)

        def init_running():
            if p.poll() is not None:
                raise AssertionError(f"the sandbox container exited {p.returncode}: {p.stderr.read()}")
            for pid in proc_children(p.pid):
                if proc_comm(pid) == "boxkite-init" and proc_uid(pid) == SANDBOX_UID:
                    return pid
            return None
        self.init_pid = wait_for(init_running, timeout, what="the sandbox container's boxkite-init")
        self.container_of[self.init_pid] = p
        return self.init_pid

    def kill_container(self, init_pid=None):
        """SIGKILL a container's boxkite-init (default: the last started) and reap it."""
        pid = init_pid or self.init_pid
        os.kill(pid, signal.SIGKILL)
        self.container_of.pop(pid).wait(timeout=10)

    @contextlib.contextmanager
    def executor_stopped(self):
        """Hold the sidecar's executor stopped (SIGSTOP) for a while: what changes in the pod
        meanwhile, it sees all at once when it goes on."""
        ex = self.daemon.executor_pid()
        os.kill(ex, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(ex, signal.SIGCONT)

    def tracked_init(self):
        """Host pid of the process the executor holds a pidfd of and that is a boxkite-init: the
        sandbox init it follows (or None)."""
        ex = self.daemon.executor_pid()
        for fd in os.listdir(f"/proc/{ex}/fd"):
            try:
                if os.readlink(f"/proc/{ex}/fd/{fd}") != "anon_inode:[pidfd]":
                    continue
                info = Path(f"/proc/{ex}/fdinfo/{fd}").read_text()
            except OSError:
                continue
            m = re.search(r"^Pid:\s*(-?\d+)", info, re.M)
            # An exec's init is a boxkite-init too (with --exec): not the sandbox's.
            if m and int(m.group(1)) > 0 and is_sandbox_init(int(m.group(1))):
                return int(m.group(1))
        return None

    def nsenter_container(self, *argv, nnp=True, timeout=30):
        """Run argv in the sandbox container as uid 1001 without capabilities (and, unless
        nnp=False, with no_new_privs), the way a `kubectl exec` into it would."""
        drop = ["setpriv", "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID), "--clear-groups",
                "--inh-caps=-all"] + (["--no-new-privs"] if nnp else []) + ["--"]
        return run(["nsenter", "-t", self.init_pid, "-m", "-u", "-i", "-p", "--", *drop, *argv],
                   timeout=timeout)
