"""FileWatch end to end: the boxkite package's Client.watch() against a real boxkited (local mode,
as root), changes made by commands in the sandbox. Editors' ways of writing a file, trees deep
and moving, a burst far past the bounds (reported as an overflow, counted, in bounded memory),
hostile names, symlinks out of the roots, a watched directory removed, the bounds on watches and
directories, Reset, the file worker's restart, and a cursor taken to another client. The front's
half alone (cursors, bounds, waits) is the wire tier's (tests/wire/test_watch.c); bkctl watch is
the integration tier's (tests/integration/test_watch_cli.py)."""

import os
import re
import shutil
import signal
import threading
import time
import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import WatchEnd, WatchEventKind as K
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"
GUARD_S = 60  # hang guard of every wait below: never a timing assertion
# common/watchbounds.h
WATCHES_MAX = 16
DIRS_MAX = 8192
EVENTS_MAX = 4096
IDLE_S = 60  # server/files/watch.h, BK_WATCH_IDLE_MS


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def brief(events):
    """(kind, path, to) of each event, for comparing."""
    return [(e.kind, e.path, e.to) for e in events]


class Base(unittest.TestCase):
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.daemon = boxkited_process.Boxkited(args=cls.ARGS).__enter__()
        cls.box = cls.daemon.client(timeout=GUARD_S + 10)

    @classmethod
    def tearDownClass(cls):
        cls.box.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def sh(self, script):
        r = self.box.exec(script, timeout=GUARD_S)
        self.assertEqual((r.exit_code, r.signal), (0, 0), r.stderr_text)
        return r

    def fresh(self):
        """A directory of the workspace for this test alone."""
        name = self.id().rsplit(".", 1)[-1]
        self.sh("rm -rf %s && mkdir %s" % (name, name))
        return name

    def watch(self, path):
        w = self.box.watch(path)
        self.addCleanup(w.stop)
        return w

    def collect(self, w, until, what):
        """Events read until until(events) holds or the watch ends."""
        events, deadline = [], time.monotonic() + GUARD_S
        while not until(events) and w.end == WatchEnd.NONE:
            if time.monotonic() > deadline:
                self.fail("%s: not seen within %d s; got %r" % (what, GUARD_S, brief(events)))
            events += w.read(wait=1.0)
        return events

    def collect_until(self, w, kind, path, to=""):
        return self.collect(w, lambda evs: any((e.kind, e.path, e.to) == (kind, path, to) for e in evs),
                            "%s %s %s" % (kind.name, path, to))

    def assertShape(self, events, path, *first):
        """events are about path alone: first's kinds, then MODIFIED (writes folded into as few
        as the reads allow), then CLOSED last."""
        self.assertTrue(events and all(e.path == path for e in events), brief(events))
        kinds = [e.kind for e in events]
        self.assertEqual(kinds[:len(first)], list(first), brief(events))
        self.assertEqual(kinds[-1], K.CLOSED, brief(events))
        self.assertEqual(set(kinds[len(first):-1]) - {K.MODIFIED}, set(), brief(events))

    def assert_in_order(self, events, expected):
        """expected, (kind, path, to) each, appears in events in that order (others between)."""
        got, at = brief(events), 0
        for want in expected:
            while at < len(got) and got[at] != want:
                at += 1
            self.assertLess(at, len(got), "%r not found in order in %r" % (want, got))
            at += 1


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class EditorsTest(Base):
    """How editors and tools write a file, seen as a watcher sees it."""

    def test_write_temp_then_rename(self):
        d = self.fresh()
        self.sh("printf old > %s/conf.json" % d)
        w = self.watch(d)
        self.sh("cd %s && printf new > .conf.json.tmp && mv .conf.json.tmp conf.json" % d)
        evs = self.collect_until(w, K.MOVED, ".conf.json.tmp", "conf.json")
        self.assert_in_order(evs, [(K.CREATED, ".conf.json.tmp", ""), (K.MODIFIED, ".conf.json.tmp", ""),
                                   (K.CLOSED, ".conf.json.tmp", ""), (K.MOVED, ".conf.json.tmp", "conf.json")])

    def test_sed_in_place(self):
        # sed -i writes a temporary file of its own and renames it over the file.
        d = self.fresh()
        self.sh("printf 'a\\n' > %s/f.txt" % d)
        w = self.watch(d)
        self.sh("sed -i s/a/b/ %s/f.txt" % d)
        evs = self.collect(w, lambda evs: any(e.kind == K.MOVED and e.to == "f.txt" for e in evs), "sed's rename")
        moved = [e for e in evs if e.kind == K.MOVED][0]
        self.assertTrue(moved.path.startswith("sed"), brief(evs))
        self.assert_in_order(evs, [(K.CREATED, moved.path, ""), (K.CLOSED, moved.path, ""),
                                   (K.MOVED, moved.path, "f.txt")])

    def test_backup_and_rename(self):
        # vim's way with 'backupcopy=no' and 'writebackup': the file renamed to its backup, a new
        # file written under the name, the backup removed; and its probe that the directory is
        # writable (4913).
        d = self.fresh()
        self.sh("printf 1 > %s/f.c" % d)
        w = self.watch(d)
        self.sh("cd %s && : > 4913 && rm 4913 && mv f.c f.c~ && printf 2 > f.c && rm f.c~" % d)
        evs = self.collect_until(w, K.REMOVED, "f.c~")
        self.assert_in_order(evs, [(K.CREATED, "4913", ""), (K.CLOSED, "4913", ""), (K.REMOVED, "4913", ""),
                                   (K.MOVED, "f.c", "f.c~"), (K.CREATED, "f.c", ""), (K.MODIFIED, "f.c", ""),
                                   (K.CLOSED, "f.c", ""), (K.REMOVED, "f.c~", "")])

    @unittest.skipIf(not shutil.which("vim"), "no vim on this machine (the sandbox shows its /usr)")
    def test_vim_itself(self):
        d = self.fresh()
        self.sh("printf 'one\\n' > %s/notes.txt" % d)
        w = self.watch(d)
        self.sh("cd %s && HOME=/tmp vim -u NONE -i NONE -N -es -c 'set nobackup writebackup backupcopy=no' "
                "-c 's/one/two/' -c wq notes.txt" % d)
        evs = self.collect(w, lambda evs: any(e.kind == K.CLOSED and e.path == "notes.txt" for e in evs),
                           "vim's write")
        # Whatever vim's dance, the file is written anew and closed; nothing outside d appears.
        self.assertIn((K.CLOSED, "notes.txt", ""), brief(evs))
        self.assertTrue(all(not e.path.startswith("/") and ".." not in e.path.split("/") for e in evs))
        self.assertEqual(self.box.download("%s/notes.txt" % d), b"two\n")

    def test_truncate_and_write(self):
        d = self.fresh()
        self.sh("printf 'long old content' > %s/log" % d)
        w = self.watch(d)
        self.sh("printf short > %s/log" % d)
        evs = self.collect_until(w, K.CLOSED, "log")
        # The truncation and the write are one MODIFIED unless a read came between the two.
        self.assertShape(evs, "log", K.MODIFIED)

    def test_many_writes_to_one_file_are_one_event(self):
        d = self.fresh()
        w = self.watch(d)
        self.sh("python3 -c \"import os\nf = os.open('%s/big', os.O_WRONLY | os.O_CREAT)\n"
                "for _ in range(5000): os.write(f, b'x' * 100)\nos.close(f)\"" % d)
        evs = self.collect_until(w, K.CLOSED, "big")
        # 5000 writes: one MODIFIED, or one more each time a read took what had come (a read is
        # answered as soon as there is something).
        self.assertShape(evs, "big", K.CREATED, K.MODIFIED)
        self.assertLess(len(evs), 20, brief(evs))


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class TreesTest(Base):
    def test_a_deep_tree_already_there(self):
        d = self.fresh()
        self.sh("cd %s && python3 -c \"import os; os.makedirs('/'.join('l%%d' %% i for i in range(200)))\"" % d)
        w = self.watch(d)
        self.assertEqual(w.directories, 201)
        bottom = "/".join("l%d" % i for i in range(200))
        self.sh("cd %s/%s && printf x > leaf" % (d, bottom))
        self.collect_until(w, K.CLOSED, bottom + "/leaf")

    def test_a_deep_tree_that_appears(self):
        d = self.fresh()
        w = self.watch(d)
        bottom = "/".join("n%d" % i for i in range(100))
        self.sh("cd %s && mkdir -p %s && printf x > %s/leaf" % (d, bottom, bottom))
        # Every level reported made, however far ahead of the watch the command ran (a directory's
        # content found when it is watched is reported as created: a path may come twice).
        evs = self.collect(w, lambda evs: {(K.CREATED, "/".join("n%d" % i for i in range(k + 1)), "")
                                            for k in range(100)} <= set(brief(evs))
                           and (K.CREATED, bottom + "/leaf", "") in brief(evs), "every level and the leaf")
        self.assertTrue(all(e.kind == K.CREATED or e.path == bottom + "/leaf" for e in evs), brief(evs))
        # And the bottom is watched now.
        self.sh("rm %s/%s/leaf" % (d, bottom))
        self.collect_until(w, K.REMOVED, bottom + "/leaf")

    def test_directories_renamed_moved_out_and_in(self):
        d = self.fresh()
        self.sh("mkdir -p %s/in/a %s_outside/b && printf 1 > %s_outside/b/f" % (d, d, d))
        self.addCleanup(self.sh, "rm -rf %s_outside" % d)
        w = self.watch(d)
        # Renamed within: one event with both paths, and what happens inside it later is named
        # by where it is now.
        self.sh("mv %s/in/a %s/in/z" % (d, d))
        self.collect_until(w, K.MOVED, "in/a", "in/z")
        self.sh("printf 1 > %s/in/z/new" % d)
        self.collect_until(w, K.CLOSED, "in/z/new")
        # Moved out: one side only, and nothing there is reported any more.
        self.sh("mv %s/in/z %s_outside/z" % (d, d))
        self.collect_until(w, K.MOVED, "in/z", "")
        # Moved in with its content: one side only, and its content as created.
        self.sh("printf 2 > %s_outside/z/after && mv %s_outside/b %s/in/b" % (d, d, d))
        evs = self.collect_until(w, K.CREATED, "in/b/f")
        self.assertIn((K.MOVED, "", "in/b"), brief(evs))
        self.assertNotIn("in/z/after", [e.path for e in evs])
        self.sh("printf 3 > %s/in/b/f" % d)
        evs = self.collect_until(w, K.CLOSED, "in/b/f")
        self.assertFalse([e for e in evs if "after" in e.path], brief(evs))

    def test_a_watched_directory_removed_ends_the_watch(self):
        d = self.fresh()
        self.sh("mkdir -p %s/w/sub && printf x > %s/w/sub/f" % (d, d))
        w = self.watch("%s/w" % d)
        self.sh("rm -r %s/w" % d)
        evs = self.collect(w, lambda evs: False, "the end")
        self.assertEqual(w.end, WatchEnd.REMOVED)
        self.assert_in_order(evs, [(K.REMOVED, "sub/f", ""), (K.REMOVED, "sub", "")])
        self.assertEqual(w.read(), [])
        # Its end was read: the watch is gone on the server.
        gone = self.box.watch(cursor=w.cursor)
        self.assertEqual(gone.read(), [])
        self.assertEqual(gone.end, WatchEnd.EXPIRED)

    def test_a_watched_directory_moved_away_ends_the_watch(self):
        d = self.fresh()
        self.sh("mkdir -p %s/w" % d)
        w = self.watch("%s/w" % d)
        self.sh("mv %s/w %s/elsewhere" % (d, d))
        self.collect(w, lambda evs: False, "the end")
        self.assertEqual(w.end, WatchEnd.REMOVED)

    def test_a_tree_deeper_than_a_path_reaches(self):
        # Below 4095 bytes of path nothing can name an entry in any rpc: what is deeper is not
        # watched, and the rest goes on being.
        d = self.fresh()
        name = "x" * 250
        self.sh("cd %s && python3 -c \"import os\nfor _ in range(20): os.mkdir('%s'); os.chdir('%s')\n"
                "open('deep', 'w').close()\"" % (d, name, name))
        w = self.watch(d)
        self.assertLess(w.directories, 21)
        self.sh("printf x > %s/shallow" % d)
        self.collect_until(w, K.CLOSED, "shallow")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class NamesTest(Base):
    def test_hostile_names_arrive_as_their_exact_bytes(self):
        d = self.fresh()
        w = self.watch(d)
        names = [b"line\nbreak", b"\x1b]52;c;aGk=\x07", b"caf\xe9", b"\xff\xfe", b"-rf", b" lead", b"*?[x]",
                 b"'quote\"", b"n" * 255]
        script = "import os\nfor n in %r: open(os.path.join(b'%s', n), 'wb').close()" % (names, d)
        self.sh(["python3", "-c", script])
        evs = self.collect(w, lambda evs: len([e for e in evs if e.kind == K.CLOSED]) == len(names), "every name")
        closed = [e for e in evs if e.kind == K.CLOSED]
        self.assertEqual(sorted(e.raw_path for e in closed), sorted(names))
        for e in closed:
            # Shown with each byte that is not UTF-8 escaped; the exact bytes in raw_path.
            self.assertEqual(e.path, e.raw_path.decode("utf-8", "backslashreplace"))

    def test_a_symlink_out_of_the_roots_is_refused(self):
        d = self.fresh()
        self.sh("cd %s && ln -s /etc etc && ln -s ../../../.. up && ln -s /tmp tmp && mkdir real && "
                "ln -s real inside" % d)
        for link in ("etc", "up"):
            with self.assertRaises(boxkite.PermissionDeniedError, msg=link):
                self.box.watch("%s/%s" % (d, link))
        # A symlink to another root is followed no more than out of it (a root is resolved beneath
        # itself only); one that stays inside its root is followed.
        with self.assertRaises(boxkite.PermissionDeniedError):
            self.box.watch("%s/tmp" % d)
        w = self.watch("%s/inside" % d)
        self.sh("printf x > %s/real/f" % d)
        self.collect_until(w, K.CLOSED, "f")

    def test_a_directory_swapped_for_a_symlink_is_not_followed(self):
        d = self.fresh()
        self.sh("mkdir -p %s/x /tmp/%s_out" % (d, d))
        self.addCleanup(self.sh, "rm -rf /tmp/%s_out" % d)
        w = self.watch(d)
        self.sh("rmdir %s/x && ln -s /tmp/%s_out %s/x" % (d, d, d))
        self.collect_until(w, K.CREATED, "x")
        self.sh("printf secret > /tmp/%s_out/f && printf x > %s/marker" % (d, d))
        evs = self.collect_until(w, K.CLOSED, "marker")
        self.assertFalse([e for e in evs if e.path.startswith("x/")], brief(evs))

    def test_what_is_not_a_directory_is_refused(self):
        d = self.fresh()
        self.sh("printf x > %s/file" % d)
        with self.assertRaises(boxkite.FailedPreconditionError):
            self.box.watch("%s/file" % d)
        with self.assertRaises(boxkite.NotFoundError):
            self.box.watch("%s/none" % d)
        with self.assertRaises(boxkite.InvalidArgumentError):
            self.box.watch("/etc")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class BurstTest(Base):
    def test_ten_thousand_files_overflow_counted_not_lost(self):
        d = self.fresh()
        w = self.watch(d)
        files = 20000  # a CREATED and a CLOSED each: 40 000 events, past both the watch's bound and the kernel's queue
        self.sh(["python3", "-c", "for i in range(%d): open('%s/f%%05d' %% i, 'w').close()" % (files, d)])
        kept, lost, unknown, overflows, sentinel = 0, 0, False, 0, None
        deadline = time.monotonic() + GUARD_S
        while True:
            self.assertLess(time.monotonic(), deadline, "kept %d, lost %d" % (kept, lost))
            evs = w.read(wait=1.0)
            for e in evs:
                if e.kind == K.OVERFLOW:
                    overflows += 1
                    unknown = unknown or e.lost == 0
                    lost += e.lost
                elif e.path == sentinel and e.kind == K.CLOSED:
                    sentinel = "seen"
                else:
                    self.assertRegex(e.path, r"^f\d{5}$")
                    self.assertIn(e.kind, (K.CREATED, K.CLOSED))
                    kept += 1
            if not unknown and kept + lost >= 2 * files:
                break
            if sentinel == "seen":
                break
            if unknown and not evs:
                # The kernel's queue overflowed too: what it lost is not counted. A change made
                # now, once nothing is waiting, marks where the burst's events end.
                sentinel = "sentinel%d" % overflows
                self.sh("printf x > %s/%s" % (d, sentinel))
        self.assertGreater(overflows, 0, "40 000 events and no overflow reported")
        if not unknown:
            self.assertEqual(kept + lost, 2 * files, "every event kept or counted")

    def test_memory_stays_bounded(self):
        # Writes alternating between two files (no two in a row alike, so none are folded) while
        # nobody reads: the front keeps its bound's worth and counts the rest, and the file
        # worker, which stops reading inotify while the front has not taken what it sent, holds
        # no more either.
        with open("/proc/%d/maps" % self.daemon.proc.pid) as f:
            if "libasan" in f.read():
                self.skipTest("SKIP: a sanitizer build: ASan keeps freed memory in its quarantine, so the "
                              "resident size says nothing of what is live")
        d = self.fresh()
        w = self.watch(d)
        worker = [p for p in boxkited_process.descendants(self.daemon.proc.pid) if _comm(p) == "bk-files"]
        self.assertEqual(len(worker), 1, "the daemon's file worker")
        front0, worker0 = rss_kib(self.daemon.proc.pid), rss_kib(worker[0])
        self.sh(["python3", "-c", "import os\na = os.open('%s/a', os.O_WRONLY | os.O_CREAT)\n"
                 "b = os.open('%s/b', os.O_WRONLY | os.O_CREAT)\n"
                 "for _ in range(200000): os.write(a, b'x'); os.write(b, b'y')" % (d, d)])
        # What arrived is in the watch now (a read from its start cursor would answer it): the
        # sizes are the ones to compare.
        evs = w.read(max_events=1)
        self.assertEqual(len(evs), 1)
        front1, worker1 = rss_kib(self.daemon.proc.pid), rss_kib(worker[0])
        # 400 000 events would take some 40 MiB kept; the bound, 4096 of them, some 0.5 MiB.
        self.assertLess(front1 - front0, 16 * 1024, "the front grew %d KiB" % (front1 - front0))
        self.assertLess(worker1 - worker0, 16 * 1024, "the file worker grew %d KiB" % (worker1 - worker0))
        evs = self.collect(w, lambda evs: any(e.kind == K.OVERFLOW for e in evs), "the overflow")


def _kill(process):
    try:
        process.kill()
    except boxkite.FailedPreconditionError:
        pass  # it ended


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class BoundsTest(Base):
    def test_watches_per_sandbox(self):
        d = self.fresh()
        watches = [self.watch(d) for _ in range(WATCHES_MAX)]
        with self.assertRaises(boxkite.ResourceExhaustedError) as cm:
            self.box.watch(d)
        self.assertIn("16 watches", str(cm.exception))
        watches[0].stop()
        self.assertEqual(watches[0].end, WatchEnd.STOPPED)
        self.watch(d)
        with self.assertRaises(boxkite.ResourceExhaustedError):
            self.box.watch(d)
        for w in watches:
            w.stop()

    def test_directories_per_sandbox(self):
        d = self.fresh()
        self.sh(["python3", "-c", "import os\nfor i in range(%d): os.mkdir('%s/%%d' %% i)" % (DIRS_MAX, d)])
        # The tree and its top: one directory too many, refused whole.
        with self.assertRaises(boxkite.ResourceExhaustedError) as cm:
            self.box.watch(d)
        self.assertIn("directories", str(cm.exception))
        # One fewer fits; the next one made ends the watch.
        self.sh("rmdir %s/0" % d)
        w = self.watch(d)
        self.assertEqual(w.directories, DIRS_MAX)
        self.sh("mkdir %s/0" % d)
        self.collect(w, lambda evs: False, "the end")
        self.assertEqual(w.end, WatchEnd.LIMIT)
        # Its descriptors came back: a watch of something small works.
        self.sh("rm -r %s && mkdir %s" % (d, d))
        w = self.watch(d)
        self.assertEqual(w.directories, 1)

    def test_a_read_answers_at_most_max_events(self):
        d = self.fresh()
        w = self.watch(d)
        self.sh("cd %s && for i in 1 2 3 4 5; do : > f$i; done" % d)
        # Read from the start's cursor until the last is there, which says nothing was received.
        start, deadline = w.cursor, time.monotonic() + GUARD_S
        while (K.CLOSED, "f5", "") not in brief(boxkite.Watch(self.box.channel, start).read(1.0)):
            self.assertLess(time.monotonic(), deadline, "the fifth file never came")
        self.assertEqual(len(boxkite.Watch(self.box.channel, start).read(max_events=3)), 3)
        with self.assertRaises(ValueError):
            w.read(max_events=1001)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class SessionTest(Base):
    def test_a_cursor_goes_on_from_another_client(self):
        d = self.fresh()
        w = self.watch(d)
        self.sh("printf x > %s/one" % d)
        self.collect_until(w, K.CLOSED, "one")
        self.sh("printf x > %s/two" % d)
        with self.daemon.client() as other:
            again = other.watch(cursor=w.cursor)
            evs = self.collect_until(again, K.CLOSED, "two")
            self.assertNotIn("one", [e.path for e in evs])

    def test_the_file_worker_restarting_expires_its_watches(self):
        d = self.fresh()
        w = self.watch(d)
        worker = [p for p in boxkited_process.descendants(self.daemon.proc.pid) if _comm(p) == "bk-files"]
        self.assertEqual(len(worker), 1)
        os.kill(worker[0], signal.SIGKILL)
        self.collect(w, lambda evs: False, "the end")
        self.assertEqual(w.end, WatchEnd.EXPIRED)
        # A new worker serves a new watch.
        deadline = time.monotonic() + GUARD_S
        while True:
            try:
                w2 = self.watch(d)
                break
            except boxkite.UnavailableError:
                self.assertLess(time.monotonic(), deadline, "no file worker came back")
                time.sleep(0.1)
        self.sh("printf x > %s/after" % d)
        self.collect_until(w2, K.CLOSED, "after")

    def test_the_file_worker_counts_its_watches_as_the_sandbox_does(self):
        # The kernel's per-user inotify limits: the file worker is in the sandbox's own user
        # namespace (exec/userns.h), so its watches are charged to this sandbox, never to every
        # sandbox's uid 1001 on the node — and the sandbox that spends them all has only itself
        # to thank.
        worker = [p for p in boxkited_process.descendants(self.daemon.proc.pid) if _comm(p) == "bk-files"]
        self.assertEqual(len(worker), 1)
        with open("/proc/sys/fs/inotify/max_user_instances") as f:
            limit = int(f.read())
        hog = self.box.start(["python3", "-c", "import ctypes, sys, time\nlibc = ctypes.CDLL(None)\n"
                              "fds = [libc.inotify_init1(0) for _ in range(%d)]\n"
                              "print(sum(1 for f in fds if f >= 0), flush=True)\ntime.sleep(600)" % limit])
        self.addCleanup(_kill, hog)
        self.assertEqual(int(hog.read(wait=GUARD_S).stdout.data), limit)
        sandboxed = [q for q in boxkited_process.descendants(self.daemon.proc.pid) if _comm(q) == "python3"]
        self.assertEqual(len(sandboxed), 1)
        self.assertEqual(os.readlink("/proc/%d/ns/user" % worker[0]), os.readlink("/proc/%d/ns/user" % sandboxed[0]))
        self.assertNotEqual(os.readlink("/proc/%d/ns/user" % worker[0]), os.readlink("/proc/self/ns/user"))
        with self.assertRaises(boxkite.ResourceExhaustedError) as cm:
            self.box.watch(self.fresh())
        self.assertIn("max_user_instances", str(cm.exception))
        hog.kill()
        hog.wait(GUARD_S)
        self.watch(".")

    def test_a_watch_nobody_reads_expires(self):
        # Its reader went away without a stop: a minute after its last answer the watch goes, and
        # its place with it (the worker told to drop it).
        d = self.fresh()
        ws = [self.box.watch(d) for _ in range(WATCHES_MAX)]
        with self.assertRaises(boxkite.ResourceExhaustedError):
            self.box.watch(d)
        time.sleep(IDLE_S + 2)  # the expiry itself is what is tested: no shorter wait shows it
        for w in ws:
            self.assertEqual(w.read(), [])
            self.assertEqual(w.end, WatchEnd.EXPIRED)
        self.watch(d)

    def test_stop_from_another_thread_ends_the_iteration(self):
        d = self.fresh()
        w = self.watch(d)
        threading.Timer(0.5, w.stop).start()
        self.assertEqual(list(w), [])
        self.assertEqual(w.end, WatchEnd.STOPPED)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class ResetTest(Base):
    def test_reset_ends_every_watch_and_its_cursors_say_so(self):
        self.sh("mkdir -p a && printf x > a/f")
        w = self.box.watch("a")
        waiting, done = [], threading.Event()

        def reader():
            waiting.extend(w.read(wait=GUARD_S))
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.5)
        self.box.reset()
        self.assertTrue(done.wait(GUARD_S))
        t.join()
        # Answered at once, with nothing of the wipe.
        self.assertEqual(waiting, [])
        self.assertEqual(w.end, WatchEnd.RESET)
        # A cursor of the session before: RESET again.
        old = self.box.watch(cursor=w.cursor)
        self.assertEqual(old.read(), [])
        self.assertEqual(old.end, WatchEnd.RESET)
        # The next tenant watches afresh, and sees only its own changes.
        w2 = self.box.watch(".")
        self.addCleanup(w2.stop)
        self.assertNotEqual(w2.cursor.split(".")[0], w.cursor.split(".")[0])
        self.sh("printf x > mine")
        evs = self.collect_until(w2, K.CLOSED, "mine")
        self.assertFalse([e for e in evs if e.path.startswith("a")], brief(evs))


if __name__ == "__main__":
    unittest.main()
