"""Operations: list (paged by name), stat of each file type, mkdir (-p), remove (recursive, with
a directory inside it that refuses), move (with and without overwrite), and errors that name the
path they are about. Each result is checked on the host side of the workspace too."""

import os
import stat as st_
import unittest

from fileskit import FilesTestCase, boxkite, pb, sha256, status_name

UID = 1001


class OperationsTest(FilesTestCase):

    def put(self, rel, data=b"", mode=0o644, uid=UID):
        p = self.host(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        os.chown(p, uid, uid)

    def read(self, rel):
        with open(self.host(rel), "rb") as f:
            return f.read()

    # --- list ------------------------------------------------------------------------------

    def test_list_of_long_names_and_targets_is_paged_by_size(self):
        # What the sandbox can make — 400 symlinks with 4000-byte targets and 255-byte names,
        # ~1.7 MB of strings — listed 1000 at a time: the pages shrink to what one answer of the
        # executor's channel holds, nothing is lost, and boxkited goes on serving.
        os.mkdir(self.host("long"))
        target = "t" * 4000
        names = sorted("%03d" % i + "n" * 252 for i in range(400))
        for n in names:
            os.symlink(target, self.host("long/" + n))
        entries, pages = self.fs.list_all("long", page_size=1000)
        self.assertEqual([e.path for e in entries], names)
        self.assertEqual({e.symlink_target for e in entries}, {target})
        self.assertGreater(len(pages), 1, "%d entries of 4 KiB in one page" % len(names))
        self.put("after.txt", b"still serving")
        self.assertEqual(self.fs.stat("after.txt").size, len(b"still serving"))

    def test_list_pages_by_name(self):
        os.mkdir(self.host("many"))
        names = ["f%04d" % i for i in range(2500)]
        names += ["with space", "\u00fcn\u00efc\u00f6d\u00e9", ".hidden", "-dash", "a" * 255, "UPPER", "tab\there",
                  "\u65e5\u672c"]
        for n in names:
            self.put("many/" + n, n.encode())
        os.mkdir(self.host("many/subdir"))
        os.symlink("f0001", self.host("many/link"))
        names += ["subdir", "link"]
        expect = sorted(names, key=lambda n: n.encode())  # strcmp order: bytes
        entries, pages = self.fs.list_all("many", page_size=1000)
        self.assertEqual(pages, [1000, 1000, len(names) - 2000])
        got = [e.path for e in entries]
        self.assertEqual(len(got), len(set(got)), "a name listed twice")
        self.assertEqual(got, expect)
        # The default page is 200; the largest is 1000.
        entries, pages = self.fs.list_all("many")
        self.assertEqual(pages, [200] * (len(names) // 200) + [len(names) % 200])
        self.assertEqual([e.path for e in entries], expect)
        e = self.assertStatus("INVALID_ARGUMENT", self.fs.list, "many", 1001)
        self.assertIn("1001", e.message)
        # Each entry is its lstat.
        by_name = {e.path: e for e in entries}
        for n in ("f0007", "subdir", "link", "a" * 255):
            s = os.lstat(self.host("many/" + n))
            e = by_name[n]
            self.assertEqual((e.size, e.mode, e.uid, e.gid, e.mtime_ns),
                             (s.st_size, st_.S_IMODE(s.st_mode), s.st_uid, s.st_gid, s.st_mtime_ns), n)
        self.assertEqual((by_name["link"].type, by_name["link"].symlink_target), (pb.FILE_TYPE_SYMLINK, "f0001"))
        self.assertEqual(by_name["subdir"].type, pb.FILE_TYPE_DIRECTORY)
        self.assertEqual(by_name["f0007"].type, pb.FILE_TYPE_REGULAR)
        # Entries removed and added between pages: nothing twice, the rest still in order.
        r1 = self.fs.list("many", 1000)
        for n in expect[900:1100]:
            p = self.host("many/" + n)
            if os.path.isdir(p) and not os.path.islink(p):
                os.rmdir(p)
            else:
                os.unlink(p)
        self.put("many/f0000a")  # sorts before the token: not seen again
        self.put("many/zzzz")    # after: seen
        r2 = self.fs.list("many", 1000, r1.next_page_token)
        rest = [e.path for e in r2.entries]
        r3 = self.fs.list("many", 1000, r2.next_page_token) if r2.next_page_token else None
        if r3:
            rest += [e.path for e in r3.entries]
        self.assertEqual(rest, sorted(expect[1100:] + ["zzzz"], key=lambda n: n.encode()))
        # Errors name the path.
        self.assertStatus("FAILED_PRECONDITION", self.fs.list, "many/f0001", path="/workspace/many/f0001")
        self.assertStatus("NOT_FOUND", self.fs.list, "nothing-here", path="/workspace/nothing-here")
        self.assertEqual(self.fs.list("/workspace").entries[0].path, "many")
        # A token is exactly what an answer gave: hex digits in pairs, no NUL byte.
        for bad in ("6", " f", "-1", "+f", "zz", "00", "6600", "x" * 514):
            with self.subTest(token=bad):
                e = self.assertStatus("INVALID_ARGUMENT", self.fs.list, "many", 10, bad)
                self.assertIn("page token", e.message)

    def test_names_that_are_not_utf8(self):
        # The sandboxed user may make any name. A name that is not UTF-8 may not break the
        # listing of its directory, nor an error about it, for clients whose protobuf library
        # checks that a string is UTF-8 (Python, Go, Java): they cannot decode such an answer.
        self.fs.exec("mkdir d && touch d/good1 d/good2 \"d/$(printf 'bad\\377name')\""
                     " && mkdir -p t/ro && touch \"t/ro/$(printf 'x\\376')\" && chmod 0555 t/ro")
        self.assertIn(b"bad\xffname", os.listdir(self.host("d").encode()))
        try:
            entries, _ = self.fs.list_all("d")
            listed = [e.path for e in entries]
        except boxkite.BoxkiteError as e:
            listed = "%s: %s" % (status_name(e.code), e.message)
        self.assertIsInstance(listed, list, "listing a directory with a non-UTF-8 name: %s" % listed)
        self.assertIn("good1", listed)
        self.assertIn("good2", listed)
        e = self.assertStatus("PERMISSION_DENIED", self.fs.remove, "t", recursive=True)
        self.assertIn("/workspace/t/ro/x", e.message)

    # --- stat ------------------------------------------------------------------------------

    def test_stat_of_each_type(self):
        self.fs.upload("file.txt", b"twelve bytes", mode=0o640)
        self.fs.mkdir("dir", mode=0o750)
        self.fs.exec("ln -s file.txt link && ln -s /etc/passwd abs && ln -s nowhere dangling && mkfifo fifo")
        want = {
            "file.txt": (pb.FILE_TYPE_REGULAR, 0o640, ""),
            "dir": (pb.FILE_TYPE_DIRECTORY, 0o750, ""),
            "link": (pb.FILE_TYPE_SYMLINK, 0o777, "file.txt"),
            "abs": (pb.FILE_TYPE_SYMLINK, 0o777, "/etc/passwd"),
            "dangling": (pb.FILE_TYPE_SYMLINK, 0o777, "nowhere"),
            "fifo": (pb.FILE_TYPE_OTHER, 0o644, ""),
        }
        for name, (ftype, mode, target) in want.items():
            with self.subTest(name=name):
                i = self.fs.stat(name)
                s = os.lstat(self.host(name))
                self.assertEqual((i.path, i.type, i.mode, i.symlink_target, i.uid, i.gid),
                                 ("/workspace/" + name, ftype, mode, target, UID, UID))
                self.assertEqual((i.mode, i.uid, i.gid, i.mtime_ns), (st_.S_IMODE(s.st_mode), s.st_uid, s.st_gid,
                                                                      s.st_mtime_ns))
                if ftype != pb.FILE_TYPE_DIRECTORY:
                    self.assertEqual(i.size, s.st_size)
                self.assertEqual(self.fs.stat("/workspace/" + name), i)
        self.assertEqual(self.fs.stat("file.txt").size, 12)
        # Roots themselves.
        ws = self.fs.stat("/workspace")
        self.assertEqual((ws.type, ws.uid, ws.path), (pb.FILE_TYPE_DIRECTORY, UID, "/workspace"))
        self.assertEqual(self.fs.stat("/tmp").type, pb.FILE_TYPE_DIRECTORY)
        self.assertEqual(self.fs.stat(".").path, "/workspace")
        # Download of what is not a regular file; stat of nothing.
        self.assertStatus("FAILED_PRECONDITION", self.fs.download, "dir", path="/workspace/dir")
        self.assertStatus("INVALID_ARGUMENT", self.fs.download, "fifo", path="/workspace/fifo")
        self.assertStatus("NOT_FOUND", self.fs.download, "dangling", path="/workspace/dangling")
        self.assertEqual(self.fs.download("link")[0], b"twelve bytes")
        self.assertStatus("NOT_FOUND", self.fs.stat, "missing", path="/workspace/missing")
        self.assertStatus("NOT_FOUND", self.fs.stat, "missing/deeper", path="/workspace/missing/deeper")
        self.assertStatus("FAILED_PRECONDITION", self.fs.stat, "file.txt/x", path="/workspace/file.txt/x")

    # --- mkdir -----------------------------------------------------------------------------

    def test_mkdir(self):
        self.fs.mkdir("a/b/c", parents=True)
        for rel in ("a", "a/b", "a/b/c"):
            s = os.stat(self.host(rel))
            self.assertEqual((st_.S_ISDIR(s.st_mode), s.st_uid, s.st_gid, st_.S_IMODE(s.st_mode)), (True, UID, UID,
                                                                                                    0o755), rel)
        self.fs.mkdir("a/b/c", parents=True)  # already there: fine with -p
        self.fs.mkdir("p/q", parents=True, mode=0o700)
        self.assertEqual(st_.S_IMODE(os.stat(self.host("p/q")).st_mode), 0o700)
        self.fs.mkdir("single", mode=0o711)
        self.assertEqual(st_.S_IMODE(os.stat(self.host("single")).st_mode), 0o711)
        self.assertStatus("ALREADY_EXISTS", self.fs.mkdir, "single", path="/workspace/single")
        self.assertStatus("NOT_FOUND", self.fs.mkdir, "x/y/z", path="/workspace/x/y/z")
        self.put("afile", b"x")
        self.assertStatus("ALREADY_EXISTS", self.fs.mkdir, "afile", path="/workspace/afile")
        self.assertStatus("FAILED_PRECONDITION", self.fs.mkdir, "afile", parents=True, path="/workspace/afile")
        self.assertStatus("FAILED_PRECONDITION", self.fs.mkdir, "afile/sub", parents=True, path="/workspace/afile/sub")
        self.assertStatus("FAILED_PRECONDITION", self.fs.mkdir, "afile/sub", path="/workspace/afile/sub")
        self.assertEqual(self.workspace_names(), ["a", "afile", "p", "single"])
        # Upload with make_parents makes the missing directories the same way.
        self.fs.upload("m/n/o.txt", b"o", make_parents=True)
        self.assertEqual((os.stat(self.host("m/n")).st_uid, self.read("m/n/o.txt")), (UID, b"o"))
        self.assertStatus("NOT_FOUND", self.fs.begin, "r/s/t.txt", 1, sha256(b"t"), path="/workspace/r/s/t.txt")
        # The roots themselves.
        self.fs.mkdir("/workspace", parents=True)
        self.assertStatus("FAILED_PRECONDITION", self.fs.mkdir, "/workspace", path="/workspace")

    # --- remove ----------------------------------------------------------------------------

    def test_remove(self):
        self.fs.exec("mkdir -p t/a/b t/ro/in && echo 1 > t/a/f1 && echo 2 > t/a/b/f2 && echo 3 > t/ro/in/f3"
                     " && echo 4 > t/ro/f4 && ln -s /etc t/etc && ln -s ../../outside t/out && chmod 0555 t/ro")
        before_etc = os.listdir("/etc")
        e = self.assertStatus("PERMISSION_DENIED", self.fs.remove, "t", recursive=True)
        # The message names the innermost entry that could not go, not just "t".
        self.assertRegex(e.message, r"/workspace/t/ro/(in|f4)\b")
        self.assertTrue(set(os.listdir(self.host("t/ro"))) & {"in", "f4"}, "the 0555 directory was emptied")
        self.assertEqual(os.listdir("/etc"), before_etc)
        self.assertNothingOutside()
        # Made writable again by its owner: it all goes; the count is of every entry.
        self.fs.exec("chmod 0755 t/ro")
        left = 1 + sum(len(d) + len(f) for _, d, f in os.walk(self.host("t")))
        self.assertEqual(self.fs.remove("t", recursive=True), left)
        self.assertFalse(os.path.lexists(self.host("t")))
        self.assertEtcUntouched()
        # A fresh tree: the count is exact.
        self.fs.exec("mkdir -p u/v/w && touch u/1 u/v/2 u/v/w/3 && ln -s 1 u/l")
        self.assertEqual(self.fs.remove("u", recursive=True), 7)
        # Without recursive: a file, an empty directory; a full one is refused.
        self.put("f", b"x")
        self.assertEqual(self.fs.remove("f"), 1)
        self.fs.mkdir("empty")
        self.assertEqual(self.fs.remove("empty"), 1)
        self.fs.mkdir("full/x", parents=True)
        self.assertStatus("FAILED_PRECONDITION", self.fs.remove, "full", path="/workspace/full")
        self.assertTrue(os.path.isdir(self.host("full/x")))
        self.assertStatus("NOT_FOUND", self.fs.remove, "missing", path="/workspace/missing")
        self.assertStatus("NOT_FOUND", self.fs.remove, "missing", recursive=True, path="/workspace/missing")
        e = self.assertStatus("FAILED_PRECONDITION", self.fs.remove, "/workspace", recursive=True, path="/workspace")
        self.assertIn("root", e.message)
        self.assertStatus("FAILED_PRECONDITION", self.fs.remove, "/tmp", recursive=True, path="/tmp")
        self.assertEqual(self.workspace_names(), ["full"])

    def make_deep(self, rel, depth, leaf=None):
        """rel/d/d/.../d, depth levels, the sandbox user's, made by descriptor (no path is that
        long); leaf(fd) makes what goes at the bottom."""
        os.mkdir(self.host(rel))
        os.chown(self.host(rel), UID, UID)
        fd = os.open(self.host(rel), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(depth):
                os.mkdir("d", dir_fd=fd)
                os.chown("d", UID, UID, dir_fd=fd, follow_symlinks=False)
                nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            if leaf:
                leaf(fd)
        finally:
            os.close(fd)

    def test_remove_a_tree_of_any_depth(self):
        # Deeper than any fixed limit and than PATH_MAX as one path: removed whole, with the
        # exact count. It failed at depth 256 with a bare PERMISSION_DENIED before.
        def bottom(fd):
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            os.chown("f", UID, UID, dir_fd=fd)
        self.make_deep("deep", 3000, bottom)
        self.assertEqual(self.fs.remove("deep", recursive=True), 3000 + 2)
        self.assertFalse(os.path.lexists(self.host("deep")))

        # What cannot go deep down is named by its path's end, and the rest stays.
        def read_only(fd):
            os.mkdir("ro", dir_fd=fd)
            os.close(os.open("ro/x", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            os.chown("ro/x", UID, UID, dir_fd=fd)
            os.chown("ro", UID, UID, dir_fd=fd)
            os.chmod("ro", 0o555, dir_fd=fd)
        self.make_deep("deep2", 400, read_only)
        e = self.assertStatus("PERMISSION_DENIED", self.fs.remove, "deep2", recursive=True)
        self.assertTrue(e.message.split(":")[0].endswith("/d/d/ro/x"), e.message)
        self.assertTrue(os.path.isdir(self.host("deep2/d")))

    # --- move ------------------------------------------------------------------------------

    def test_move(self):
        self.put("a", b"content a")
        self.put("b", b"content b")
        ino_a = os.stat(self.host("a")).st_ino
        self.fs.move("a", "c")
        self.assertEqual((self.read("c"), os.stat(self.host("c")).st_ino), (b"content a", ino_a))
        self.assertFalse(os.path.lexists(self.host("a")))
        # Onto an existing name: refused without overwrite (both intact), done with it.
        self.assertStatus("ALREADY_EXISTS", self.fs.move, "c", "b", path="/workspace/b")
        self.assertEqual((self.read("b"), self.read("c")), (b"content b", b"content a"))
        self.fs.move("c", "b", overwrite=True)
        self.assertEqual(self.read("b"), b"content a")
        self.assertEqual(self.workspace_names(), ["b"])
        # Directories, into directories, absolute paths.
        self.fs.mkdir("d1/inner", parents=True)
        self.fs.move("/workspace/b", "/workspace/d1/inner/b")
        self.fs.move("d1", "d2")
        self.assertEqual(self.read("d2/inner/b"), b"content a")
        # Errors, each naming the path it is about.
        self.assertStatus("NOT_FOUND", self.fs.move, "missing", "x", path="/workspace/missing")
        self.assertStatus("NOT_FOUND", self.fs.move, "d2/inner/b", "nodir/x", path="/workspace/nodir/x")
        self.put("f", b"f")
        self.assertStatus("FAILED_PRECONDITION", self.fs.move, "f", "d2", overwrite=True, path="/workspace/d2")
        self.assertStatus("INVALID_ARGUMENT", self.fs.move, "d2", "d2/inner/d2")
        self.fs.mkdir("full/x", parents=True)
        self.fs.mkdir("emptydir")
        self.assertStatus("FAILED_PRECONDITION", self.fs.move, "emptydir", "full", overwrite=True,
                          path="/workspace/full")
        self.assertStatus("FAILED_PRECONDITION", self.fs.move, "/workspace", "x", path="/workspace")
        self.assertStatus("INVALID_ARGUMENT", self.fs.move, "f", "../f")
        # Between roots (/workspace and /tmp are two filesystems): refused, nothing moved.
        # (EXDEV from rename(2) is mapped like a path escaping its root: PERMISSION_DENIED, with
        # a message blaming a symlink; see the report)
        self.assertStatus("PERMISSION_DENIED", self.fs.move, "f", "/tmp/f")
        self.assertTrue(os.path.exists(self.host("f")))
        self.assertEqual(self.fs.exec("test ! -e /tmp/f").exit_code, 0)
        self.assertEqual(self.workspace_names(), ["d2", "emptydir", "f", "full"])


if __name__ == "__main__":
    unittest.main()
