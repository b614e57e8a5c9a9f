"""The privilege split, read from /proc while boxkited serves.

The front (server/: parses network input) must hold no capability at all and have
no_new_privs; the executor (sidecar/executor.c, the front's child) exactly the set its
drop_capabilities() keeps -- written out here on purpose, so that widening that set makes this
test fail until someone decides, in this file too, that the new capability is needed.
"""
import os
import re
import signal
import subprocess
import unittest

import bkit

CAP = {  # <linux/capability.h>
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_FSETID": 4,
    "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_LINUX_IMMUTABLE": 9,
    "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
    "CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17,
    "CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19, "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21,
    "CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23, "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25,
    "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27, "CAP_LEASE": 28, "CAP_AUDIT_WRITE": 29,
    "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31, "CAP_MAC_OVERRIDE": 32, "CAP_MAC_ADMIN": 33,
    "CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35, "CAP_BLOCK_SUSPEND": 36, "CAP_AUDIT_READ": 37,
    "CAP_PERFMON": 38, "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40,
}

# sidecar/executor.c drop_capabilities(), keep[]: the executor's whole privilege.
EXECUTOR_CAPS = {
    "CAP_SYS_ADMIN", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
    "CAP_NET_ADMIN", "CAP_KILL", "CAP_CHOWN",
}


def mask(names):
    return sum(1 << CAP[n] for n in names)


def names(m):
    return sorted(n for n, bit in CAP.items() if m & (1 << bit)) + \
        [f"cap{b}" for b in range(41, 64) if m & (1 << b)]


def setUpModule():
    bkit.require_root()
    bkit.require_build()


FRONT_UID = 65532  # boxkited's default --front-uid


def check_front(test, daemon):
    """The front, every one of its threads (capabilities are per thread, and nng's threads may
    have been started before the drop): every capability set empty, no_new_privs, and the
    front's own uid and gid with no supplementary group, so that it owns no root-owned file
    (uid 0 without capabilities may still write /etc/passwd or /proc/sys as the owner)."""
    front = daemon.front_pid()
    tids = sorted(int(t) for t in os.listdir(f"/proc/{front}/task"))
    test.assertGreater(len(tids), 1, "the front is multi-threaded (nng): its threads are checked too")
    for tid in tids:
        st = bkit.proc_status(f"{front}/task/{tid}")
        if st is None:
            continue  # the thread ended meanwhile
        for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            test.assertEqual(bkit.cap_mask(st, field), 0,
                             f"front thread {tid} ({st['Name']}) {field} holds {names(bkit.cap_mask(st, field))}")
        test.assertEqual(st["NoNewPrivs"], "1", f"front thread {tid} ({st['Name']}) has no no_new_privs")
        for field in ("Uid", "Gid"):
            test.assertEqual(st[field].split(), [str(FRONT_UID)] * 4, f"front thread {tid} ({st['Name']}) {field}")
        test.assertEqual(st["Groups"].split(), [], f"front thread {tid} ({st['Name']}) supplementary groups")


def check_executor(test, daemon):
    """The executor: exactly EXECUTOR_CAPS in effective, permitted and bounding; nothing to pass on."""
    st = bkit.proc_status(daemon.executor_pid())
    test.assertEqual(st["Threads"], "1", "the executor must be single-threaded (it clones with CLONE_VM)")
    want = mask(EXECUTOR_CAPS)
    for field in ("CapEff", "CapPrm", "CapBnd"):
        got = bkit.cap_mask(st, field)
        test.assertEqual(got, want, f"executor {field}: has {names(got)}, expected {sorted(EXECUTOR_CAPS)}; "
                                    f"extra {names(got & ~want)}, missing {names(want & ~got)}")
    for field in ("CapInh", "CapAmb"):
        test.assertEqual(bkit.cap_mask(st, field), 0, f"executor {field} holds {names(bkit.cap_mask(st, field))}")


class FrontAndExecutorPrivileges(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("privileges").start()

    def setUp(self):
        # "while boxkited serves": an exec has gone through both processes just before.
        rc, res, err = self.d.exec_json("--", "true")
        self.assertEqual(rc, 0, f"exec true: {rc} {res} {err}")

    def test_front_holds_no_capabilities_and_has_no_new_privs(self):
        check_front(self, self.d)

    def test_executor_holds_exactly_the_documented_set(self):
        check_executor(self, self.d)

    def test_documented_set_is_the_one_in_executor_c(self):
        """The set above is the one sidecar/executor.c keeps: a change there must be mirrored here
        (deliberately), or this fails."""
        src = (bkit.REPO / "sidecar" / "executor.c").read_text()
        m = re.search(r"drop_capabilities\(void\)\s*\{.*?keep\[\]\s*=\s*\{(.*?)\};", src, re.S)
        self.assertIsNotNone(m, "cannot find keep[] in drop_capabilities() of sidecar/executor.c")
        body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
        self.assertEqual(set(re.findall(r"CAP_[A-Z_]+", body)), EXECUTOR_CAPS)


def mappings(pid, path_part):
    """(start, end) of pid's mappings whose path contains path_part."""
    out = []
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        if len(fields) >= 6 and path_part in fields[5]:
            a, b = fields[0].split("-")
            out.append((int(a, 16), int(b, 16)))
    return out


# A readable mapping larger than this is a sanitizer's shadow (terabytes, nearly all unmapped
# zero pages), never a heap or a stack of these processes.
SCAN_MAPPING_MAX = 1 << 30


def memory_holds(pid, needle):
    """Whether any readable mapping of pid holds the bytes needle (read as root, 16 MiB at a
    time, overlapping by the needle's length)."""
    chunk = 16 << 20
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) >= 6 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            a, b = (int(x, 16) for x in fields[0].split("-"))
            if b - a > SCAN_MAPPING_MAX:
                continue
            for at in range(a, b, chunk):
                try:
                    mem.seek(at)
                    if needle in mem.read(min(chunk + len(needle), b - at)):
                        return True
                except OSError:
                    continue
    return False


class ExecutorImage(unittest.TestCase):
    """The executor is not a fork of the front but boxkite-executor executed afresh: another
    program, its own address layout (a fork would share the front's libc base to the byte), an
    empty environment, and none of the front's keys in its memory."""

    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("image").start()
        rc, res, err = cls.d.exec_json("--", "true")
        if rc != 0:
            raise AssertionError(f"exec true: {rc} {res} {err}")

    def test_it_runs_its_own_program(self):
        self.assertEqual(os.readlink(f"/proc/{self.d.executor_pid()}/exe"), str(bkit.EXECUTOR))
        self.assertEqual(os.readlink(f"/proc/{self.d.front_pid()}/exe"), str(bkit.BOXKITED))
        self.assertEqual(open(f"/proc/{self.d.executor_pid()}/environ", "rb").read(), b"")

    def test_its_address_layout_is_its_own(self):
        front, executor = mappings(self.d.front_pid(), "libc.so"), mappings(self.d.executor_pid(), "libc.so")
        self.assertTrue(front and executor, "libc is mapped in both")
        self.assertNotEqual(front[0][0], executor[0][0], "the executor shares the front's libc base: a fork")
        self.assertNotEqual(mappings(self.d.front_pid(), "[stack]"), mappings(self.d.executor_pid(), "[stack]"))

    def test_no_key_in_its_memory(self):
        secret = bytes.fromhex(self.d.key_secret)
        # The scan can find a key: the front, which verifies MACs with it, holds it.
        self.assertTrue(memory_holds(self.d.front_pid(), secret), "the scan does not find the key in the front")
        self.assertFalse(memory_holds(self.d.executor_pid(), secret), "the executor's memory holds the HMAC key")
        self.assertFalse(memory_holds(self.d.executor_pid(), self.d.key_secret.encode()),
                         "the executor's memory holds the key file's text")

    def test_a_key_reload_passes_a_descriptor_and_no_key(self):
        # SIGHUP: the front has the executor open the key file and reads it itself.
        os.kill(self.d.front_pid(), signal.SIGHUP)
        bkit.wait_for(lambda: "key file reloaded" in self.d.log_text(), 10, what="the key reload")
        self.assertFalse(memory_holds(self.d.executor_pid(), bytes.fromhex(self.d.key_secret)))


class FrontWithoutExecutor(unittest.TestCase):
    def test_front_stops_failing_when_its_executor_dies(self):
        # Without its executor the front can only answer UNAVAILABLE while Health would still say
        # ready: it must stop, with a failure status a supervisor restarts on, and leave nothing.
        d = bkit.Daemon("executor-dies").start()
        try:
            front, executor = d.front_pid(), d.executor_pid()
            family = [front] + bkit.proc_descendants(front)
            os.kill(executor, signal.SIGKILL)
            try:
                status = d.proc.wait(timeout=15)  # a hang guard
            except subprocess.TimeoutExpired:
                self.fail("the front still serves 15 s after its executor was killed")
        finally:
            d.stop()
        self.assertNotEqual(status, 0, "a front that lost its executor exited 0")
        self.assertIn("the executor is gone", d.log_text())
        bkit.wait_for(lambda: not any(bkit.proc_alive(p) for p in family), 5, what="boxkited's processes to be gone")


class FileWorkerSeenFromTheSandbox(unittest.TestCase):
    """The file worker shares the sandbox user's uid with sandboxed code: that code must not be
    able to reach it — see it, signal it, trace it."""

    @classmethod
    def setUpClass(cls):
        cls.d = bkit.Daemon("worker-sight").start()

    def worker(self):
        kids = [p for p in bkit.proc_children(self.d.executor_pid()) if bkit.proc_comm(p) == "bk-files"]
        self.assertEqual(len(kids), 1, "one file worker, the executor's child")
        return kids[0]

    def test_a_command_cannot_see_or_signal_it(self):
        pid = self.worker()
        rc, res, err = self.d.exec_json("--", "sh", "-c", "cat /proc/[0-9]*/comm; kill -0 %d; echo kill=$?" % pid)
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertNotIn("bk-files", res["stdout"])
        self.assertIn("kill=1", res["stdout"], "the file worker's host pid names a process a command can signal")
        self.assertTrue(bkit.proc_alive(pid))

    def test_it_holds_nothing(self):
        st = bkit.proc_status(self.worker())
        self.assertEqual(st["Uid"].split(), [str(bkit.SANDBOX_UID)] * 4)
        for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            self.assertEqual(bkit.cap_mask(st, field), 0, field)
        self.assertEqual((st["NoNewPrivs"], st["Seccomp"]), ("1", "2"))

    def test_it_runs_below_the_front(self):
        # /proc/PID/stat field 19 is the nice value: a command's (sidecar/exec/child.h), not boxkited's.
        nice = lambda pid: int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[16])
        self.assertEqual(nice(self.worker()), 10)
        self.assertEqual(nice(self.d.proc.pid), 0)


class ExecutorPath(unittest.TestCase):
    def test_a_missing_executor_stops_boxkited_with_the_reason(self):
        # Its state and socket directories are made before the executor is started: in a
        # scratch directory, not on the machine.
        d = bkit.temp_dir("executor-path")
        r = subprocess.run([str(bkit.BOXKITED), "--listen", f"ipc://{d}/run/s", "--state-dir", str(d / "state"),
                            "--executor", str(d / "absent")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--executor", r.stderr)
        self.assertIn(str(d / "absent"), r.stderr)


class FrontUid(unittest.TestCase):
    def test_root_and_the_sandbox_uid_are_refused_for_the_front(self):
        for uid in ("0", "1001"):
            with self.subTest(uid):
                sock = bkit.temp_dir("front-uid") / "s"
                r = subprocess.run([str(bkit.BOXKITED), "--listen", f"ipc://{sock}", "--front-uid", uid],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--front-uid", r.stderr)
