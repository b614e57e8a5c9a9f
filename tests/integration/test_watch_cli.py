"""bkctl watch against a local-mode boxkited: a line per change as it happens, names quoted so that
none can pass for a line of its own or reach the terminal as a control sequence, -o json lines
with the exact bytes, ^C and SIGTERM ending it cleanly (the watch stopped on the server, its slot
given back), --timeout, and the ends it reports: its directory removed, a symlink out of the
roots refused. FileWatch itself is tests/python/test_watch.py's.

Every wait here is a hang guard (bkit.wait_for), never a measured duration.
"""
import json
import os
import signal
import subprocess
import threading
import unittest

import bkit

D = None
GUARD_S = 60
WATCHES_MAX = 16  # common/watchbounds.h


def setUpModule():
    global D
    bkit.require_root()
    bkit.require_build()
    D = bkit.Daemon("watch-cli").start()


def tearDownModule():
    if D:
        D.stop()


def sh(script):
    r = D.bkctl("exec", "--", "sh", "-c", script, timeout=GUARD_S)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


class Watching:
    """bkctl [-o json] watch ARGS running, its stdout lines (bytes) and stderr gathered as they
    come."""

    def __init__(self, *args, json_lines=False):
        env = {k: v for k, v in os.environ.items() if not k.startswith("BOXKITE_")}
        env.update(BOXKITE_URL=D.url, BOXKITE_KEY_FILE=str(D.key))
        argv = [str(bkit.BKCTL)] + (["-o", "json"] if json_lines else []) + ["watch", *args]
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.lines, self.err = [], b""
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._out, daemon=True),
                        threading.Thread(target=self._err, daemon=True)]
        for t in self.threads:
            t.start()

    def _out(self):
        for line in self.p.stdout:
            with self.lock:
                self.lines.append(line)

    def _err(self):
        for chunk in iter(lambda: self.p.stderr.read1(4096), b""):
            with self.lock:
                self.err += chunk

    def started(self):
        """Once it says the watch is there (nothing changing after that is missed)."""
        bkit.wait_for(lambda: b"watching" in self.err or (self.lines and b"watching" in self.lines[0])
                      or self.p.poll() is not None, GUARD_S, what="bkctl watch to start")
        assert self.p.poll() is None, self.err
        return self

    def until(self, pred, what):
        return bkit.wait_for(lambda: pred(list(self.lines)), GUARD_S, what=what)

    def end(self, sig=None):
        if sig:
            self.p.send_signal(sig)
        code = self.p.wait(GUARD_S)
        for t in self.threads:
            t.join(GUARD_S)
        return code


class WatchCliTest(unittest.TestCase):
    def fresh(self):
        name = self.id().rsplit(".", 1)[-1]
        sh("rm -rf %s && mkdir %s" % (name, name))
        return name

    def test_a_line_per_change_and_ctrl_c_ends_it_cleanly(self):
        d = self.fresh()
        # sub is there before the watch: what happens in a directory made by the same command
        # races with its being watched (what it holds then is reported as created).
        sh("mkdir %s/sub" % d)
        w = Watching(d).started()
        sh("cd %s && mkdir new && printf x > sub/f && mv sub/f g && rm g" % d)
        w.until(lambda lines: b"removed g\n" in lines, "the last change")
        self.assertEqual(w.end(signal.SIGINT), 0, w.err)
        self.assertEqual(w.lines, [b"created new/\n", b"created sub/f\n", b"modified sub/f\n", b"closed sub/f\n",
                                   b"moved sub/f -> g\n", b"removed g\n"])
        self.assertNotIn(b"error", w.err.lower())

    def test_stopped_watches_give_their_slot_back(self):
        # More watches than a sandbox may hold, one after the other, each ended by a signal: every
        # one starts, so every one before it was stopped on the server.
        d = self.fresh()
        for i in range(WATCHES_MAX + 4):
            w = Watching(d).started()
            self.assertEqual(w.end(signal.SIGTERM if i % 2 else signal.SIGINT), 0, w.err)

    def test_a_reader_that_goes_away_stops_the_watch(self):
        d = self.fresh()
        env = {k: v for k, v in os.environ.items() if not k.startswith("BOXKITE_")}
        env.update(BOXKITE_URL=D.url, BOXKITE_KEY_FILE=str(D.key))
        pipeline = [subprocess.Popen([str(bkit.BKCTL), "watch", d], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE) for _ in range(WATCHES_MAX)]
        for p in pipeline:
            bkit.wait_for(lambda p=p: p.stderr.read1(4096), GUARD_S, what="a watch to start")
            p.stdout.close()  # its reader goes away
        sh("printf x > %s/wake" % d)
        for p in pipeline:
            self.assertEqual(p.wait(GUARD_S), 0)
        # Their slots are back.
        w = Watching(d).started()
        self.assertEqual(w.end(signal.SIGINT), 0, w.err)

    def test_names_are_quoted_one_line_each(self):
        d = self.fresh()
        names = [b"line\nbreak", b"\x1b]0;title\x07", b"caf\xe9", b"a b", b"-n"]
        w = Watching(d).started()
        script = "import os\nfor n in %r: open(os.path.join(b'%s', n), 'wb').close()" % (names, d)
        r = D.bkctl("exec", "--", "python3", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        w.until(lambda lines: len([l for l in lines if l.startswith(b"closed ")]) == len(names), "every name")
        w.end(signal.SIGINT)
        out = b"".join(w.lines)
        self.assertNotIn(b"\x1b", out)
        self.assertNotIn(b"\x07", out)
        # One line per event: 2 per name, each starting with its kind.
        self.assertEqual(len(w.lines), 2 * len(names), w.lines)
        self.assertTrue(all(l.split(b" ", 1)[0] in (b"created", b"closed") for l in w.lines), w.lines)
        self.assertIn(b"closed 'a b'\n", w.lines)
        self.assertIn(b"closed 'line'$'\\n''break'\n", w.lines)

    def test_json_lines_carry_the_exact_bytes(self):
        d = self.fresh()
        names = [b"line\nbreak", b"caf\xe9", b"\xff"]
        w = Watching(d, json_lines=True).started()
        script = "import os\nfor n in %r: open(os.path.join(b'%s', n), 'wb').close()" % (names, d)
        self.assertEqual(D.bkctl("exec", "--", "python3", "-c", script).returncode, 0)
        w.until(lambda lines: len([l for l in lines if b'"closed"' in l]) == len(names), "every name")
        sh("mkdir %s/sub && mv %s/sub %s/sub2" % (d, d, d))
        w.until(lambda lines: any(b'"moved"' in l for l in lines), "the move")
        w.end(signal.SIGINT)
        objs = [json.loads(l) for l in w.lines]
        self.assertEqual(objs[0], {"watching": d, "directories": 1})
        closed = [o["path"].encode("utf-8", "surrogateescape") for o in objs if o.get("kind") == "closed"]
        self.assertEqual(sorted(closed), sorted(names))
        self.assertIn({"kind": "created", "path": "sub", "directory": True}, objs)
        self.assertIn({"kind": "moved", "path": "sub", "to": "sub2", "directory": True}, objs)

    def test_timeout_ends_it_cleanly(self):
        d = self.fresh()
        w = Watching("--timeout", "1", d).started()
        self.assertEqual(w.end(), 0, w.err)

    def test_count_ends_it_after_so_many_changes(self):
        d = self.fresh()
        w = Watching("-n", "2", d).started()
        sh("printf x > %s/a && printf y > %s/b" % (d, d))
        self.assertEqual(w.end(), 0, w.err)
        self.assertEqual(w.lines, [b"created a\n", b"modified a\n"])
        # And it stopped the watch: as many as a sandbox may hold start after it.
        ws = [Watching(d).started() for _ in range(WATCHES_MAX)]
        for x in ws:
            self.assertEqual(x.end(signal.SIGINT), 0, x.err)

    def test_a_removed_directory_ends_it_and_says_why(self):
        d = self.fresh()
        sh("mkdir %s/w" % d)
        w = Watching("%s/w" % d, json_lines=True).started()
        sh("rm -r %s/w" % d)
        self.assertEqual(w.end(), 1)
        self.assertEqual(json.loads(w.lines[-1]), {"end": "removed"})
        self.assertIn(b"the watched directory was removed", w.err)

    def test_a_symlink_out_of_the_roots_is_refused(self):
        d = self.fresh()
        sh("ln -s /etc %s/etc" % d)
        r = D.bkctl("watch", "%s/etc" % d)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.assertIn("outside its root", r.stderr)


if __name__ == "__main__":
    unittest.main()
