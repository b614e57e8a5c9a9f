"""Permissions: every file operation runs as the sandbox user (1001), not as root. Directories
the sandboxed user made writable or not, a file only root may read, the mode an upload asks for
(setuid and friends refused), and a read-only root (--root /usr:ro) that serves reads and refuses
every write."""

import os
import unittest

from fileskit import FilesTestCase, content_hash, pb, sha256

UID = 1001


class PermissionsTest(FilesTestCase):
    DAEMON_ARGS = ("--root", "/usr:ro")

    def put_bait(self):
        with open(self.host("bait"), "wb") as f:
            f.write(b"bait")
        os.chown(self.host("bait"), UID, UID)

    def read(self, rel):
        with open(self.host(rel), "rb") as f:
            return f.read()

    def test_upload_into_a_directory_the_user_made(self):
        self.fs.exec("mkdir -m 0755 wd")
        st = os.stat(self.host("wd"))
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777), (UID, UID, 0o755))
        for name, mode, expect in (("f640", 0o640, 0o640), ("fdefault", 0, 0o644), ("f777", 0o777, 0o777),
                                   ("f400", 0o400, 0o400), ("f000", 0o000, 0o644)):
            data = ("content of %s\n" % name).encode()
            info = self.fs.upload("wd/" + name, data, mode=mode)
            self.assertEqual((info.path, info.type, info.size, info.uid, info.gid, info.mode),
                             ("/workspace/wd/" + name, pb.FILE_TYPE_REGULAR, len(data), UID, UID, expect), name)
            st = os.lstat(self.host("wd/" + name))
            # the umask (022) does not apply: the mode is set on the file, not at its creation
            self.assertEqual((st.st_uid, st.st_gid, st.st_mode, st.st_nlink), (UID, UID, 0o100000 | expect, 1), name)
            self.assertEqual(self.read("wd/" + name), data)
            s = self.fs.stat("wd/" + name)
            self.assertEqual((s.uid, s.gid, s.mode, s.size, s.mtime_ns), (UID, UID, expect, len(data), st.st_mtime_ns))
        # Overwriting sets the new mode on the new content.
        self.fs.upload("wd/f640", b"again\n", mode=0o600, overwrite=True)
        self.assertEqual(os.stat(self.host("wd/f640")).st_mode & 0o7777, 0o600)
        self.assertEqual(self.read("wd/f640"), b"again\n")
        # The sandbox user sees it as its own.
        self.assertEqual(self.fs.exec("stat -c '%u:%g %a' wd/f640 && cat wd/f640").stdout, b"1001:1001 600\nagain\n")

    def test_setuid_setgid_sticky_modes_are_refused(self):
        for mode in (0o4755, 0o2755, 0o1777, 0o6777, 0o7777, 0o100644, 0o4000):
            e = self.assertStatus("INVALID_ARGUMENT", self.fs.begin, "suid", 1, sha256(b"x"), mode=mode)
            self.assertIn("permission bits only", e.message)
            e = self.assertStatus("INVALID_ARGUMENT", self.fs.mkdir, "suiddir", mode=mode)
            self.assertIn("permission bits only", e.message)
        self.assertEqual(self.workspace_names(), [])
        # The largest mode accepted is 0777, and that is what the file gets.
        self.fs.upload("x", b"x", mode=0o777)
        self.assertEqual(os.stat(self.host("x")).st_mode, 0o100777)

    def test_a_0555_directory_refuses_writes(self):
        self.fs.exec("mkdir ro && echo keep > ro/f && mkdir ro/sub && chmod 0555 ro")
        self.put_bait()
        fs = self.fs
        for what, fn, named in (
                ("upload", lambda: fs.begin("ro/g", 1, sha256(b"x")), "/workspace/ro/g"),
                ("upload over", lambda: fs.begin("ro/f", 1, sha256(b"x"), overwrite=True), "/workspace/ro/f"),
                ("upload parents", lambda: fs.begin("ro/new/g", 1, sha256(b"x"), make_parents=True),
                 "/workspace/ro/new/g"),
                ("mkdir", lambda: fs.mkdir("ro/x"), "/workspace/ro/x"),
                ("mkdir -p", lambda: fs.mkdir("ro/x/y", parents=True), "/workspace/ro/x/y"),
                ("remove", lambda: fs.remove("ro/f"), "/workspace/ro/f"),
                ("remove dir", lambda: fs.remove("ro/sub"), "/workspace/ro/sub"),
                ("remove -r", lambda: fs.remove("ro/sub", recursive=True), "/workspace/ro/sub"),
                # (the kernel does not say which side refused: the message must name the source,
                # whose directory is the one that refuses here, alone or with the destination)
                ("move out", lambda: fs.move("ro/f", "f2"), "/workspace/ro/f"),
                ("move in", lambda: fs.move("bait", "ro/bait"), "/workspace/ro/bait")):
            with self.subTest(op=what):
                self.assertStatus("PERMISSION_DENIED", fn, path=named)
        self.assertEqual(self.workspace_names("ro"), ["f", "sub"])
        self.assertEqual(self.read("ro/f"), b"keep\n")
        self.assertEqual(self.workspace_names(), ["bait", "ro"])
        self.assertEqual(fs.stat("ro").mode, 0o555)
        # Reading is fine.
        self.assertEqual(fs.download("ro/f")[0], b"keep\n")
        self.assertEqual([e.path for e in fs.list_all("ro")[0]], ["f", "sub"])

    def test_directory_made_read_only_before_commit(self):
        # The content arrived whole; the commit fails, the upload is kept, the user fixes the
        # directory and commits again.
        self.fs.exec("mkdir later")
        data = os.urandom(100000)
        b = self.fs.begin("later/x", len(data), sha256(data))
        self.fs.send(b.upload_id, data)
        self.fs.exec("chmod 0555 later")
        self.assertStatus("PERMISSION_DENIED", self.fs.commit, b.upload_id, content_hash(data),
                          path="/workspace/later/x")
        self.assertEqual(self.workspace_names("later"), [])
        self.fs.exec("chmod 0755 later")
        self.assertEqual(self.fs.commit(b.upload_id, content_hash(data)).size, len(data))
        self.assertEqual(self.read("later/x"), data)

    def test_a_file_only_root_may_read(self):
        secret = self.host("secret")
        with open(secret, "wb") as f:
            f.write(b"root only\n")
        os.chmod(secret, 0o600)
        self.assertEqual(os.stat(secret).st_uid, 0)
        self.assertStatus("PERMISSION_DENIED", self.fs.download, "secret", path="/workspace/secret")
        self.assertStatus("PERMISSION_DENIED", self.fs.download, "/workspace/secret", path="/workspace/secret")
        # Its metadata is visible, as to ls -l in the sandbox.
        s = self.fs.stat("secret")
        self.assertEqual((s.uid, s.gid, s.mode, s.size), (0, 0, 0o600, 10))
        r = self.fs.exec("cat secret", check=False)
        self.assertNotEqual(r.exit_code, 0)
        # A directory only root may enter.
        os.mkdir(self.host("rootdir"), 0o700)
        with open(self.host("rootdir/f"), "wb") as f:
            f.write(b"inside\n")
        os.chmod(self.host("rootdir/f"), 0o644)
        fs = self.fs
        for what, fn, named in (("list", lambda: fs.list("rootdir"), "/workspace/rootdir"),
                                ("download", lambda: fs.download("rootdir/f"), "/workspace/rootdir/f"),
                                ("stat", lambda: fs.stat("rootdir/f"), "/workspace/rootdir/f"),
                                ("upload", lambda: fs.begin("rootdir/g", 1, sha256(b"x")), "/workspace/rootdir/g"),
                                ("remove", lambda: fs.remove("rootdir/f"), "/workspace/rootdir/f"),
                                ("remove -r", lambda: fs.remove("rootdir", recursive=True), "/workspace/rootdir")):
            with self.subTest(op=what):
                self.assertStatus("PERMISSION_DENIED", fn, path=named)
        self.assertEqual(os.listdir(self.host("rootdir")), ["f"])
        self.assertEqual(self.read("rootdir/f"), b"inside\n")
        self.assertEqual(self.read("secret"), b"root only\n")

    def test_a_read_only_root(self):
        host_file = "/usr/lib/os-release"
        with open(host_file, "rb") as f:
            content = f.read()
        before = os.stat(host_file)
        # Reads work.
        data, digest, first = self.fs.download(host_file)
        self.assertEqual((data, digest), (content, content_hash(content)))
        s = self.fs.stat(host_file)
        self.assertEqual((s.path, s.type, s.size, s.uid), (host_file, pb.FILE_TYPE_REGULAR, len(content), 0))
        self.assertEqual(self.fs.stat("/usr").type, pb.FILE_TYPE_DIRECTORY)
        names = [e.path for e in self.fs.list_all("/usr/lib")[0]]
        self.assertIn("os-release", names)
        self.assertEqual(names, sorted(os.listdir("/usr/lib")))
        # Writes are refused, naming the path, before anything is tried.
        self.put_bait()
        fs = self.fs
        for what, fn, named in (
                ("upload", lambda: fs.begin("/usr/boxkite-planted", 1, sha256(b"x")), "/usr/boxkite-planted"),
                ("upload over", lambda: fs.begin(host_file, 1, sha256(b"x"), overwrite=True), host_file),
                ("upload parents", lambda: fs.begin("/usr/boxkite-dir/x", 1, sha256(b"x"), make_parents=True),
                 "/usr/boxkite-dir/x"),
                ("mkdir", lambda: fs.mkdir("/usr/boxkite-dir"), "/usr/boxkite-dir"),
                ("mkdir -p", lambda: fs.mkdir("/usr/boxkite-dir/a/b", parents=True), "/usr/boxkite-dir/a/b"),
                ("remove", lambda: fs.remove(host_file), host_file),
                ("remove -r", lambda: fs.remove("/usr/share/doc", recursive=True), "/usr/share/doc"),
                ("move out", lambda: fs.move(host_file, "stolen"), host_file),
                ("move in", lambda: fs.move("bait", "/usr/bait"), "/usr/bait"),
                ("move within", lambda: fs.move(host_file, "/usr/lib/os-release.moved"), host_file)):
            with self.subTest(op=what):
                e = self.assertStatus("PERMISSION_DENIED", fn, path=named)
                self.assertIn("Read-only file system", e.message)
        after = os.stat(host_file)
        self.assertEqual((after.st_ino, after.st_mtime_ns, after.st_size), (before.st_ino, before.st_mtime_ns,
                                                                            before.st_size))
        for p in ("/usr/boxkite-planted", "/usr/boxkite-dir", "/usr/bait", "/usr/lib/os-release.moved"):
            self.assertFalse(os.path.lexists(p), p)
        self.assertTrue(os.path.isdir("/usr/share/doc"))
        self.assertEqual(self.workspace_names(), ["bait"])
        # The sandbox's /tmp is a writable root: absolute paths work there.
        self.fs.upload("/tmp/up.txt", b"in tmp\n", mode=0o600)
        self.assertEqual(self.fs.exec("stat -c '%u %a' /tmp/up.txt && cat /tmp/up.txt").stdout, b"1001 600\nin tmp\n")
        self.fs.remove("/tmp/up.txt")


if __name__ == "__main__":
    unittest.main()
