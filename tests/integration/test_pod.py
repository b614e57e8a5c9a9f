"""Pod mode, on an emulated Kubernetes pod with shareProcessNamespace (bkit.Pod): a pause
process as PID 1 of the pod's PID namespace, the sandbox container (pod_container.sh: its own
mount namespace and read-only root, boxkite-init as uid 1001 without capabilities and with
no_new_privs, started into the PID namespace from outside it) and `boxkited --pod` started into
the same PID namespace. boxkited starts first, as a sidecar may, and must find the sandbox when
it comes; then it must follow it through a restart.
"""
import json
import os
import secrets
import signal
import subprocess
import time
import unittest

import bkit
from test_privileges import check_executor, check_front

P = None  # the Pod
D = None  # its boxkited --pod
HEALTH_BEFORE_CONTAINER = None
EXEC_PIDS = 64
SUID_PROBE = "/workspace/bk-probe-suid"


def setUpModule():
    global P, D, HEALTH_BEFORE_CONTAINER
    bkit.require_root()
    bkit.require_build()
    bkit.require_tools("unshare", "nsenter", "setpriv")
    P = bkit.Pod(daemon_args=["--exec-pids", EXEC_PIDS])
    D = P.daemon
    D.start()
    HEALTH_BEFORE_CONTAINER = D.health()
    D.workspace = P.workspace  # what the sandbox shows as /workspace (for install_probe)
    D.install_probe()
    suid = P.workspace / "bk-probe-suid"
    suid.write_bytes(bkit.PROBE.read_bytes())
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    P.start_container()
    wait_ready()


def wait_ready(timeout=5.0):
    return bkit.wait_for(lambda: D.health().get("sandbox_ready") is True, timeout, interval=0.05,
                         what="boxkited --pod to find the sandbox container")


def pod_pid(host_pid):
    """The pid as the pod's PID namespace numbers it."""
    return bkit.proc_nspids(host_pid)[1]


class PodMode(bkit.ProbeAssertions, unittest.TestCase):
    def setUp(self):
        wait_ready()

    def test_health_reports_pod_and_sandbox_ready(self):
        h = D.health()
        self.assertEqual((h.get("status"), h.get("mode"), h.get("sandbox_ready")), ("OK", "pod", True), h)

    def test_sidecar_started_first_waits_for_the_sandbox(self):
        """boxkited --pod came up before the sandbox container: it served, said not ready, and
        found the container when it started (setUpModule waited for that)."""
        h = HEALTH_BEFORE_CONTAINER
        self.assertEqual((h.get("status"), h.get("mode"), h.get("sandbox_ready")), ("OK", "pod", False), h)

    def test_timeout_kills_the_tree(self):
        secs = f"100.{secrets.randbelow(10**6):06d}"
        rc, res, err = D.exec_json("--timeout", "1", "--shell", f"(setsid sleep {secs} &); sleep {secs}")
        self.assertEqual((rc, res["timed_out"]), (bkit.EXIT_TIMEOUT, True), f"{res} {err}")
        time.sleep(0.2)
        self.assertEqual(bkit.find_processes(bkit.SANDBOX_UID, ["sleep", secs]), [])

    def test_pod_emulation_is_what_it_claims(self):
        """Controls: the init really has ppid 0 inside the pod, uid 1001, no caps, no_new_privs;
        the front and executor are in the same PID namespace."""
        st = bkit.proc_status(P.init_pid)
        self.assertEqual(st["PPid"], str(P.containers[-1].pid))
        ns = lambda pid: os.readlink(f"/proc/{pid}/ns/pid")
        self.assertEqual(ns(P.init_pid), ns(P.pause))
        self.assertEqual(ns(D.front_pid()), ns(P.pause))
        self.assertEqual(bkit.proc_nspids(P.pause)[1], 1)
        self.assertEqual(st["Uid"].split()[0], "1001")
        self.assertEqual(int(st["CapEff"], 16) | int(st["CapBnd"], 16), 0)
        self.assertEqual(st["NoNewPrivs"], "1")
        r = bkit.run(["nsenter", "-t", P.pause, "-p", "-m", "--", "cat", f"/proc/{pod_pid(P.init_pid)}/stat"])
        self.assertEqual(r.stdout.rsplit(")", 1)[1].split()[1], "0", "ppid as the pod sees it: " + r.stdout)

    def test_exec_runs_in_the_sandbox_container(self):
        rc, res, err = D.exec_json("--shell", "cat /container-marker; id -u; hostname; "
                                   f"test -e {P.sidecar_marker} && echo sidecar-visible; "
                                   "test -e /bk/boxkite-init && echo init-binary")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split("\n"),
                         [P.marker, "1001", "bk-container", "init-binary", ""], res)
        self.assertTrue(P.sidecar_marker.exists(), "control: the sidecar sees its marker")

    def test_front_and_executor_privileges(self):
        check_front(self, D)
        check_executor(self, D)

    def test_isolation(self):
        for args, reason in ((("caps",), "caps-0-nnp-seccomp2"), (("ids",), "uid=1001"), (("fds",), "only-0-1-2"),
                             (("interfaces",), "only-lo"), (("pids",), "own-tree-only"), (("mount",), "EPERM"),
                             (("write", "/x"), "EROFS"), (("write", "/etc/x"), "EROFS"),
                             (("write", "/bk/boxkite-init"), "EROFS"), (("unshare", "user"), "EPERM"),
                             (("setns", "/proc/self/ns/mnt"), "EPERM"), (("mknod", "/tmp/n"), "EPERM")):
            with self.subTest(" ".join(args)):
                self.assertDenied(D, *args, reason=reason)

    def test_fork_bomb_capped(self):
        r = self.assertDenied(D, "fork-bomb", reason=r"capped-at-\d+")
        n = int(r.reason.split("-")[-1])
        self.assertLessEqual(n, EXEC_PIDS - 2, r.describe())
        self.assertGreaterEqual(n, EXEC_PIDS - 16, r.describe())

    def test_sidecar_and_init_unreachable(self):
        """The sidecar's processes and the sandbox init share the pod's PID namespace, but an
        exec lives in a namespace of its own below it: by pod pid or host pid, nothing."""
        targets = {"front": D.front_pid(), "executor": D.executor_pid(), "sandbox-init": P.init_pid}
        for what, host in targets.items():
            for label, pid in (("host", host), ("pod", pod_pid(host))):
                with self.subTest(f"{what} {label} pid {pid}"):
                    self.assertGreater(pid, 2)
                    self.assertDenied(D, "pid-visible", pid, reason="not-visible")
                    self.assertDenied(D, "kill", pid, "KILL", reason="ESRCH")
                    self.assertDenied(D, "ptrace", pid, reason="EPERM")
                    self.assertDenied(D, "cmdline-secret", pid, "boxkite", reason="ENOENT")
            self.assertTrue(bkit.proc_alive(host), f"{what} died")
        self.assertDenied(D, "read", D.key, reason="ENOENT")

    def test_setuid_binary_denied_by_no_new_privs(self):
        """The container root and its /workspace are not nosuid, so the kernel honours the setuid
        bit -- shown by running the binary in the container without no_new_privs (euid 0) -- and
        only no_new_privs, which every exec has, denies it."""
        rc, res, err = D.exec_json("--", "cat", "/proc/self/mountinfo")
        self.assertEqual(rc, 0, f"{res} {err}")
        mounts = {f[4]: f[5].split(",") for f in (line.split() for line in res["stdout"].splitlines())}
        for point in ("/", "/workspace"):
            self.assertIn(point, mounts, res["stdout"])
            self.assertNotIn("nosuid", mounts[point], f"{point}: {mounts[point]}")
        control = P.nsenter_container(SUID_PROBE, "whoami", nnp=False)
        self.assertRegex(control.stdout, r"^PROBE whoami INFO uid=1001 euid=0 ",
                         f"control: without no_new_privs the setuid bit takes effect: {control}")
        r = self.assertDenied(D, "setuid-exec", SUID_PROBE, reason="euid=1001")
        self.assertIn("setuid bit ignored", r.detail)
        self.assertDenied(D, "caps", reason="caps-0-nnp-seccomp2")

    def test_an_exposed_port_process_reaches_nothing_of_the_pods_network(self):
        """The pod's network namespace (here the emulation's: the machine's own) holds the
        sidecar's listeners and their clients' connections; a process that exposes a port runs in
        a namespace of the executor's with only lo, and reaches none of it (nor its sockets'
        table)."""
        port = bkit.free_tcp_port()
        bkit.tcp_listener("127.0.0.1", str(port))
        self.assertEqual(bkit.run([bkit.PYTHON, "-c", bkit.TCP_CONNECT, "127.0.0.1", str(port)]).returncode, 0,
                         "control: the listener answers in the pod's namespace")
        r = D.bkctl("-o", "json", "start", "--expose", str(bkit.free_tcp_port()), "--", "python3", "-c",
                    bkit.TCP_CONNECT, "127.0.0.1", str(port))
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = json.loads(r.stdout)["process_id"]
        r = D.bkctl("-o", "json", "wait", pid, timeout=60)
        self.assertEqual(json.loads(r.stdout)["status"]["exit_code"], 1, r.stdout)
        out = D.bkctl("logs", pid).stdout
        self.assertTrue(out.startswith("refused"), out)


class PodRestart(unittest.TestCase):
    """"The sandbox init restarting mid-run is re-found in pod mode." Each test leaves a running
    sandbox behind (or one that comes back once it stops sending requests)."""

    def kill_with_exec_running(self):
        """Kill the sandbox init while an exec runs: that exec is killed and answered promptly;
        afterwards execs fail cleanly (UNAVAILABLE, bkctl exit 125) and Health says not ready."""
        wait_ready()
        self.assertEqual(P.tracked_init(), P.init_pid, "the executor follows another init than the test's")
        token = f"60.{secrets.randbelow(10**6):06d}"
        bg = bkit.popen([bkit.BKCTL, "--url", D.url, "--key-file", D.key, "-o", "json", "exec", "--timeout", "60",
                         "--", "sleep", token], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sleeper = bkit.wait_for(lambda: next(iter(bkit.find_processes(bkit.SANDBOX_UID, ["sleep", token])), None),
                                10, what="the running exec's sleep")
        P.kill_container()
        try:
            bg.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail("the exec running when the sandbox init died was not answered (hang guard: 10 s)")
        out, err = bg.stdout.read().decode(), bg.stderr.read().decode()
        res = json.loads(out) if out.strip() else {}
        if bg.returncode == bkit.EXIT_FAILED:
            self.assertEqual(res.get("error", {}).get("status"), "UNAVAILABLE", f"{out} {err}")
        else:
            self.assertEqual((bg.returncode, res.get("signal")), (128 + 9, 9),
                             f"killed with its sandbox: {bg.returncode} {out} {err}")
        bkit.wait_for(lambda: not bkit.proc_alive(sleeper), 2, what="the exec's process to be gone")

        rc, res, err = D.exec_json("--", "true")
        self.assertEqual(rc, bkit.EXIT_FAILED, f"{res} {err}")
        self.assertEqual(res["error"]["status"], "UNAVAILABLE", res)
        h = D.health()
        self.assertEqual((h.get("mode"), h.get("sandbox_ready")), ("pod", False), h)

    def assertExecWorks(self):
        rc, res, err = D.exec_json("--shell", "cat /container-marker; id -u")
        self.assertEqual((rc, res and res.get("stdout")), (0, f"{P.marker}\n1001\n"), f"{res} {err}")

    def test_init_dies_and_restarts(self):
        """The client waits on Health (which never reaches the executor) for the sandbox."""
        old_init = P.init_pid
        self.kill_with_exec_running()
        new_init = P.start_container()
        self.assertNotEqual(new_init, old_init)
        wait_ready(5.0)  # a hang guard; rescans come every 200 ms
        self.assertEqual(P.tracked_init(), new_init)
        self.assertExecWorks()

    def test_init_restart_refound_while_a_client_retries_exec(self):
        """The client retries its exec every 50 ms until it works, as a client told UNAVAILABLE
        would: the restarted sandbox must still be found (rescans are on a deadline, not on
        idleness, so the retries cannot hold them off)."""
        self.kill_with_exec_running()
        P.start_container()
        last = []

        def exec_works():
            last[:] = D.exec_json("--", "cat", "/container-marker")
            return last[0] == 0 and last[1]["stdout"] == P.marker + "\n"
        try:
            bkit.wait_for(exec_works, 5, interval=0.05, what="an exec to work again after the restart")
        except AssertionError as e:
            self.fail(f"{e}: the last exec got {last[:2]}; Health: {D.health()}")
        self.assertExecWorks()


class PodDiscovery(unittest.TestCase):
    """What pod discovery must not take for the sandbox init while it looks for one."""

    def test_decoys_and_two_candidates(self):
        wait_ready()
        P.kill_container()
        bkit.wait_for(lambda: D.health().get("sandbox_ready") is False, 2, what="the sandbox to be lost")
        # Decoys in the pod's PID namespace, named boxkite-init: one as uid 1001 but started by
        # a process inside the namespace (ppid != 0, as anything the sandbox starts), one
        # started from outside but as root.
        child = bkit.popen(["nsenter", "-t", P.pause, "-p", "--", "setpriv", "--reuid", "1001", "--regid", "1001",
                            "--clear-groups", "--", "/bin/sh", "-c", f"{bkit.INIT} & wait"])
        rooted = bkit.popen(["nsenter", "-t", P.pause, "-p", "--", bkit.INIT])
        decoys = bkit.wait_for(lambda: [p for p in bkit.proc_descendants(child.pid) + bkit.proc_children(rooted.pid)
                                        if bkit.proc_comm(p) == "boxkite-init"] or None, 5, what="the decoys")
        time.sleep(0.8)  # four rescans
        h = D.health()
        self.assertIs(h.get("sandbox_ready"), False, f"a decoy was taken for the sandbox init: {h}")
        rc, res, err = D.exec_json("--", "true")
        self.assertEqual((rc, (res or {}).get("error", {}).get("status")), (bkit.EXIT_FAILED, "UNAVAILABLE"), err)

        # Two real candidates: refuse to guess; one left: take it. (Both start while the
        # executor is held stopped, so that its next scan meets both, not the first alone.)
        with P.executor_stopped():
            first = P.start_container()
            second = P.start_container()
        time.sleep(0.8)
        h = D.health()
        self.assertIs(h.get("sandbox_ready"), False, f"one of two candidate inits was picked: {h}")
        self.assertIsNone(P.tracked_init())
        P.kill_container(first)
        wait_ready(2.0)
        self.assertEqual(P.tracked_init(), second)
        rc, res, err = D.exec_json("--", "cat", "/container-marker")
        self.assertEqual((rc, res["stdout"]), (0, P.marker + "\n"), err)
        for d in decoys:
            os.kill(d, signal.SIGKILL)
        for p in (child, rooted):
            bkit.stop_process(p, signal.SIGKILL)


class PodShutdown(unittest.TestCase):
    """Last (classes run in name order): SIGTERM to the sidecar stops it and its execs, and
    leaves the sandbox container alone -- its init is not the sidecar's to kill."""

    def test_sidecar_shutdown_leaves_the_sandbox_running(self):
        wait_ready()
        pids = [D.front_pid(), D.executor_pid()]
        init = P.tracked_init()
        self.assertEqual(init, P.init_pid)
        D.stop()
        problems = []
        if not bkit.proc_alive(init):
            problems.append("the sidecar's shutdown killed the sandbox container's init")
        if D.proc.returncode != 0 or D.stop_escalated:
            problems.append(f"boxkited --pod did not exit by itself within {bkit.STOP_WAIT} s of SIGTERM "
                            f"(status {D.proc.returncode})")
        problems += [f"pid {pid} survived the shutdown" for pid in pids if bkit.proc_alive(pid)]
        if D.leaked_cgroups:
            problems.append(f"cgroup directories left behind (the test removed them): {D.leaked_cgroups}")
        if problems:
            self.fail("\n".join(problems) + "\nlog:\n" + D.log_text()[-1500:])
