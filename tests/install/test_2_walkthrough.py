"""README.md's walkthrough, run as written: the console blocks between its walkthrough markers
are read from README.md itself (so the two cannot drift), their `$ ` lines run one after the
other by one bash, as a person would type them, in a scratch root (scratch-root.sh: nothing lands
on this machine; its own network namespace), and what each prints is checked against the lines
README.md shows under it. The walkthrough goes from make install through exec, files, background
processes and a preview fetched through the daemon's --preview-listen, to stopping the daemon:
followed in order, every command works.

In the expected lines `…` stands for any text, and a line that is only `…` for any number of
lines. Every command must exit 0 (the walkthrough shows a failing status with `; echo ...`)."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(REPO, "README.md")
START, END = "<!-- walkthrough", "<!-- /walkthrough -->"
CMD_MARK, RC_MARK = "\x1e", "\x1f"  # record and unit separators: no command prints them
TIMEOUT = 600  # the whole walkthrough, a hang guard only


def walkthrough(text):
    """[(command, [expected output lines])] from the console blocks between the markers."""
    body = text[text.index(START):text.index(END)]
    steps = []
    for block in re.findall(r"^```console\n(.*?)^```", body, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
            else:
                raise AssertionError("README.md: output before any command in a console block: %r" % line)
    return steps


def script(steps):
    """One bash script: each command between markers that carry its number and exit status. The
    epilogue stops what the walkthrough left running (and waits, so boxkited removes its cgroups)."""
    out = []
    for i, (cmd, _) in enumerate(steps):
        out.append("printf '%s%d\\n'" % (CMD_MARK, i))
        out.append("{ %s\n} 2>&1" % cmd)
        out.append("printf '\\n%s%%d\\n' $?" % RC_MARK)
    out.append("printf '%sepilogue\\n'" % CMD_MARK)
    out.append("kill $(jobs -p) 2>/dev/null; wait")
    # For a failure's report: the daemon's log, where the walkthrough sends it.
    out.append("cat /var/log/boxkited.log 2>/dev/null")
    return "\n".join(out) + "\n"


def outputs(text, n):
    """{step: (output lines, exit status)} from the script's output."""
    got = {}
    for m in re.finditer(r"%s(\d+)\n(.*?)\n%s(\d+)\n" % (CMD_MARK, RC_MARK), text, re.S):
        lines = m.group(2).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        got[int(m.group(1))] = (lines, int(m.group(3)))
    return got


def matches(expected, actual):
    """Whether the actual lines are what the expected ones show (… as a wildcard)."""
    pattern = ""
    for line in expected:
        if line == "…":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in line.split("…")) + r"\n"
    return re.fullmatch(pattern, "".join(l + "\n" for l in actual)) is not None


class ReadmeWalkthrough(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIP: needs root (mount namespaces, and boxkited makes a sandbox)")
        for tool in ("unshare", "pivot_root", "mountpoint", "bash", "make", "ip"):
            if not shutil.which(tool):
                self.skipTest("SKIP: %s is not installed (make deps)" % tool)
        with open("/proc/filesystems") as f:
            if "overlay" not in f.read():
                r = subprocess.run(["modprobe", "overlay"], capture_output=True)
                if r.returncode != 0:
                    self.skipTest("SKIP: no overlay filesystem in this kernel")
        self.tmp = tempfile.mkdtemp(prefix="boxkite-walkthrough-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_readme_walkthrough_prints_what_it_shows(self):
        with open(README) as f:
            steps = walkthrough(f.read())
        self.assertGreater(len(steps), 10, "README.md's walkthrough has hardly any commands")
        # What a new user hit: the process and preview commands came after the daemon was stopped,
        # and the daemon had no --preview-listen.
        commands = [cmd for cmd, _ in steps]
        stop = commands.index("kill %1")
        self.assertEqual(stop, len(commands) - 1, "the daemon is stopped before the walkthrough's end")
        for needed in ("bkctl watch", "bkctl start", "bkctl ps", "bkctl preview", "bkctl logs", "bkctl kill"):
            self.assertTrue(any(needed in c for c in commands[:stop]), "%s is not in the walkthrough" % needed)
        self.assertIn("--preview-listen", [c for c in commands if c.startswith("boxkited ")][0])
        path = os.path.join(self.tmp, "walkthrough.sh")
        with open(path, "w") as f:
            f.write(script(steps))
        root = os.path.join(self.tmp, "root")
        os.mkdir(root)
        out_path = os.path.join(self.tmp, "out")
        # Into a file, not a pipe: a daemon the walkthrough starts in the background keeps our
        # stdout open as long as it runs.
        with open(out_path, "w") as out:
            # A network namespace of its own: the ports the walkthrough listens on (the preview's,
            # the exposed one) are its own, whatever else this machine runs.
            r = subprocess.run(["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--propagation",
                                "private", os.path.join(HERE, "scratch-root.sh"), root, REPO, path, "net"],
                               stdout=out, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)
        with open(out_path, errors="replace") as f:
            text = f.read()
        got = outputs(text, len(steps))
        problems = []
        for i, (cmd, expected) in enumerate(steps):
            if i not in got:
                problems.append("$ %s\n  did not run (the scratch root's stderr: %s)" % (cmd, r.stderr[-2000:]))
                break
            lines, rc = got[i]
            if rc != 0:
                problems.append("$ %s\n  exit status %d; printed:\n    %s" % (cmd, rc, "\n    ".join(lines)))
            elif not matches(expected, lines):
                problems.append("$ %s\n  README.md shows:\n    %s\n  it printed:\n    %s"
                                % (cmd, "\n    ".join(expected), "\n    ".join(lines)))
        log = text[text.find(CMD_MARK + "epilogue"):][-3000:]
        self.assertEqual(problems, [], "\n\n".join(problems) + "\n\nthe end of boxkited's log:\n" + log)
        self.assertIn(CMD_MARK + "epilogue", text, "the walkthrough's shell did not reach its end")
