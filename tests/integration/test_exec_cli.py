"""Exec behaviour, through bkctl against a local-mode boxkited with default limits: timeouts
that kill a whole tree, huge output, concurrency, stdin, and the refusals a client sees.
"""
import concurrent.futures
import json
import os
import secrets
import subprocess
import time
import unittest

import bkit

D = None


def setUpModule():
    global D
    bkit.require_root()
    bkit.require_build()
    D = bkit.Daemon("exec").start()


class Timeout(unittest.TestCase):
    def test_timeout_kills_a_tree_that_ignores_sigterm_and_double_forks(self):
        secs = f"1000.{secrets.randbelow(10**6):06d}"  # so only our own sleeps are looked for
        script = (f'(trap "" TERM; sleep {secs}) & '
                  f'(setsid sh -c "trap \\"\\" TERM; sleep {secs}" &) ; '
                  f'echo partial; sleep {secs}')
        # bkctl's own 30 s limit guards against a hang; answered at all means the SIGTERM-ignoring
        # sleeps of 1000 s did not keep the call open.
        rc, res, err = D.exec_json("--timeout", "2", "--shell", script, timeout=30)
        self.assertEqual(rc, bkit.EXIT_TIMEOUT, f"{res} {err}")
        self.assertIs(res["timed_out"], True, res)
        self.assertEqual(res["stdout"], "partial\n", res)
        self.assertGreaterEqual(res["duration_us"], 2_000_000, "killed before its timeout: %s" % res)
        # No sleep of that tree survives: each was in the exec's PID namespace, which died.
        time.sleep(0.2)
        survivors = bkit.find_processes(bkit.SANDBOX_UID, ["sleep", secs])
        self.assertEqual(survivors, [], f"uid-1001 `sleep {secs}` processes survived the timeout")


class Output(unittest.TestCase):
    def test_huge_output_is_truncated_and_counted(self):
        total = 100 << 20
        rc, res, err = D.exec_json("--", "head", "-c", "100M", "/dev/zero", timeout=60)
        self.assertEqual(rc, 0, f"{err}")
        kept = len(res["stdout"])
        self.assertEqual(kept, 1 << 20, "the kept bytes are the server's default limit (--exec-output 1M)")
        self.assertEqual(set(res["stdout"]), {"\0"})
        self.assertIs(res["stdout_truncated"], True)
        self.assertEqual(res["stdout_dropped"], total - kept)
        self.assertIs(res["stderr_truncated"], False)
        self.assertEqual(res["exit_code"], 0)

    def test_separate_streams(self):
        rc, res, err = D.exec_json("--shell", "echo out; echo err >&2; exit 7")
        self.assertEqual(rc, 7, err)
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"]), ("out\n", "err\n", 7))


class Concurrency(unittest.TestCase):
    def test_64_concurrent_execs_each_get_their_own_answer(self):
        n = 64
        tokens = [f"bk-token-{i}-{secrets.token_hex(4)}" for i in range(n)]

        def one(token):
            return D.exec_json("--", "echo", token, timeout=120)

        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(one, tokens))
        failures = []
        for token, (rc, res, err) in zip(tokens, results):
            if rc != 0 or not res or res.get("stdout") != token + "\n" or res.get("exit_code") != 0:
                failures.append(f"{token}: exit {rc}, {res}, {err.strip()}")
        self.assertEqual(failures, [], f"{len(failures)} of {n} concurrent execs went wrong")


class Stdin(unittest.TestCase):
    def test_stdin_from_a_file(self):
        # As docker exec -i: our standard input, here a file redirected onto it.
        data = "line one\nline two ünïcödé\n" + "x" * 200_000 + "\nend\n"
        f = bkit.temp_dir("stdin") / "in.txt"
        f.write_text(data)
        with open(f) as stdin:
            r = bkit.run([bkit.BKCTL, "--url", D.url, "--key-file", D.key, "-o", "json", "exec", "-i", "--", "cat"],
                         stdin=stdin, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["stdout"], data)

    def test_stdin_from_a_pipe_with_i_and_its_long_forms(self):
        for flag in ("-i", "--stdin", "--interactive"):
            with self.subTest(flag):
                r = D.bkctl("-o", "json", "exec", flag, "--", "wc", "-c", input="hello sandbox\n")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["stdout"].strip(), "14")

    def test_a_pipe_without_i_is_not_read_and_bkctl_says_so(self):
        r = D.bkctl("-o", "json", "exec", "--", "wc", "-c", input="hello sandbox\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["stdout"].strip(), "0")
        self.assertIn("without -i the command does not read it", r.stderr)

    def test_no_stdin_is_eof(self):
        rc, res, err = D.exec_json("--", "cat")
        self.assertEqual((rc, res["stdout"]), (0, ""), err)


class CgroupCleanup(unittest.TestCase):
    """An exec's cgroup is removed once it is over, or kept for a later exec (at most 8 of them,
    sidecar/exec/cgroup.h "Reuse") when it is empty, no process in it was OOM-killed and at most
    1 MiB is still charged to it."""

    SPARES = 8

    def setUp(self):
        if not D.cgroup_dirs:
            self.skipTest("no per-exec cgroups on this machine: nothing to check")

    @staticmethod
    def exec_cgroups():
        return [p for d in D.cgroup_dirs for p in d.glob("exec-*")]

    @staticmethod
    def count(path, name, key=None):
        text = (path / name).read_text()
        if key is None:
            return int(text.split()[0])
        return next(int(v) for k, v in (line.split() for line in text.splitlines()) if k == key)

    def memory_dirs(self):
        return [p for p in self.exec_cgroups()
                if (p / "memory.usage_in_bytes").exists() or (p / "memory.current").exists()]

    def usage(self, p):
        return self.count(p, "memory.current" if (p / "memory.current").exists() else "memory.usage_in_bytes")

    def oom_kills(self, p):
        return self.count(p, "memory.events" if (p / "memory.events").exists() else "memory.oom_control", "oom_kill")

    def test_finished_execs_leave_the_staged_cgroup_and_a_few_kept_ones(self):
        # Also when the command ends before the executor has left that cgroup for the next one
        # (then it is removed, the removal waiting for it).
        for _ in range(100):
            rc, res, err = D.exec_json("--", "true")
            self.assertEqual(rc, 0, f"{res} {err}")

        def left():
            return {str(d): sorted(p.name for p in d.glob("exec-*")) for d in D.cgroup_dirs}
        try:
            bkit.wait_for(lambda: all(1 <= len(v) <= 2 + self.SPARES for v in left().values()), 10,  # a hang guard
                          what=f"the staged exec cgroup, the prepared exec's and at most {self.SPARES} kept ones "
                               "per hierarchy")
        except AssertionError as e:
            self.fail(f"{e}: {left()}")
        # The kept ones are empty: only the staged one holds a process (the executor), and the
        # one of the exec prepared ahead (its init, waiting for a command).
        for d in D.cgroup_dirs:
            busy = [p.name for p in d.glob("exec-*") if (p / "cgroup.procs").read_text().split()]
            self.assertLessEqual(len(busy), 2, f"{d}: {busy}")

    def test_a_cgroup_still_charged_is_not_reused(self):
        # The file stays in /tmp (a tmpfs): its 8 MiB stay charged to the exec's memory cgroup,
        # which must not become the next exec's with 8 MiB of its limit already taken.
        try:
            rc, res, err = D.exec_json("--shell", "head -c 8M /dev/zero > /tmp/bk-charge && echo ok")
            self.assertEqual((rc, res.get("stdout")), (0, "ok\n"), f"{res} {err}")
            for _ in range(2 * self.SPARES):
                self.assertEqual(D.exec_json("--", "true")[0], 0)
            bkit.wait_for(lambda: all(self.usage(p) <= 1 << 20 for p in self.memory_dirs()), 10,
                          what="no exec cgroup holding more than 1 MiB")
        finally:
            D.exec_json("--", "rm", "-f", "/tmp/bk-charge")

    def test_an_oom_killed_execs_cgroup_is_not_reused(self):
        # Else the next exec given it would be told it was OOM-killed (the count is the cgroup's).
        rc, res, err = D.exec_json("--", "python3", "-c", "x = bytearray(b'1') * (4 << 30)", timeout=120)
        self.assertIs(res.get("oom_killed"), True, f"{rc} {res} {err}")
        for _ in range(2 * self.SPARES):
            rc, res, err = D.exec_json("--", "true")
            self.assertEqual(rc, 0, f"{res} {err}")
            self.assertIs(res["oom_killed"], False, res)
        bkit.wait_for(lambda: all(self.oom_kills(p) == 0 for p in self.memory_dirs()), 10,
                      what="no exec cgroup that saw an OOM kill")


class MemoryAsTheCommandSeesIt(unittest.TestCase):
    """free, top and psutil read /proc/meminfo: where a memory cgroup limits the exec, it says the
    exec's limit (sidecar/exec/meminfo.h), not the node's memory; read-only; /proc/sys, where its
    file was made, as it was."""

    def test_meminfo_is_the_execs_limit(self):
        node = open("/proc/meminfo").read().splitlines()[0]
        rc, res, err = D.exec_json("--shell", "cat /proc/meminfo; echo @free; free -b; echo @write; "
                                   "echo x 2>&1 > /proc/meminfo; echo @sys; cat /proc/sys/kernel/ostype")
        self.assertEqual(rc, 0, f"{res} {err}")
        out = res["stdout"]
        meminfo, rest = out.split("@free\n")
        free, rest = rest.split("@write\n")
        write, sys_ = rest.split("@sys\n")
        total = int(meminfo.splitlines()[0].split()[1])
        if not D.cgroup_dirs:
            # No memory cgroup: nothing to show but the node's (the rlimit is no memory size).
            self.assertEqual(meminfo.splitlines()[0], node)
            return
        # The default --exec-memory, 512 MiB (less than 4 x it, the sandbox's): its limit.
        self.assertEqual(total, 512 * 1024, meminfo)
        avail = int(meminfo.splitlines()[2].split()[1])
        self.assertEqual(meminfo.splitlines()[2].split()[0], "MemAvailable:")
        self.assertLessEqual(avail, total)
        self.assertGreater(avail, 0)
        self.assertRegex(free, r"Mem:\s+%d\s" % (total * 1024))
        self.assertIn("Read-only file system", res["stderr"] + write)
        self.assertEqual(sys_, "Linux\n")
        # Another exec gets a file of its own, not a share of this one's.
        rc, res, err = D.exec_json("--shell", "grep -c . /proc/meminfo; grep meminfo /proc/self/mountinfo")
        self.assertEqual(rc, 0, f"{res} {err}")
        lines = res["stdout"].splitlines()
        self.assertEqual(lines[0], "12")
        self.assertIn(" /proc/meminfo ro,nosuid,nodev,noexec", lines[1])


class LargeRequests(unittest.TestCase):
    def test_argv_at_its_limit_runs(self):
        # Two arguments of 125,000 bytes (the kernel takes 128 KiB per argument; boxkited 256 KiB
        # of argv in all): the Spawn order is ~250 KB, more than a SEQPACKET packet may hold on
        # the executor's channel unless its buffers are sized for it.
        args = [c * 125_000 for c in "ab"]
        rc, res, err = D.exec_json("--", "sh", "-c", 'for a; do printf "%s%s " "$(printf %.1s "$a")" ${#a}; done',
                                   "sh", *args)
        self.assertEqual((rc, res.get("stdout")), (0, "a125000 b125000 "), f"{res} {err}")


class Priority(unittest.TestCase):
    def test_commands_run_at_nice_10_and_cannot_raise_their_priority(self):
        # Sandboxed work yields the CPU to boxkited (Health probes, other requests) when both
        # want it; the command cannot take the priority back, nor schedule itself real-time.
        rc, res, err = D.exec_json("--shell", "nice; renice -n 0 -p $$ >/dev/null; echo renice=$?; "
                                   "nice -n -5 nice; chrt -f 1 true; echo chrt=$?")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split(), ["10", "renice=1", "10", "chrt=1"], res)
        self.assertEqual(res["stderr"].count("Permission denied") + res["stderr"].count("not permitted"), 3, res)

    def test_nice_and_realtime_limits_are_zero_whatever_boxkited_inherited(self):
        # A runtime may start boxkited with RLIMIT_NICE/RLIMIT_RTPRIO above 0, which would let a
        # command lower its nice value or go real-time: the exec sets both to 0.
        raise_limits = ["prlimit", "--nice=30", "--rtprio=50", "--"]
        if subprocess.run(raise_limits + ["true"], stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest("cannot raise RLIMIT_NICE here (no CAP_SYS_RESOURCE), so boxkited "
                          "cannot be started with limits to take away")
        d = bkit.Daemon("rlimits", prefix=raise_limits).start()
        try:
            rc, res, err = d.exec_json("--shell", "grep -E '^Max (nice|realtime) priority' /proc/self/limits; "
                                       "renice -n 0 -p $$ >/dev/null; echo renice=$?; chrt -f 1 true; echo chrt=$?")
        finally:
            d.stop()
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split(), ["Max", "nice", "priority", "0", "0",
                                                 "Max", "realtime", "priority", "0", "0", "renice=1", "chrt=1"], res)


class Refusals(unittest.TestCase):
    def assertRefused(self, status, *args, mention=None):
        rc, res, err = D.exec_json(*args)
        self.assertEqual(rc, bkit.EXIT_FAILED, f"{res} {err}")
        self.assertIn("error", res or {}, f"{res} {err}")
        self.assertEqual(res["error"]["status"], status, res)
        if mention:
            self.assertIn(mention, res["error"]["message"], res)
        return res

    def test_cwd_outside_workspace_and_tmp(self):
        for cwd in ("/etc", "/", "/proc", "/workspace/../etc", "../etc", "/tmp/../usr"):
            with self.subTest(cwd):
                self.assertRefused("INVALID_ARGUMENT", "--cwd", cwd, "--", "pwd")

    def test_cwd_inside_is_accepted(self):
        for cwd, want in (("/tmp", "/tmp"), ("/workspace", "/workspace"), (".", "/workspace")):
            with self.subTest(cwd):
                rc, res, err = D.exec_json("--cwd", cwd, "--", "pwd")
                self.assertEqual((rc, res["stdout"]), (0, want + "\n"), err)

    def test_cwd_the_command_cannot_enter_is_the_cwds_error(self):
        """The child's chdir fails (the front and executor check only that the path is inside a
        root): the executor's typed step makes it an error about the cwd, with chdir's errno as
        its status — not a failure of the sandbox."""
        (D.workspace / "a-file").write_text("")
        for cwd, status, reason in (("/workspace/bk-no-such-dir", "NOT_FOUND", "No such file or directory"),
                                    ("/workspace/a-file", "INVALID_ARGUMENT", "Not a directory")):
            with self.subTest(cwd):
                res = self.assertRefused(status, "--cwd", cwd, "--", "pwd")
                self.assertEqual(res["error"]["message"], f"cwd {cwd}: {reason}", res)

    def test_ill_formed_env_name_is_refused_by_name(self):
        for name in ("1ABC", "A-B", "A.B"):
            with self.subTest(name):
                self.assertRefused("INVALID_ARGUMENT", "-e", f"{name}=x", "--", "true", mention=name)

    def test_everyday_variables_reach_the_command(self):
        """The environment crosses no privilege boundary (SECURITY.md): what a shell line
        `X=y cmd` could set, a request may set too."""
        names = ["PYTHONPATH", "NODE_PATH", "LD_LIBRARY_PATH", "NODE_OPTIONS", "PERL5LIB", "GIT_CONFIG_COUNT",
                 "MAKEFLAGS", "LOCPATH"]
        args = [a for n in names for a in ("-e", f"{n}=/bk-{n}")]
        rc, res, err = D.exec_json(*args, "--", "/usr/bin/env")
        self.assertEqual(rc, 0, f"{res} {err}")
        for n in names:
            self.assertIn(f"{n}=/bk-{n}\n", res["stdout"])

    def test_path_from_the_request_is_searched(self):
        (D.workspace / "bk-bin").mkdir(exist_ok=True)
        tool = D.workspace / "bk-bin" / "bk-hello"
        tool.write_text("#!/bin/sh\necho hello from PATH\n")
        os.chmod(tool, 0o755)
        rc, res, err = D.exec_json("-e", "PATH=/workspace/bk-bin:/usr/bin:/bin", "--", "bk-hello")
        self.assertEqual((rc, res["stdout"]), (0, "hello from PATH\n"), f"{res} {err}")

    def test_boxkiteds_own_environment_is_not_the_base(self):
        rc, res, err = D.exec_json("--", "/usr/bin/env")
        self.assertEqual(rc, 0, err)
        names = sorted(line.split("=", 1)[0] for line in res["stdout"].splitlines())
        self.assertEqual(names, ["HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"], res)

    def test_allowed_env_is_delivered(self):
        rc, res, err = D.exec_json("-e", "BK_GREETING=hello", "--shell", 'printf %s "$BK_GREETING"')
        self.assertEqual((rc, res["stdout"]), (0, "hello"), err)

    def test_missing_command_is_127(self):
        for cmd in ("bk-no-such-command", "/workspace/bk-no-such-command"):
            with self.subTest(cmd):
                rc, res, err = D.exec_json("--", cmd)
                self.assertEqual(rc, 127, f"{res} {err}")
                self.assertEqual(res["exit_code"], 127)
                self.assertIn(cmd, res["stderr"])

    def test_not_executable_is_126(self):
        (D.workspace / "not-exec").write_text("#!/bin/sh\n")
        os.chmod(D.workspace / "not-exec", 0o644)
        rc, res, err = D.exec_json("--", "/workspace/not-exec")
        self.assertEqual(rc, 126, f"{res} {err}")


class Pid1(unittest.TestCase):
    """The command runs under a minimal init (PID 1 of the exec's namespace), as with
    `docker run --init`: its own signals and abort() behave as on any machine, its status and
    signal are reported as they are, and its end still ends everything it started."""

    def test_a_signal_the_command_sends_itself_kills_it(self):
        rc, res, err = D.exec_json("--shell", "kill -TERM $$; echo survived")
        self.assertEqual((rc, res["signal"], res["exit_code"], res["stdout"]), (128 + 15, 15, 0, ""), f"{res} {err}")

    def test_abort_is_sigabrt(self):
        rc, res, err = D.exec_json("--", "python3", "-c", "import os; os.abort()")
        self.assertEqual((rc, res["signal"]), (128 + 6, 6), f"{res} {err}")

    def test_a_handled_signal_is_handled(self):
        rc, res, err = D.exec_json("--shell", "trap 'echo caught; exit 3' TERM; kill -TERM $$; sleep 5")
        self.assertEqual((rc, res["exit_code"], res["signal"], res["stdout"]), (3, 3, 0, "caught\n"), f"{res} {err}")

    def test_exit_codes_pass_through(self):
        for code in (0, 1, 42, 255):
            with self.subTest(code):
                rc, res, err = D.exec_json("--shell", f"exit {code}")
                self.assertEqual((rc, res["exit_code"], res["signal"]), (code, code, 0), f"{res} {err}")

    def test_the_command_is_not_pid_1_and_orphans_are_reaped(self):
        script = "echo $$ $PPID; (sleep 0.1 &); sleep 0.5; ps -o stat= -e | grep -c Z; true"
        rc, res, err = D.exec_json("--shell", script)
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split(), ["2", "1", "0"], "pid, ppid, zombies: %s" % res)

    def test_daemonized_children_die_with_the_command(self):
        token = f"777.{secrets.randbelow(10**6):06d}"
        rc, res, err = D.exec_json("--shell", f"setsid sh -c 'sleep {token}' & sleep 0.2; exit 0")
        self.assertEqual(rc, 0, f"{res} {err}")
        bkit.wait_for(lambda: not bkit.find_processes(bkit.SANDBOX_UID, ["sleep", token]), 10,
                      what=f"the daemonized sleep {token} to be gone")


class PerExecNamespaces(unittest.TestCase):
    def test_sysv_ipc_objects_die_with_the_exec(self):
        """Three execs each leaving a 32 MiB segment held 96 MiB outside any exec's limit: each
        exec has an IPC namespace of its own now."""
        for _ in range(3):
            rc, res, err = D.exec_json("--", "ipcmk", "-M", "32M")
            self.assertEqual(rc, 0, f"{res} {err}")
        rc, res, err = D.exec_json("--shell", "ipcs -m | grep -c '^0x' || true")
        self.assertEqual(res["stdout"].strip(), "0", res)
        # And in the sandbox's own IPC namespace, seen from the host: nothing either.
        r = bkit.run(["nsenter", "-t", D.local_init_pid(), "--ipc", "ipcs", "-m"], check=True)
        self.assertNotRegex(r.stdout, r"(?m)^0x", r.stdout)

    def test_proc_self_cgroup_shows_no_host_path(self):
        rc, res, err = D.exec_json("--", "cat", "/proc/self/cgroup")
        self.assertEqual(rc, 0, err)
        lines = res["stdout"].splitlines()
        self.assertTrue(lines, res)
        for line in lines:
            self.assertTrue(line.endswith(":/"), f"a cgroup path shows: {line!r}")
        self.assertNotIn("boxkite", res["stdout"])

    def test_rlimit_nproc_only_without_a_pids_cgroup(self):
        """RLIMIT_NPROC counts every process of uid 1001 on the node (other pods' sandboxes too):
        with a pids cgroup it is not what limits an exec."""
        d = bkit.Daemon("nproc", args=["--exec-nproc", "77"]).start()
        try:
            rc, res, err = d.exec_json("--shell", "grep '^Max processes' /proc/self/limits | tr -s ' ' | cut -d' ' -f3")
            cgroups = "cgroup-none" not in res["isolation_profile"]
        finally:
            d.stop()
        self.assertEqual(rc, 0, err)
        if cgroups:
            self.assertNotEqual(res["stdout"].strip(), "77", res)
        else:
            self.assertEqual(res["stdout"].strip(), "77", res)


class PreparedAhead(unittest.TestCase):
    """A plain command runs on an exec prepared before it was asked for (docs/ARCHITECTURE.md,
    "Prepared ahead"): its init took the command as an order, and nothing of that shows."""

    @staticmethod
    def init_argv(*args):
        rc, res, err = D.exec_json(*args, "--", "sh", "-c", "tr '\\0' ' ' </proc/1/cmdline")
        assert rc == 0, f"{res} {err}"
        return res["stdout"].split()

    def test_a_plain_command_runs_on_an_exec_prepared_ahead(self):
        # Twice: the first may have come before the first one was ready.
        self.init_argv()
        argv = self.init_argv()
        self.assertEqual(argv[:2], ["boxkite-init", "--exec"], argv)
        self.assertTrue(argv[3].startswith("--order-fd="), argv)

    def test_the_command_holds_no_descriptor_of_the_init(self):
        self.init_argv()
        rc, res, err = D.exec_json("--", "python3", "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))")
        self.assertEqual((rc, res["stdout"]), (0, "['0', '1', '2', '3']\n"), f"{res} {err}")

    def test_a_mount_made_in_the_sandbox_is_seen_by_the_next_command(self):
        # The prepared exec's copy of the mount table predates the mount: it is dropped. (An
        # operator's doing: the sandbox user cannot mount.)
        self.init_argv()
        init = D.local_init_pid()
        (D.workspace / "bk-mark-dir").mkdir(exist_ok=True)
        bkit.run(["nsenter", "-t", str(init), "-m", "--", "mount", "-t", "tmpfs", "-o", "size=1m", "bk-mark",
                  "/workspace/bk-mark-dir"], check=True)
        try:
            rc, res, err = D.exec_json("--", "sh", "-c", "grep -c bk-mark /proc/self/mountinfo")
            self.assertEqual((rc, res["stdout"]), (0, "1\n"), f"{res} {err}")
        finally:
            bkit.run(["nsenter", "-t", str(init), "-m", "--", "umount", "/workspace/bk-mark-dir"], check=True)
            (D.workspace / "bk-mark-dir").rmdir()
        rc, res, err = D.exec_json("--", "sh", "-c", "grep -c bk-mark /proc/self/mountinfo || true")
        self.assertEqual((rc, res["stdout"]), (0, "0\n"), f"{res} {err}")


class WorkingDirectory(unittest.TestCase):
    """The cwd is resolved beneath its root as the sandbox user, after the privilege drop: not
    as text, not as root."""

    @classmethod
    def setUpClass(cls):
        ws = D.workspace
        for name, target in (("bk-link-etc", "/etc"), ("bk-link-private", "/etc/ssl/private"),
                             ("bk-link-up", "../../../../etc"), ("bk-link-in", "bk-real-dir")):
            if not (ws / name).is_symlink():
                os.symlink(target, ws / name)
        (ws / "bk-real-dir").mkdir(exist_ok=True)
        os.chown(ws / "bk-real-dir", bkit.SANDBOX_UID, bkit.SANDBOX_UID)
        (ws / "bk-root-only").mkdir(exist_ok=True)
        os.chmod(ws / "bk-root-only", 0o700)

    def cwd_of(self, cwd):
        return D.exec_json("--cwd", cwd, "--", "pwd")

    def test_symlinks_out_of_the_workspace_are_refused(self):
        for cwd in ("bk-link-etc", "bk-link-private", "bk-link-up", "/workspace/bk-link-etc/ssl"):
            with self.subTest(cwd):
                rc, res, err = self.cwd_of(cwd)
                self.assertEqual(rc, bkit.EXIT_FAILED, f"{res} {err}")
                self.assertIn("cwd", res["error"]["message"], res)

    def test_a_directory_the_sandbox_user_may_not_enter_is_refused(self):
        rc, res, err = self.cwd_of("bk-root-only")
        self.assertEqual(rc, bkit.EXIT_FAILED, f"{res} {err}")
        self.assertEqual(res["error"]["status"], "PERMISSION_DENIED", res)

    def test_a_symlink_inside_the_workspace_is_followed(self):
        rc, res, err = self.cwd_of("bk-link-in")
        self.assertEqual((rc, res["stdout"]), (0, "/workspace/bk-real-dir\n"), f"{res} {err}")


class WorkingDirectoryPrepared(unittest.TestCase):
    """An exec prepared ahead enters its working directory itself: its init, already the sandbox
    user under the exec's filter (which refuses openat2), walks it a component at a time with
    O_NOFOLLOW on its root's mount, and hands any symlink, '..' or other mount back to the whole
    path (openat2 with RESOLVE_BENEATH, RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS). Attacked from
    inside: the sandbox user builds each trap with one command, and the next command — which runs
    on the exec that command's end prepared (the executor prepares one as each exec ends) — asks
    for the trap as its working directory. Each refusal below is one the walk must not accept."""

    TRAPS = ("mkdir -p bk-w/real/ssl bk-w/locked/inner bk-w/noexec && : > bk-w/file && "
             "ln -sfn /etc bk-w/abs && ln -sfn ../../../../etc bk-w/up && ln -sfn /workspace/bk-w/real bk-w/absin && "
             "ln -sfn real bk-w/rel && ln -sfn /proc/self/cwd bk-w/magic && "
             "chmod 000 bk-w/locked && chmod 600 bk-w/noexec")

    @classmethod
    def setUpClass(cls):
        rc, res, err = D.exec_json("--shell", cls.TRAPS)
        assert rc == 0, f"{res} {err}"

    @classmethod
    def tearDownClass(cls):
        D.exec_json("--shell", "chmod 755 bk-w/locked bk-w/noexec; rm -rf bk-w")

    def after_an_exec(self, cwd, *argv):
        """The exec of argv in cwd, on the exec prepared when the one before it ended."""
        rc, res, err = D.exec_json("--", "true")
        self.assertEqual(rc, 0, f"{res} {err}")
        return D.exec_json("--cwd", f"/workspace/{cwd}", "--", *argv)

    def assert_refused(self, cwd, status=None):
        rc, res, err = self.after_an_exec(cwd, "pwd", "-P")
        self.assertEqual(rc, bkit.EXIT_FAILED, f"{cwd} was entered: {res} {err}")
        self.assertIn(f"cwd /workspace/{cwd}", res["error"]["message"], res)
        if status:
            self.assertEqual(res["error"]["status"], status, res)

    def test_a_symlink_out_of_the_workspace_is_refused_on_the_prepared_exec(self):
        # Absolute, relative past the root, to a directory beneath it named absolutely (which
        # RESOLVE_BENEATH refuses too), and a magic link: none is followed by the walk.
        for cwd in ("bk-w/abs", "bk-w/abs/ssl", "bk-w/up", "bk-w/up/ssl", "bk-w/absin", "bk-w/absin/ssl",
                    "bk-w/magic"):
            with self.subTest(cwd):
                self.assert_refused(cwd)

    def test_a_symlink_beneath_the_root_is_followed_by_the_whole_path(self):
        rc, res, err = self.after_an_exec("bk-w/rel/ssl", "pwd", "-P")
        self.assertEqual((rc, res["stdout"]), (0, "/workspace/bk-w/real/ssl\n"), f"{res} {err}")

    def test_a_plain_directory_is_entered_by_the_prepared_exec(self):
        rc, res, err = self.after_an_exec("bk-w/real/ssl", "sh", "-c", "pwd -P; tr '\\0' ' ' </proc/1/cmdline")
        self.assertEqual(rc, 0, f"{res} {err}")
        cwd, init = res["stdout"].splitlines()
        self.assertEqual(cwd, "/workspace/bk-w/real/ssl")
        self.assertIn("--order-fd=", init)

    def test_a_directory_the_sandbox_user_may_not_enter_is_refused_on_the_prepared_exec(self):
        # Its own, mode 000 and 600 (no search permission: it holds no capability over its own
        # files either), and one of root's, mode 700 — as the last component and on the way.
        (D.workspace / "bk-root-only" / "inner").mkdir(parents=True, exist_ok=True)
        os.chmod(D.workspace / "bk-root-only", 0o700)
        for cwd in ("bk-w/locked", "bk-w/locked/inner", "bk-w/noexec", "bk-root-only", "bk-root-only/inner"):
            with self.subTest(cwd):
                self.assert_refused(cwd, "PERMISSION_DENIED")

    def test_a_file_on_the_way_is_refused_on_the_prepared_exec(self):
        for cwd in ("bk-w/file", "bk-w/file/x"):
            with self.subTest(cwd):
                self.assert_refused(cwd)

    def test_another_mount_beneath_the_root_is_refused_on_the_prepared_exec(self):
        # RESOLVE_NO_XDEV: a mount beneath the workspace is not a working directory. (An
        # operator's doing: the sandbox user cannot mount.) The walk crosses into it with the
        # mount's root as a plain directory, and must hand it back, not enter it.
        init = D.local_init_pid()
        (D.workspace / "bk-xdev").mkdir(exist_ok=True)
        bkit.run(["nsenter", "-t", str(init), "-m", "--", "mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "bk-xdev",
                  "/workspace/bk-xdev"], check=True)
        try:
            rc, res, err = D.exec_json("--", "mkdir", "/workspace/bk-xdev/sub")
            self.assertEqual(rc, 0, f"{res} {err}")
            for cwd in ("bk-xdev", "bk-xdev/sub"):
                with self.subTest(cwd):
                    self.assert_refused(cwd)
        finally:
            bkit.run(["nsenter", "-t", str(init), "-m", "--", "umount", "/workspace/bk-xdev"], check=True)
            (D.workspace / "bk-xdev").rmdir()

    def test_a_directory_swapped_for_a_symlink_meanwhile_is_never_left_through(self):
        # A command of the sandbox swaps a directory and a symlink to /etc (renameat2
        # RENAME_EXCHANGE) without pause while execs ask for a working directory through the
        # name: each is refused or enters the directory beneath the workspace, whichever it met
        # at each component — never /etc/ssl.
        flipper = ("import ctypes, os, sys\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "os.makedirs('bk-race/d/ssl', exist_ok=True)\n"
                   "os.path.islink('bk-race/l') or os.symlink('/etc', 'bk-race/l')\n"
                   "print('ready', flush=True)\n"
                   "while not os.path.exists('bk-race/stop'):\n"
                   "    libc.renameat2(-100, b'bk-race/d', -100, b'bk-race/l', 2)\n")
        (D.workspace / "bk-race").mkdir(exist_ok=True)
        os.chown(D.workspace / "bk-race", bkit.SANDBOX_UID, bkit.SANDBOX_UID)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            flipping = pool.submit(D.exec_json, "--timeout", "120", "--", "python3", "-c", flipper, timeout=150)
            try:
                bkit.wait_for(lambda: (D.workspace / "bk-race" / "l").is_symlink(), 30, what="the flipper")
                seen = []
                for _ in range(60):
                    rc, res, err = self.after_an_exec("bk-race/d/ssl", "pwd", "-P")
                    if rc == 0:
                        seen.append(res["stdout"].strip())
                    else:
                        self.assertIn("cwd /workspace/bk-race/d/ssl", res["error"]["message"], res)
                self.assertEqual([c for c in seen if not c.startswith("/workspace/bk-race/")], [], seen)
            finally:
                (D.workspace / "bk-race" / "stop").touch()
                rc, res, err = flipping.result()
        self.assertEqual(rc, 0, f"the flipper: {res} {err}")
        bkit.run(["rm", "-rf", str(D.workspace / "bk-race")], check=True)


class Identity(unittest.TestCase):
    def test_the_sandbox_user_has_a_name_and_a_home_outside_the_workspace(self):
        rc, res, err = D.exec_json("--shell", "whoami; id -gn; echo $HOME; cd && pwd && echo dot > ~/.bk-dotfile; "
                                   "python3 -c 'import pwd,os; print(pwd.getpwuid(os.getuid()).pw_dir)'; "
                                   "test -d /var/tmp && echo var-tmp; getent passwd 0 | cut -d: -f1")
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertEqual(res["stdout"].split(), ["sandbox", "sandbox", "/home/sandbox", "/home/sandbox",
                                                 "/home/sandbox", "var-tmp", "root"], res)
        self.assertFalse((D.workspace / ".bk-dotfile").exists(), "the dotfile landed in the workspace")

    def test_the_hosts_users_are_not_listed(self):
        rc, res, err = D.exec_json("--", "cut", "-d:", "-f1", "/etc/passwd")
        self.assertEqual((rc, res["stdout"].split()), (0, ["root", "sandbox", "nobody"]), f"{res} {err}")


class FullTmp(unittest.TestCase):
    def test_a_full_tmp_is_enospc_not_an_oom_kill(self):
        """/tmp is a tmpfs whose pages count against the writer's memory cgroup: it is sized so
        that it fills before the exec's memory limit is reached."""
        rc, res, err = D.exec_json("--shell", "head -c 2G /dev/zero > /tmp/bk-fill; echo rc=$?; rm -f /tmp/bk-fill",
                                   timeout=120)
        self.assertEqual(rc, 0, f"{res} {err}")
        self.assertIs(res["oom_killed"], False, res)
        self.assertEqual(res["signal"], 0, res)
        self.assertIn("No space left on device", res["stderr"])
        self.assertIn("rc=1", res["stdout"])

    def test_tmp_larger_than_the_memory_limit_allows_is_refused_at_start(self):
        sock = bkit.temp_dir("tmpsize") / "bk.sock"
        r = bkit.run([bkit.BOXKITED, "--listen", f"ipc://{sock}", "--exec-memory", "256M",
                      "--tmp-size", "256M"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--tmp-size", r.stderr)
        self.assertIn("ENOSPC", r.stderr)


class AnswerAfterExit(unittest.TestCase):
    """Once an exec's init is gone it is answered, within a short grace, with what was read —
    also when a process outside its tree holds its stdout (handed over a unix socket)."""

    HOLDER = """
import array, os, socket, sys, time
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); s.listen(4)
print("ready", flush=True)
held = []
while True:
    c, _ = s.accept()
    _, anc, _, _ = c.recvmsg(16, socket.CMSG_LEN(4))
    fds = array.array("i"); fds.frombytes(anc[0][2]); held.append(fds[0])
"""
    GIVER = """
import socket, sys, time
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect(sys.argv[1])
socket.send_fds(c, [b"x"], [1, 2])
print("handed over", flush=True)
time.sleep(float(sys.argv[2]))
"""

    def setUp(self):
        (D.workspace / "bk-holder.py").write_text(self.HOLDER)
        (D.workspace / "bk-giver.py").write_text(self.GIVER)
        self.sock = f"/tmp/bk-holder-{secrets.token_hex(4)}.sock"
        self.holder = bkit.popen([bkit.BKCTL, "--url", D.url, "--key-file", D.key, "exec", "--timeout", "120",
                                  "--", "python3", "/workspace/bk-holder.py", self.sock],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.holder_argv = ["python3", "/workspace/bk-holder.py", self.sock]
        bkit.wait_for(self.holder_alive, 20, what="the holder exec")
        time.sleep(0.5)  # its socket bound (its stdout reaches us only at its end)

    def tearDown(self):
        for pid in bkit.find_processes(bkit.SANDBOX_UID, self.holder_argv):
            os.kill(pid, 9)
        self.holder.wait(timeout=30)

    def holder_alive(self):
        return bool(bkit.find_processes(bkit.SANDBOX_UID, self.holder_argv))

    def test_a_timed_out_exec_is_answered_while_its_stdout_is_held_elsewhere(self):
        rc, res, err = D.exec_json("--timeout", "2", "--", "python3", "/workspace/bk-giver.py", self.sock, "100",
                                   timeout=60)
        self.assertEqual(rc, bkit.EXIT_TIMEOUT, f"{res} {err}")
        self.assertIs(res["timed_out"], True, res)
        self.assertEqual(res["stdout"], "handed over\n", res)
        self.assertTrue(self.holder_alive(), "the answer waited for the holder to end")

    def test_an_exec_that_exits_is_answered_while_its_stdout_is_held_elsewhere(self):
        rc, res, err = D.exec_json("--", "python3", "/workspace/bk-giver.py", self.sock, "0", timeout=60)
        self.assertEqual((rc, res["exit_code"], res["stdout"]), (0, 0, "handed over\n"), f"{res} {err}")
        self.assertTrue(self.holder_alive(), "the answer waited for the holder to end")
