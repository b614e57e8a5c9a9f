"""The escape suite, local mode: each attack made from inside the sandbox by build/bk-probe
(copied into the workspace, run as the sandboxed command through `bkctl -o json exec`), each
asserted as a named denial: the verdict DENIED and the reason token the layer that stops it
gives (an errno, a signal, an observed fact).

One boxkited serves the whole module, started with secrets for the sandbox to look for: a
variable BOXKITE_TEST_SECRET in its environment, a --config file whose path holds a marker, and
its key file; with small per-exec limits (--exec-pids 64, --exec-memory 64M, --exec-fsize 1M) so
that the bombs meet them quickly; and with a TCP listener on 127.0.0.1 beside its ipc:// one.

The network tests with a pod network namespace and the cloud metadata stand-in are in
test_network.py; the same probes in pod mode are in test_pod.py.
"""
import os
import re
import secrets
import signal
import subprocess
import unittest

import bkit

EXEC_PIDS = 64
EXEC_MEMORY_MIB = 64
EXEC_FSIZE = 1 << 20

ENV_SECRET = f"bk-env-secret-{secrets.token_hex(8)}"
CONFIG_MARKER = f"bkcfgmarker{secrets.token_hex(6)}"

D = None          # the module's boxkited
LISTENER = None   # (host, port) of another listener in boxkited's network namespace
SANDBOX_PROBE = "/workspace/bk-probe"
SUID_PROBE = "/workspace/bk-probe-suid"


def setUpModule():
    global D, LISTENER
    bkit.require_root()
    bkit.require_build()
    tcp = ("127.0.0.1", bkit.free_tcp_port())
    D = bkit.Daemon("escape", tcp=tcp, env={"BOXKITE_TEST_SECRET": ENV_SECRET},
                    config_name=f"boxkited-{CONFIG_MARKER}.conf",
                    args=["--exec-pids", EXEC_PIDS, "--exec-memory", f"{EXEC_MEMORY_MIB}M",
                          "--exec-fsize", EXEC_FSIZE]).start()
    D.install_probe()
    # A setuid-root copy, in the one place the sandbox sees that we can write: the workspace.
    suid = D.workspace / "bk-probe-suid"
    suid.write_bytes(bkit.PROBE.read_bytes())
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    LISTENER = ("127.0.0.1", bkit.free_tcp_port())
    bkit.tcp_listener(*LISTENER)


def host_can_connect(host, port, netns=None):
    return bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, host, port], netns=netns).returncode == 0


class Network(bkit.ProbeAssertions, unittest.TestCase):
    def test_tcp_to_boxkited_own_port_on_loopback(self):
        host, port = D.tcp
        self.assertTrue(host_can_connect(host, port), "control: boxkited's TCP port answers the host")
        self.assertDenied(D, "tcp", host, port, reason="ECONNREFUSED")

    def test_tcp_to_another_listener_in_the_sidecar_netns(self):
        self.assertTrue(host_can_connect(*LISTENER), "control: the listener answers the host")
        self.assertDenied(D, "tcp", *LISTENER, reason="ECONNREFUSED")

    def test_udp_to_loopback_gets_no_reply(self):
        self.assertDenied(D, "udp", "127.0.0.1", 53, reason="ECONNREFUSED")

    def test_interfaces_only_lo(self):
        self.assertDenied(D, "interfaces", reason="only-lo")

    def test_raw_socket(self):
        self.assertDenied(D, "raw-socket", reason="EPERM")

    def test_packet_socket(self):
        self.assertDenied(D, "packet-socket", reason="EAFNOSUPPORT")

    def test_vsock_is_refused(self):
        """vsock ignores network namespaces: a socket that bound would share the host's port
        space. Refused by the filter, also with high bits set in the family's register."""
        r = self.assertDenied(D, "vsock", reason="EAFNOSUPPORT")
        self.assertEqual(r.detail, "EAFNOSUPPORT stream=EAFNOSUPPORT,dgram=EAFNOSUPPORT,high-bits=EAFNOSUPPORT",
                         r.describe())

    def test_socket_families_are_an_allowlist(self):
        """Every family but unix, inet, inet6 and netlink, and every netlink protocol but route."""
        r = self.assertDenied(D, "socket-families", reason=None)
        self.assertRegex(r.reason, r"^families=EAFNOSUPPORT,netlink-4=EPROTONOSUPPORT,", r.describe())
        self.assertNotIn("opened", r.describe())

    def test_ordinary_sockets_and_route_netlink_work(self):
        """The allowlist keeps what ordinary tools need: ip(8) reads links and addresses over
        NETLINK_ROUTE, Python makes unix, IPv4 and IPv6 sockets."""
        rc, res, err = D.exec_json("--shell", "ip -o link show lo && ip -o addr show lo && python3 -c '"
                                   "import socket as s\n"
                                   "for f in (s.AF_UNIX, s.AF_INET, s.AF_INET6): s.socket(f, s.SOCK_STREAM).close()\n"
                                   "print(\"ok\")'")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertIn("127.0.0.1", res["stdout"])
        self.assertTrue(res["stdout"].endswith("ok\n"), res)


class SidecarProcesses(bkit.ProbeAssertions, unittest.TestCase):
    """The sidecar's processes and the sandbox's init, by their host pids: not reachable."""

    @classmethod
    def setUpClass(cls):
        cls.front = D.front_pid()
        cls.executor = D.executor_pid()
        cls.init = D.local_init_pid()
        cls.targets = {"front": cls.front, "executor": cls.executor, "sandbox-init": cls.init}

    def test_ptrace(self):
        for what, pid in self.targets.items():
            with self.subTest(what):
                self.assertDenied(D, "ptrace", pid, reason="EPERM")

    def test_process_vm_read(self):
        for what, pid in self.targets.items():
            with self.subTest(what):
                self.assertDenied(D, "process-vm-read", pid, reason="EPERM")

    def test_environ_and_cmdline_secrets(self):
        # Controls: the secrets really are in the front's environment and command line.
        self.assertIn(ENV_SECRET.encode(), open(f"/proc/{self.front}/environ", "rb").read())
        self.assertIn(CONFIG_MARKER.encode(), open(f"/proc/{self.front}/cmdline", "rb").read())
        for what, pid in self.targets.items():
            for secret in (ENV_SECRET, CONFIG_MARKER):
                with self.subTest(what=what, secret=secret[:10]):
                    self.assertDenied(D, "cmdline-secret", pid, secret, reason="ENOENT")
        for f in ("environ", "cmdline"):
            with self.subTest(f"read /proc/{self.front}/{f}"):
                self.assertDenied(D, "read", f"/proc/{self.front}/{f}", reason="ENOENT")

    def test_key_file(self):
        self.assertTrue(D.key.exists())
        self.assertDenied(D, "read", D.key, reason="ENOENT")
        self.assertDenied(D, "read", D.config, reason="ENOENT")

    def test_signal_the_sidecar(self):
        for what, pid in self.targets.items():
            with self.subTest(what):
                self.assertDenied(D, "kill", pid, "KILL", reason="ESRCH")
                self.assertDenied(D, "pid-visible", pid, reason="not-visible")
                self.assertTrue(bkit.proc_alive(pid), f"{what} (pid {pid}) died")
        self.assertEqual(D.health().get("sandbox_ready"), True)


class MountsAndNamespaces(bkit.ProbeAssertions, unittest.TestCase):
    NS = ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup", "time")

    def test_mount(self):
        self.assertDenied(D, "mount", reason="EPERM")

    def test_umount(self):
        for path in ("/proc", "/workspace", "/tmp", "/"):
            with self.subTest(path):
                self.assertDenied(D, "umount", path, reason="EPERM")

    def test_unshare_every_flag(self):
        for flag in self.NS:
            with self.subTest(flag):
                self.assertDenied(D, "unshare", flag, reason="EPERM")

    def test_clone_ns_every_flag(self):
        for flag in self.NS:
            with self.subTest(flag):
                # CLONE_NEWTIME fits only clone3's flags (in clone's it is CSIGNAL): one attempt.
                self.assertDenied(D, "clone-ns", flag,
                                  reason="ENOSYS" if flag == "time" else "clone=EPERM,clone3=ENOSYS")

    def test_setns(self):
        for path in ("/proc/self/ns/net", "/proc/self/ns/mnt", "/proc/self/ns/pid", "/proc/self/ns/user"):
            with self.subTest(path):
                self.assertDenied(D, "setns", path, reason="EPERM")

    def test_chroot(self):
        self.assertDenied(D, "chroot", reason="EPERM")

    def test_pivot_root(self):
        self.assertDenied(D, "pivot-root", reason="EPERM")


class Filesystem(bkit.ProbeAssertions, unittest.TestCase):
    def test_write_read_only_root(self):
        for path in ("/etc/x", "/usr/x", "/x", "/usr/bin/x", "/bin/x"):
            with self.subTest(path):
                self.assertDenied(D, "write", path, reason="EROFS")
        # An existing root-owned file: file permissions refuse first (EACCES), before EROFS.
        self.assertDenied(D, "write", "/etc/passwd", reason="EACCES|EROFS")

    def test_mknod(self):
        for path in ("/tmp/bk-node", "/workspace/bk-node", "/dev/shm/bk-node"):
            with self.subTest(path):
                self.assertDenied(D, "mknod", path, reason="EPERM")


class KernelSurfaces(bkit.ProbeAssertions, unittest.TestCase):
    """Kernel interfaces a sandboxed command never needs: refused with EPERM (seccomp, on top of
    holding no capability); another architecture's syscalls: killed (SIGSYS)."""

    def test_module(self):
        self.assertDenied(D, "module", reason="EPERM")

    def test_bpf(self):
        self.assertDenied(D, "bpf", reason="EPERM")

    def test_io_uring(self):
        self.assertDenied(D, "io-uring", reason="EPERM")

    def test_userfaultfd(self):
        self.assertDenied(D, "userfaultfd", reason="EPERM")

    def test_perf_event_open(self):
        self.assertDenied(D, "perf-event-open", reason="EPERM")

    def test_keyctl(self):
        self.assertDenied(D, "keyctl", reason="EPERM")

    def test_kexec(self):
        self.assertDenied(D, "kexec", reason="EPERM")

    def test_open_by_handle(self):
        self.assertDenied(D, "open-by-handle", reason="EPERM")

    def test_swapon(self):
        self.assertDenied(D, "swapon", reason="EPERM")

    def test_reboot(self):
        self.assertDenied(D, "reboot", reason="EPERM")

    def test_settime(self):
        self.assertDenied(D, "settime", reason="EPERM")

    def test_personality(self):
        """Only the plain personas are listed: a change of execution domain or layout is a call
        that does not exist here."""
        self.assertDenied(D, "personality", reason="ENOSYS")

    def test_modify_ldt(self):
        self.assertDenied(D, "modify-ldt", reason="EPERM")

    def test_calls_outside_the_allowlist_do_not_exist(self):
        """The filter is an allowlist: calls the kernel has but the list leaves out answer ENOSYS,
        as on a kernel too old for them, so that libc falls back (openat2 -> openat)."""
        r = self.assertDenied(D, "unlisted", reason="ENOSYS")
        self.assertEqual(r.detail, "ENOSYS get_mempolicy=ENOSYS,openat2=ENOSYS,clone3=ENOSYS,mbind=ENOSYS",
                         r.describe())

    def test_foreign_arch_is_killed(self):
        r = self.assertDenied(D, "foreign-arch", reason="SIGSYS")
        self.assertIn("i386=SIGSYS", r.detail)
        self.assertIn("x32=SIGSYS", r.detail)


class Terminal(bkit.ProbeAssertions, unittest.TestCase):
    """No terminal reachable: every exec is a session of its own without a controlling terminal,
    and TIOCSTI/TIOCSETD are refused even on a terminal the command made itself. (The attack on
    the operator's own terminal, with boxkited started from one, is test_terminal.py.)"""

    def test_no_controlling_terminal_and_no_input_injection(self):
        r = self.assertDenied(D, "tty", "BKMARK", reason=None)
        self.assertEqual(r.reason, "dev-tty=no-ctty,TIOCSTI=EPERM,TIOCSTI-high-bits=EPERM,TIOCSETD=EPERM",
                         r.describe())

    def test_each_exec_leads_its_own_session(self):
        rc, res, err = D.exec_json("--", "python3", "-c",
                                   "import os; print(os.getsid(0) == os.getpgid(0) == 1, os.getppid())")
        self.assertEqual((rc, res["stdout"]), (0, "True 1\n"), f"{res} {err}")

    def test_the_sandbox_init_has_no_terminal_and_no_stdio_of_boxkited(self):
        pid = D.local_init_pid()
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        sid, tty_nr = int(fields[3]), int(fields[4])
        self.assertEqual(tty_nr, 0, "the sandbox init has a controlling terminal")
        self.assertEqual(sid, pid, "the sandbox init does not lead its own session")
        for fd in (0, 1, 2):
            self.assertEqual(os.readlink(f"/proc/{pid}/fd/{fd}"), "/dev/null", f"fd {fd}")


class SetIdFiles(bkit.ProbeAssertions, unittest.TestCase):
    """A set-id file the sandbox user makes would give uid 1001 to whoever runs it on the host
    side of the workspace (no nosuid there): no way of setting the bits works."""

    def test_set_id_modes_are_refused_everywhere_it_can_write(self):
        for d in ("/workspace", "/tmp", "/home/sandbox", "/dev/shm"):
            with self.subTest(d):
                r = self.assertDenied(D, "setid-mode", d, reason="EPERM")
                self.assertNotIn("mode=", r.detail, r.describe())

    def test_chmod_and_install_cannot_make_a_set_id_file(self):
        rc, res, err = D.exec_json("--shell", "cp /bin/true /workspace/copy && chmod 4755 /workspace/copy; "
                                   "echo chmod=$?; install -m 2755 /bin/true /workspace/copy2; echo install=$?")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split(), ["chmod=1", "install=1"], res)
        self.assertIn("Operation not permitted", res["stderr"])
        for name in ("copy", "copy2"):
            if (D.workspace / name).exists():
                st = os.stat(D.workspace / name)
                self.assertFalse(st.st_mode & 0o6000, f"{name}: {oct(st.st_mode)}")
                os.unlink(D.workspace / name)


class Identity(bkit.ProbeAssertions, unittest.TestCase):
    def test_doctor_finds_every_layer_in_force(self):
        r = D.bkctl("doctor")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("isolated: 0 failed, 0 warning(s)", r.stdout)
        for row in ("pid namespace  ok    the probe is pid 2, child of pid 1", "seccomp        ok",
                    "network        ok    interfaces: lo;"):
            self.assertIn(row, r.stdout)

    def test_caps(self):
        self.assertDenied(D, "caps", reason="caps-0-nnp-seccomp2")

    def test_ids(self):
        self.assertDenied(D, "ids", reason="uid=1001")

    def test_inherited_fds(self):
        self.assertDenied(D, "fds", reason="only-0-1-2")

    def test_no_sidecar_secret_in_environment(self):
        self.assertDenied(D, "env", ENV_SECRET, CONFIG_MARKER, D.key_secret, "BOXKITE_TEST_SECRET", "BOXKITE_KEY",
                          reason="no-match")

    def test_setuid_binary_gains_nothing(self):
        """Local mode mounts the workspace nosuid: that is what denies it here (asserted from the
        sandbox's own mount table). The pod-mode test shows no_new_privs denying it alone."""
        rc, res, err = D.exec_json("--shell", "grep ' /workspace ' /proc/self/mountinfo")
        self.assertEqual(rc, 0, f"{res} {err}")
        options = res["stdout"].split()[5].split(",")
        self.assertIn("nosuid", options, res["stdout"])
        r = self.assertDenied(D, "setuid-exec", SUID_PROBE, reason="euid=1001")
        self.assertIn("setuid bit ignored", r.detail)


class ResourceBombs(bkit.ProbeAssertions, unittest.TestCase):
    def cgroup_mode(self):
        rc, res, _ = D.exec_json("--", "true")
        m = re.search(r"cgroup-(\w+)", res["isolation_profile"])
        return m.group(1) if m else "none"

    def test_fork_bomb_capped_at_exec_pids(self):
        r = self.assertDenied(D, "fork-bomb", reason=r"capped-at-\d+")
        n = int(r.reason.split("-")[-1])
        if self.cgroup_mode() == "none":
            self.skipTest(f"no per-exec pids cgroup on this machine (capped at {n} by RLIMIT_NPROC only)")
        # The probe and its attacking child count too: N sleepers + 2 <= pids.max.
        self.assertLessEqual(n, EXEC_PIDS - 2, r.describe())
        self.assertGreaterEqual(n, EXEC_PIDS - 16, r.describe())

    def test_memory_bomb_oom_killed(self):
        r = D.probe("memory-bomb", timeout=60)
        self.assertNotEqual(r.verdict, "ALLOWED", r.describe())
        if self.cgroup_mode() == "none":
            # RLIMIT_DATA is the cap: the mapping fails cleanly.
            self.assertEqual(r.verdict, "DENIED", r.describe())
            self.assertRegex(r.reason, r"^ENOMEM-at-\d+-MiB$", r.describe())
            self.assertFalse(r.result["oom_killed"], r.describe())
        else:
            self.assertIs(r.result.get("oom_killed"), True, r.describe())
            self.assertFalse(r.result.get("timed_out"), r.describe())
            touched = [int(x) for x in re.findall(r"memory-bomb: (\d+) MiB touched", r.result.get("stderr", ""))]
            self.assertTrue(touched, "no progress line: " + r.describe())
            self.assertLess(max(touched), EXEC_MEMORY_MIB, r.describe())

    def test_fsize_bomb_stopped(self):
        self.assertDenied(D, "fsize-bomb", reason=f"EFBIG-at-{EXEC_FSIZE}-bytes")


class OtherExecs(bkit.ProbeAssertions, unittest.TestCase):
    """Another exec's processes, running at the same time as the same uid: not visible, not
    signalable."""

    def test_other_exec_not_visible_or_signalable(self):
        token = f"30.{secrets.randbelow(10**6):06d}"
        bg = bkit.popen([bkit.BKCTL, "--url", D.url, "--key-file", D.key, "-o", "json", "exec", "--timeout", "20",
                         "--", "sleep", token], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pid = bkit.wait_for(lambda: next(iter(bkit.find_processes(bkit.SANDBOX_UID, ["sleep", token])), None), 10,
                            what="the background exec's sleep")
        try:
            nspids = bkit.proc_nspids(pid)  # host, sandbox, its own exec namespace
            self.assertEqual(nspids[-1], 2, f"the other exec's command is its init's child: {nspids}")
            self.assertDenied(D, "pids", reason="own-tree-only")
            targets = {"host pid": pid}
            if len(nspids) >= 3 and nspids[1] > 2:
                targets["sandbox pid"] = nspids[1]
            for what, p in targets.items():
                with self.subTest(what):
                    self.assertDenied(D, "pid-visible", p, reason="not-visible")
                    self.assertDenied(D, "kill", p, "KILL", reason="ESRCH")
                    self.assertDenied(D, "ptrace", p, reason="EPERM")
                    self.assertDenied(D, "cmdline-secret", p, token, reason="ENOENT")
            self.assertTrue(bkit.proc_alive(pid), "the other exec's sleep died")
        finally:
            if bkit.proc_alive(pid):
                os.kill(pid, signal.SIGKILL)
            bg.wait(timeout=10)
        out = bg.stdout.read().decode()
        self.assertIn('"signal":9', out, "the background exec ends by our SIGKILL, reported as such")
