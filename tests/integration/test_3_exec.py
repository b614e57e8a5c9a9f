"""3. Exec behaviour, through bkctl against a local-mode boxkited with default limits: timeouts
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
    def test_finished_execs_leave_only_the_staged_cgroup(self):
        # Each exec's cgroup is removed once it is over, also when the command ends before the
        # executor has left that cgroup for the next one (then the removal waits for it).
        if not D.cgroup_dirs:
            self.skipTest("no per-exec cgroups on this machine: nothing to check")
        for _ in range(100):
            rc, res, err = D.exec_json("--", "true")
            self.assertEqual(rc, 0, f"{res} {err}")

        def left():
            return {str(d): sorted(p.name for p in d.glob("exec-*")) for d in D.cgroup_dirs}
        try:
            bkit.wait_for(lambda: all(len(v) == 1 for v in left().values()), 10,  # a hang guard
                          what="one exec cgroup (the staged one) per hierarchy")
        except AssertionError as e:
            self.fail(f"{e}: {left()}")


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

    def test_denied_env_name_is_refused_by_name(self):
        for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PATH"):
            with self.subTest(name):
                self.assertRefused("INVALID_ARGUMENT", "-e", f"{name}=x", "--", "true", mention=name)

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
