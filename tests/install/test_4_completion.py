"""bkctl's shell completion, as make install ships it (bkctl completion bash | zsh), run by the real
shells: it offers exactly the options each command's --help lists (and the aliases the help
mentions), every option it offers is one bkctl takes, option arguments complete by their kind
(files, -o's formats, signal names), commands and subcommands complete, and the words after
exec's -- are left alone. bash runs the script as bash-completion would load it (plain `complete
-F`, nothing of bash-completion needed); zsh runs it through compinit on a terminal, typed as a
person types, TAB and all."""

import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BOXKITE_BUILD", os.path.join(REPO, "build"))
BKCTL = os.path.join(BUILD, "bkctl")
# No boxkited here: a command that gets as far as connecting fails at once.
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "BOXKITE_URL": "ipc:///nonexistent/boxkited.sock"}


def bkctl(*args):
    return subprocess.run([BKCTL, *args], capture_output=True, text=True, timeout=30, env=ENV,
                          stdin=subprocess.DEVNULL)


def commands():
    out = bkctl("help").stdout
    body = out[out.index("Commands:\n"):out.index("\nGlobal options")]
    return re.findall(r"(?m)^  ([a-z][a-z-]*) ", body)


def help_options(cmd):
    """The options --help lists as rows (its own and the global ones), and every option it names."""
    text = bkctl(cmd, "--help").stdout
    rows = set()
    for m in re.finditer(r"(?m)^  (?:(-\w), )?(--[\w-]+)", text):
        rows.update(x for x in m.groups() if x)
    return rows, set(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])\b", text))


class Bash(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(BKCTL, os.X_OK):
            raise unittest.SkipTest("SKIP: %s is not built (make)" % BKCTL)
        cls.dir = tempfile.mkdtemp(prefix="boxkite-completion-")
        cls.script = os.path.join(cls.dir, "bkctl.bash")
        with open(cls.script, "w") as f:
            r = bkctl("completion", "bash")
            assert r.returncode == 0, r.stderr
            f.write(r.stdout)
        for name in ("key-one", "key-two", "notes.txt"):
            open(os.path.join(cls.dir, name), "w").close()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def complete(self, *words):
        """What bash's completion of bkctl offers for the last of words (the word being typed)."""
        quoted = " ".join("'%s'" % w.replace("'", "'\\''") for w in ("bkctl",) + words)
        prog = ('source %s; COMP_WORDS=(%s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _bkctl; '
                'printf "%%s\\n" "${COMPREPLY[@]}"' % (self.script, quoted))
        r = subprocess.run(["bash", "--noprofile", "--norc", "-c", prog], capture_output=True, text=True,
                           timeout=30, cwd=self.dir, env=ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return sorted(w for w in r.stdout.split("\n") if w)

    def test_commands(self):
        names = commands()
        self.assertIn("logs", names)
        self.assertIn("completion", names)
        self.assertEqual(self.complete(""), sorted(names))
        self.assertEqual(self.complete("lo"), ["logs"])
        # Global options before the command, with their arguments, are skipped over.
        self.assertEqual(self.complete("--url", "ipc:///x", "-o", "json", "he"), ["health", "help"])

    def test_each_commands_options_are_what_its_help_lists(self):
        for cmd in commands():
            with self.subTest(cmd):
                offered = set(self.complete(cmd, "-"))
                rows, named = help_options(cmd)
                self.assertTrue(rows, "bkctl %s --help lists no option" % cmd)
                self.assertLessEqual(rows, offered, "listed by --help, not completed")
                self.assertLessEqual(offered - rows, named, "completed, and not even named by --help")

    def test_every_option_offered_is_one_bkctl_takes(self):
        for cmd in commands():
            for opt in self.complete(cmd, "-"):
                with self.subTest(cmd=cmd, option=opt):
                    r = bkctl(cmd, opt)
                    self.assertNotIn("unknown option", r.stderr)
        r = bkctl("logs", "--no-such-option")
        self.assertIn("unknown option '--no-such-option'", r.stderr)  # what the loop above looks for

    def test_option_arguments_by_kind(self):
        self.assertEqual(self.complete("logs", "-o", ""), ["json", "text"])
        self.assertEqual(self.complete("kill", "-s", "K"), ["KILL"])
        self.assertEqual(self.complete("kill", "--signal", "U"), ["USR1", "USR2"])
        self.assertEqual(self.complete("reset", "--new-key", "key-"), ["key-one", "key-two"])
        self.assertEqual(self.complete("--key-file", "key-t"), ["key-two"])
        # An argument nothing local completes (a sandbox directory, a number) offers nothing.
        self.assertEqual(self.complete("exec", "-w", ""), [])
        self.assertEqual(self.complete("logs", "--from", ""), [])

    def test_operands_by_kind(self):
        self.assertEqual(self.complete("sync", "pu"), ["pull", "push"])
        self.assertEqual(self.complete("sync", "push", "p"), [])  # one subcommand
        self.assertEqual(self.complete("help", "ex"), ["exec"])
        self.assertEqual(self.complete("completion", ""), ["bash", "zsh"])
        self.assertEqual(self.complete("cp", "no"), ["notes.txt"])
        self.assertEqual(self.complete("cp", "notes.txt", ":"), [])  # a sandbox path
        self.assertEqual(self.complete("logs", ""), [])              # a process id
        # After exec's --, the words are the command's, not bkctl's.
        self.assertEqual(self.complete("exec", "--", "-"), [])
        self.assertEqual(self.complete("exec", "--", "no"), [])


class Zsh(unittest.TestCase):
    """zsh's completion system (compinit) loading _bkctl from fpath, driven on a terminal: a word is
    typed, TAB pressed, and the line zsh made of it read back with a widget bound to ^T."""

    @classmethod
    def setUpClass(cls):
        if not os.access(BKCTL, os.X_OK):
            raise unittest.SkipTest("SKIP: %s is not built (make)" % BKCTL)
        if not shutil.which("zsh"):
            raise unittest.SkipTest("SKIP: zsh is not installed (make test-deps installs it)")
        cls.dir = tempfile.mkdtemp(prefix="boxkite-zsh-")
        os.mkdir(os.path.join(cls.dir, "fpath"))
        with open(os.path.join(cls.dir, "fpath", "_bkctl"), "w") as f:
            r = bkctl("completion", "zsh")
            assert r.returncode == 0, r.stderr
            f.write(r.stdout)
        open(os.path.join(cls.dir, "unique-key-file"), "w").close()
        os.symlink(BKCTL, os.path.join(cls.dir, "bkctl"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def completed(self, typed):
        """The command line zsh shows after typed (which holds TABs)."""
        out_file = os.path.join(self.dir, "buffer")
        if os.path.exists(out_file):
            os.unlink(out_file)
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(self.dir)
            os.execve("/usr/bin/env", ["env", "zsh", "-f", "-i"],
                      dict(ENV, HOME=self.dir, TERM="dumb", PATH=self.dir + ":/usr/bin:/bin"))
        setup = ("fpath=(%s/fpath $fpath); autoload -Uz compinit; compinit -u -D; "
                 "_show() { print -r -- \"$BUFFER\" > %s }; zle -N _show; bindkey '^T' _show; print READY\n"
                 % (self.dir, out_file))
        try:
            os.write(fd, setup.encode())
            self.read_until(fd, lambda buf: b"READY\r\n" in buf)
            os.write(fd, typed.encode() + b"\x14")
            self.read_until(fd, lambda _: os.path.exists(out_file) and open(out_file).read().endswith("\n"))
            with open(out_file) as f:
                return f.read().rstrip("\n")
        finally:
            os.close(fd)
            os.kill(pid, 9)
            os.waitpid(pid, 0)

    @staticmethod
    def read_until(fd, done, timeout=20):
        buf, deadline = b"", time.monotonic() + timeout
        while not done(buf):
            if time.monotonic() > deadline:
                raise AssertionError("zsh did not answer; the terminal showed:\n%r" % buf[-2000:])
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    buf += os.read(fd, 65536)
                except OSError:
                    break
        return buf

    def test_a_command(self):
        self.assertEqual(self.completed("bkctl lo\t"), "bkctl logs ")

    def test_a_command_after_global_options(self):
        self.assertEqual(self.completed("bkctl -o json clos\t"), "bkctl -o json close-stdin ")

    def test_a_commands_option(self):
        self.assertEqual(self.completed("bkctl logs --fol\t"), "bkctl logs --follow ")
        self.assertEqual(self.completed("bkctl start --max-r\t"), "bkctl start --max-runtime ")

    def test_an_options_argument(self):
        self.assertEqual(self.completed("bkctl kill --signal KI\t"), "bkctl kill --signal KILL ")
        self.assertEqual(self.completed("bkctl ps -o js\t"), "bkctl ps -o json ")
        self.assertEqual(self.completed("bkctl reset --new-key unique\t"), "bkctl reset --new-key unique-key-file ")

    def test_a_subcommand(self):
        self.assertEqual(self.completed("bkctl sync pus\t"), "bkctl sync push ")
        self.assertEqual(self.completed("bkctl help verif\t"), "bkctl help verify ")
        # The command's options after its subcommand.
        self.assertEqual(self.completed("bkctl sync push --default-e\t"), "bkctl sync push --default-excludes ")

    def test_nothing_of_ours_after_exec_s_double_dash(self):
        self.assertEqual(self.completed("bkctl exec --sh\t"), "bkctl exec --shell ")
        self.assertEqual(self.completed("bkctl exec -- --sh\t"), "bkctl exec -- --sh")
