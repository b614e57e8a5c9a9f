"""Traversal and escape: every file rpc given a path that leaves its root — lexically ('..',
absolute paths outside the roots), through symlinks the sandboxed user made (to /etc, absolute
inside the workspace, climbing out with '..', /proc magic links), through a symlink swapped in
and out while uploads run, and through hardlinks. Each is refused with its exact status and
nothing outside the workspace changes: /etc, the host directory next to the workspace, the
sandbox's /tmp.

The daemon also serves /proc (read-only) as a root, so that paths reaching a /proc magic link
beneath a root can be tried: RESOLVE_NO_MAGICLINKS must refuse them."""

import os
import threading
import time
import unittest

from fileskit import FilesTestCase, boxkite, content_hash, pb, sha256, status_name


class EscapeTest(FilesTestCase):
    DAEMON_ARGS = ("--root", "/proc:ro")

    # --- helpers ---------------------------------------------------------------------------

    def try_all(self, path, expect, ops=None, msg_path=None):
        """Every operation on path fails with status expect, each naming msg_path (default: path
        normalized by the server, i.e. as given when absolute, under /workspace otherwise)."""
        named = msg_path if msg_path is not None else (path if path.startswith("/") else "/workspace/" + path)
        fs = self.fs
        table = {
            "stat": lambda: fs.stat(path),
            "download": lambda: fs.download(path),
            "list": lambda: fs.list(path),
            "upload": lambda: fs.begin(path, 5, sha256(b"owned"), overwrite=True),
            "upload_parents": lambda: fs.begin(path, 5, sha256(b"owned"), overwrite=True, make_parents=True),
            "mkdir": lambda: fs.mkdir(path),
            "mkdir_parents": lambda: fs.mkdir(path, parents=True),
            "remove": lambda: fs.remove(path),
            "remove_recursive": lambda: fs.remove(path, recursive=True),
            "move_from": lambda: fs.move(path, "moved-here", overwrite=True),
            "move_to": lambda: fs.move("bait", path, overwrite=True),
        }
        if "move_to" in (ops or table):
            with open(self.host("bait"), "wb") as f:
                f.write(b"bait")
            os.chown(self.host("bait"), 1001, 1001)
        for name in ops or table:
            with self.subTest(op=name, path=path):
                self.assertStatus(expect, table[name], path=named)
        self.assertFalse(os.path.lexists(self.host("moved-here")))
        if "move_to" in (ops or table):
            with open(self.host("bait"), "rb") as f:
                self.assertEqual(f.read(), b"bait")

    def assertContained(self):
        self.assertEtcUntouched()
        self.assertNothingOutside()

    # --- lexical ---------------------------------------------------------------------------

    def test_dotdot_and_paths_outside_the_roots_are_invalid(self):
        for path in ("../x", "../../etc/passwd", "a/../../x", "a/..", "./../x", "/workspace/../etc/passwd",
                     "/tmp/../etc/passwd", "/etc/passwd", "/etc", "/", "//etc/passwd", "/workspacex/a",
                     "/tmpx", "/usr/bin/sh", "/root/.ssh/id_rsa"):
            self.try_all(path, "INVALID_ARGUMENT", msg_path=path)
        for name in ("stat", "download", "list", "upload", "mkdir", "remove", "move_from", "move_to"):
            self.try_all("", "INVALID_ARGUMENT", ops=[name], msg_path="empty path")
        self.assertEqual(self.workspace_names(), ["bait"])
        self.assertContained()

    def test_path_with_a_nul_byte_is_invalid(self):
        # A C string ends at the NUL: "x\0/../../etc/passwd" must not silently become "x" (the
        # request names one path, the server works on another, and the '..' check is skipped).
        fs, answers = self.fs, {}
        for path in ("x\x00/../../etc/passwd", "x\x00"):
            for op, fn in (("mkdir", lambda: fs.mkdir(path)), ("stat", lambda: fs.stat(path)),
                           ("upload", lambda: fs.begin(path, 1, sha256(b"x"))), ("remove", lambda: fs.remove(path))):
                try:
                    fn()
                    answers[path, op] = "OK"
                except boxkite.BoxkiteError as e:
                    answers[path, op] = status_name(e.code)
        self.assertEqual(answers, {k: "INVALID_ARGUMENT" for k in answers})
        self.assertContained()

    # --- symlinks made by the sandboxed user -----------------------------------------------

    def test_symlink_to_etc(self):
        self.fs.exec("ln -s /etc /workspace/l && ln -s /etc/passwd /workspace/pw && echo bait > /workspace/bait")
        info = self.fs.stat("l")
        self.assertEqual((info.type, info.symlink_target, info.path), (pb.FILE_TYPE_SYMLINK, "/etc", "/workspace/l"))
        for path in ("l/hostname", "l/passwd", "l/boxkite-planted", "l/boxkite-dir/sub", "pw"):
            ops = [op for op in ("stat", "download", "list", "upload", "upload_parents", "mkdir", "mkdir_parents",
                                 "remove", "remove_recursive", "move_from", "move_to")
                   # the symlink itself (pw) may be stat'ed, removed and replaced: it is in the workspace
                   if path != "pw" or op in ("download", "list")]
            self.try_all(path, "PERMISSION_DENIED", ops=ops,
                         msg_path="/workspace/" + path.rstrip("/"))
        # Replacing the symlink replaces the name, never what it points to.
        for name in ("pw", "l"):
            self.assertStatus("ALREADY_EXISTS", self.fs.begin, name, 4, sha256(b"new\n"), path="/workspace/" + name)
            info = self.fs.upload(name, b"new\n", overwrite=True)
            self.assertEqual(info.path, "/workspace/" + name)
            self.assertFalse(os.path.islink(self.host(name)))
            with open(self.host(name), "rb") as f:
                self.assertEqual(f.read(), b"new\n")
        # Removing a symlink to a directory removes the link, not the directory's content.
        self.fs.exec("ln -s /etc /workspace/l2 && mkdir t && ln -s /etc t/etc && ln -s ../../.. t/up")
        self.assertEqual(self.fs.remove("l2", recursive=True), 1)
        self.assertEqual(self.fs.remove("t", recursive=True), 3)
        self.assertFalse(os.path.lexists(self.host("l2")) or os.path.lexists(self.host("t")))
        self.assertContained()

    def test_absolute_symlink_inside_the_workspace(self):
        # RESOLVE_BENEATH refuses every absolute symlink, even one naming a place inside the root:
        # the kernel cannot tell what "/" means to the sandbox. A relative one that stays inside works.
        self.fs.exec("mkdir sub && echo inside > sub/f && ln -s /workspace/sub abs && ln -s /workspace/sub/f absf"
                     " && ln -s sub rel && ln -s /tmp tmp && mkdir -p /tmp/t && echo t > /tmp/t/f")
        for path in ("abs/f", "abs/new", "absf", "tmp/t/f", "tmp/t/new"):
            self.try_all(path, "PERMISSION_DENIED",
                         ops=["stat", "download", "upload", "mkdir", "remove", "move_from", "move_to"]
                         if "/" in path else ["download", "list"])
        self.assertEqual(self.fs.download("rel/f")[0], b"inside\n")
        self.fs.upload("rel/new", b"through a relative link\n")
        with open(self.host("sub/new"), "rb") as f:
            self.assertEqual(f.read(), b"through a relative link\n")
        self.assertEqual(self.fs.exec("cat /tmp/t/f; ls /tmp/t").stdout, b"t\nf\n")
        self.assertEqual(self.fs.download("/tmp/t/f")[0], b"t\n")
        self.assertContained()

    def test_relative_symlink_climbing_out(self):
        # On the host, <tmp>/workspace/out -> ../outside is the directory next to the workspace:
        # a resolver that walked the host's tree instead of staying beneath the root would land there.
        with open(os.path.join(self.outside, "secret"), "wb") as f:
            f.write(b"host secret\n")
        os.chmod(os.path.join(self.outside, "secret"), 0o644)
        self.fs.exec("ln -s ../../.. up && ln -s ../outside out && ln -s ../workspace/sub back && mkdir sub"
                     " && mkdir deep && ln -s ../../../../../../etc deep/etc")
        for path in ("up/etc/hostname", "up/planted", "out/secret", "out/planted", "back/x", "deep/etc/hostname",
                     "deep/etc/planted"):
            # (mkdir -p and upload's make_parents through "out": test_make_parents_does_not_probe...)
            parents = [] if path.startswith("out/") else ["upload_parents", "mkdir_parents"]
            self.try_all(path, "PERMISSION_DENIED",
                         ops=["stat", "download", "upload", "mkdir", "remove", "move_from", "move_to"] + parents)
        self.try_all("out", "PERMISSION_DENIED", ops=["download", "list"])
        self.assertEqual(os.listdir(self.outside), ["secret"])
        with open(os.path.join(self.outside, "secret"), "rb") as f:
            self.assertEqual(f.read(), b"host secret\n")
        os.unlink(os.path.join(self.outside, "secret"))
        self.assertContained()

    def test_proc_magic_links(self):
        # Symlinks in the workspace to /proc magic links: absolute (and climbing) -> refused.
        self.fs.exec("ln -s /proc/self/root pr && ln -s /proc/1/root p1 && ln -s /proc/self/cwd pc"
                     " && ln -s ../proc/1/root rp1 && ln -s /proc/self/fd/0 fd0")
        for path in ("pr/etc/hostname", "p1/etc/hostname", "pc/x", "rp1/etc/passwd", "pr/workspace/x"):
            self.try_all(path, "PERMISSION_DENIED", ops=["stat", "download", "upload", "mkdir", "remove",
                                                         "move_from", "move_to"])
        self.try_all("fd0", "PERMISSION_DENIED", ops=["download"])
        # Beneath a root (/proc, served read-only here), a magic link is reached without leaving
        # it: refused, naming the path — by RESOLVE_NO_MAGICLINKS (ELOOP), or before it by the
        # kernel: the file worker is in the sandbox's user namespace, and pid 1 (the sandbox's
        # init) is not, so its /proc links are not the worker's to follow (EACCES).
        for path, ops in (("/proc/1/root/etc/hostname", ["stat", "download", "list"]),
                          ("/proc/1/root/workspace", ["stat", "download", "list"]),
                          ("/proc/1/cwd/x", ["stat", "download", "list"]),
                          ("/proc/1/root", ["download", "list"]),
                          ("/proc/1/cwd", ["download", "list"]),
                          ("/proc/1/exe", ["download"]),
                          ("/proc/1/fd/0", ["download"])):
            self.try_all(path, "PERMISSION_DENIED", ops=ops)
            e = self.assertStatus("PERMISSION_DENIED", self.fs.download, path)
            self.assertRegex(e.message, "magic link|Permission denied")
            self.assertIn(path, e.message)
        # The magic link itself may be lstat'ed: that reveals a symlink, nothing behind it.
        self.assertEqual(self.fs.stat("/proc/1/root").type, pb.FILE_TYPE_SYMLINK)
        # /proc/self is the executor, which is not in the sandbox's PID namespace: no such entry.
        self.assertStatus("NOT_FOUND", self.fs.download, "/proc/self/root/etc/hostname",
                          path="/proc/self/root/etc/hostname")
        # And /proc is read-only through the rpcs.
        self.assertStatus("PERMISSION_DENIED", self.fs.begin, "/proc/1/root/workspace/x", 1, sha256(b"x"),
                          path="/proc/1/root/workspace/x")
        self.assertEqual(sorted(n for n in self.workspace_names() if not os.path.islink(self.host(n))), ["bait"])
        self.assertContained()

    def test_make_parents_does_not_probe_the_hosts_tree(self):
        # mkdir -p (and upload's make_parents) through an escaping symlink must be refused before
        # anything behind the symlink is looked at: the answer may not depend on what is there.
        # /root exists on the host and is hidden from the sandbox (whose /run is its own, for the
        # egress CA); /boxkite-nonexistent exists nowhere; /etc/hostname is a file; ../outside
        # climbs out of the workspace mount.
        self.assertTrue(os.path.isdir("/root"))
        self.assertFalse(os.path.exists("/boxkite-nonexistent"))
        links = {"hostdir": "/root", "nothing": "/boxkite-nonexistent", "hostfile": "/etc/hostname",
                 "climb": "../outside", "climbroot": "../../.."}
        self.fs.exec(" && ".join("ln -s %s %s" % (t, n) for n, t in links.items()) + " && test ! -e /root")
        answers = {}
        for link in links:
            for op in ("mkdir_parents", "upload_parents"):
                try:
                    if op == "mkdir_parents":
                        self.fs.mkdir(link + "/x", parents=True)
                    else:
                        self.fs.begin(link + "/x/y", 1, sha256(b"x"), make_parents=True)
                    answers[link, op] = "OK"
                except boxkite.BoxkiteError as e:
                    answers[link, op] = status_name(e.code)
        self.assertEqual(answers, {(link, op): "PERMISSION_DENIED"
                                   for link in links for op in ("mkdir_parents", "upload_parents")},
                         "the answer through an escaping symlink tells what is behind it")
        self.assertContained()

    # --- a symlink swapped in and out while uploads run ------------------------------------

    # Run by the sandbox's own python3 (the host's /usr, read-only): plain rename/symlink
    # syscalls, so a state lasts microseconds to a millisecond, not the ~20 ms of a fork+exec of
    # mv or ln. The states of d: a real directory; a symlink to /etc; to ../outside and to the
    # absolute host path of outside (the host directory next to the workspace); to /tmp (another
    # root); climbing with ../..; to a /proc magic link; missing.
    SWAP_SCRIPT = r"""
import os, random, sys, time
os.chdir("/workspace")
os.makedirs("/tmp/race-target", exist_ok=True)
targets = ["/etc", "../outside", sys.argv[1], "/tmp/race-target", "../../../../../../etc", "/proc/1/root/etc"]
rnd = random.Random(1)
holds = (0, 0, 0.0001, 0.0005)

def quiet(fn, *args):
    try:
        fn(*args)
        return True
    except OSError:
        return False

i = 0
while not os.path.exists("stop") and i < 10000000:
    i += 1
    quiet(os.rename, "d", "real")
    for t in targets:
        # ln -sfn: a new symlink renamed over the old one, so d is never missing in between
        if quiet(os.symlink, t, "d.new") and not quiet(os.rename, "d.new", "d"):
            quiet(os.unlink, "d.new")
        time.sleep(rnd.choice(holds))
    if os.path.islink("d"):
        quiet(os.unlink, "d")
    time.sleep(rnd.choice(holds))
    if not quiet(os.rename, "real", "d") and os.path.isdir("d") and not os.path.islink("d"):
        # an upload with make_parents made d while it was missing: fold it back (not the
        # executor's transient .boxkite-upload-* names: those it renames itself a moment later)
        for name in os.listdir("d"):
            if not name.startswith("."):
                quiet(os.rename, "d/" + name, "real/" + name)
        quiet(os.rmdir, "d") and quiet(os.rename, "real", "d")
    time.sleep(rnd.choice(holds) * 4)
print(i)
"""

    def test_symlink_swapped_while_uploads_run(self):
        os.makedirs(self.host("d"))
        os.chown(self.host("d"), 1001, 1001)
        duration = 6.0
        swapper_out = {}

        def swapper():
            fs = self.files()
            try:
                swapper_out["r"] = fs.call("Exec", argv=["/usr/bin/python3", "-c", self.SWAP_SCRIPT, self.outside],
                                           timeout_ms=60000)
            except BaseException as e:  # reported by the main thread
                swapper_out["e"] = e

        results = []  # (name, data, outcome)
        lock = threading.Lock()
        stop = threading.Event()

        def uploader(t):
            fs = self.files()
            n = 0
            while not stop.is_set():
                n += 1
                name = "race-%d-%d" % (t, n)
                data = (name + "\n").encode() * (1 + n % 7)
                try:
                    try:
                        b = fs.begin("d/" + name, len(data), sha256(data), mode=0o640, overwrite=(n % 2 == 0),
                                     make_parents=(t == 0))
                    except boxkite.BoxkiteError as e:
                        outcome = "begin:" + status_name(e.code)
                    else:
                        fs.send(b.upload_id, data, chunk=max(1, len(data) // 2))
                        try:
                            fs.commit(b.upload_id, content_hash(data))
                            outcome = "OK"
                        except boxkite.BoxkiteError as e:
                            outcome = "commit:" + status_name(e.code)
                            fs.abort(b.upload_id)  # a failed commit keeps the upload: drop it
                except BaseException as e:  # anything else is a failure the main thread reports
                    outcome = "exception:%s" % e
                with lock:
                    results.append((name, data, outcome))

        sw = threading.Thread(target=swapper, daemon=True)
        sw.start()
        time.sleep(0.2)
        ups = [threading.Thread(target=uploader, args=(t,), daemon=True) for t in range(4)]
        for u in ups:
            u.start()
        time.sleep(duration)
        stop.set()
        for u in ups:
            u.join(60)
        with open(self.host("stop"), "w"):
            pass
        sw.join(60)
        if "e" in swapper_out:
            raise swapper_out["e"]
        r = swapper_out["r"]
        self.assertEqual((r.exit_code, r.signal, r.timed_out), (0, 0, False), r.stderr.decode(errors="replace"))
        iterations = int(r.stdout.split()[-1])

        outcomes = {}
        for _, _, o in results:
            outcomes[o] = outcomes.get(o, 0) + 1
        print("\n    swap race: %d swap cycles, %d uploads: %s" % (
            iterations, len(results), ", ".join("%s %d" % kv for kv in sorted(outcomes.items()))))
        allowed = {"OK", "begin:PERMISSION_DENIED", "begin:NOT_FOUND", "commit:PERMISSION_DENIED",
                   "commit:NOT_FOUND"}
        self.assertLessEqual(set(outcomes), allowed, "unexpected outcomes")
        self.assertGreater(outcomes.get("OK", 0), 0, "no upload landed: the race was not exercised")
        self.assertGreater(outcomes.get("begin:PERMISSION_DENIED", 0) + outcomes.get("commit:PERMISSION_DENIED", 0),
                           0, "no upload met the symlink: the race was not exercised")
        self.assertGreater(iterations, 100)

        # Every landed upload is in the workspace, whole; no failed one left anything.
        landed = {}
        for top, dirs, files in os.walk(self.ws):
            for f in files:
                p = os.path.join(top, f)
                if f.startswith("race-") and not os.path.islink(p):
                    self.assertNotIn(f, landed, "%s is there twice" % f)
                    landed[f] = p
            self.assertFalse([f for f in files if f.startswith(".boxkite-upload")], "a temp name was left")
        ok = {name: data for name, data, o in results if o == "OK"}
        self.assertEqual(set(landed), set(ok), "landed files differ from the successful uploads")
        for name, p in landed.items():
            st = os.lstat(p)
            self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777), (1001, 1001, 0o640), name)
            with open(p, "rb") as f:
                self.assertEqual(f.read(), ok[name], name)
        self.assertEqual(self.fs.exec("ls -A /tmp/race-target").stdout, b"")
        self.assertContained()

    # --- hardlinks -------------------------------------------------------------------------

    def test_hardlinks(self):
        # Across mounts (the sandbox's /etc is another mount than /workspace): EXDEV.
        r = self.fs.exec("ln /etc/hostname /workspace/h", check=False)
        self.assertNotEqual(r.exit_code, 0, "a hardlink to the host's /etc/hostname was made in the workspace")
        self.assertIn(b"Invalid cross-device link", r.stderr)
        self.assertFalse(os.path.lexists(self.host("h")))
        # A file of another user in the workspace: protected_hardlinks stops the sandbox user...
        victim = self.host("victim")
        with open(victim, "wb") as f:
            f.write(b"another user's content\n")
        os.chown(victim, 2000, 2000)
        os.chmod(victim, 0o644)
        r = self.fs.exec("ln victim h", check=False)
        with open("/proc/sys/fs/protected_hardlinks") as f:
            protected = f.read().strip() == "1"
        if protected:
            self.assertNotEqual(r.exit_code, 0, "protected_hardlinks is on, yet 1001 linked 2000's file")
        if not os.path.exists(self.host("h")):
            os.link(victim, self.host("h"))  # ... so root makes the link, as if it had been there
        self.assertEqual(os.stat(victim).st_nlink, 2)
        before = os.stat(victim)
        # Without overwrite: the name is taken.
        self.assertStatus("ALREADY_EXISTS", self.fs.begin, "h", 4, sha256(b"new\n"), path="/workspace/h")
        # Uploading over the link replaces the directory entry; the other inode keeps its content.
        info = self.fs.upload("h", b"new\n", overwrite=True, mode=0o600)
        self.assertEqual((info.uid, info.gid, info.size), (1001, 1001, 4))
        after = os.stat(victim)
        self.assertEqual((after.st_ino, after.st_uid, after.st_mode, after.st_size, after.st_mtime_ns, after.st_nlink),
                         (before.st_ino, 2000, before.st_mode, before.st_size, before.st_mtime_ns, 1))
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"another user's content\n")
        st = os.stat(self.host("h"))
        self.assertNotEqual(st.st_ino, before.st_ino)
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777, st.st_nlink), (1001, 1001, 0o600, 1))
        with open(self.host("h"), "rb") as f:
            self.assertEqual(f.read(), b"new\n")
        self.assertContained()


if __name__ == "__main__":
    unittest.main()
