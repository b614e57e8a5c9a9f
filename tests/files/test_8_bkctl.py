"""bkctl cp end to end: libboxkite's uploads (chunks sent from two threads at once, or the whole
file in its FileUploadBegin when it fits one block) and downloads (chunks fetched ahead), through the real bkctl
against the real boxkited. Each copy is checked byte for byte on the host side of the
workspace and again after the trip back; refusals leave the workspace as it was.

BOXKITE_BKCTL names the bkctl to drive (make test-san passes the ASan+UBSan build's, against
the plain daemon); by default the one beside the daemon."""

import filecmp
import json
import os
import subprocess
import tempfile
import time

from fileskit import CHUNK_MAX, FilesTestCase, file_sha256, sha256
import boxkited_process

BKCTL = os.environ.get("BOXKITE_BKCTL", boxkited_process.BKCTL)
UID = 1001


class BkctlCpTest(FilesTestCase):

    def setUp(self):
        super().setUp()
        if not os.access(BKCTL, os.X_OK):
            self.skipTest("SKIP: %s is not built" % BKCTL)
        self.local = tempfile.mkdtemp(prefix="boxkite-bkctl-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.local], check=True)

    def bkctl(self, *args, ok=True):
        r = subprocess.run([BKCTL, "--url", "tcp://127.0.0.1:%d" % self.daemon.port, "--key-file",
                            self.daemon.key_file, "--timeout", "60"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        # A sanitizer's report is a failure even when bkctl exits 0.
        self.assertNotIn(b"Sanitizer", r.stderr, r.stderr.decode(errors="replace"))
        if ok:
            self.assertEqual(r.returncode, 0, "bkctl %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
        return r

    def local_file(self, name, data):
        path = os.path.join(self.local, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def assertHostFile(self, rel, data):
        st = os.lstat(self.host(rel))
        self.assertEqual((st.st_uid, st.st_gid), (UID, UID), rel)
        self.assertEqual(st.st_size, len(data), rel)
        self.assertEqual(file_sha256(self.host(rel)), sha256(data), rel)

    def test_files_of_every_size_up_and_back(self):
        # Empty, one byte, exactly one chunk (sent whole in its Begin), one chunk and a byte, and several
        # chunks with a short tail (the two sending threads, and downloads fetched ahead).
        sizes = (0, 1, CHUNK_MAX, CHUNK_MAX + 1, 3 * CHUNK_MAX + 12345)
        for size in sizes:
            for compress in ((), ("-z",)):
                with self.subTest(size=size, compress=compress):
                    data = os.urandom(size)
                    name = "f%d%s.bin" % (size, "z" if compress else "")
                    src = self.local_file(name, data)
                    r = self.bkctl("cp", "-o", "json", *compress, src, ":in/" + name)
                    summary = json.loads(r.stdout)
                    self.assertEqual((summary["files"], summary["bytes"], summary["errors"]), (1, size, []))
                    self.assertHostFile("in/" + name, data)
                    back = os.path.join(self.local, "back-" + name)
                    self.bkctl("cp", *compress, ":in/" + name, back)
                    with open(back, "rb") as f:
                        self.assertEqual(sha256(f.read()), sha256(data))
        self.assertEqual(sorted(os.listdir(self.host("in"))),
                         sorted("f%d%s.bin" % (s, z) for s in sizes for z in ("", "z")),
                         "something besides the copies landed (a temp file left behind?)")

    def test_a_file_of_one_block_goes_in_one_request(self):
        # PROTOCOL.md, "A file in one request": FileUploadBegin with the content, nothing else —
        # plain, compressed (-z on text that compresses), and with the plain SHA-256 checked.
        text = b"the same line again\n" * 4000
        cases = (("plain.bin", os.urandom(5000), ()), ("text.txt", text, ("-z",)), ("sha.bin", os.urandom(7000),
                                                                                    ("--sha256",)))
        for name, data, opts in cases:
            with self.subTest(name):
                before = len(self.daemon.log())
                self.bkctl("cp", *opts, self.local_file(name, data), ":one/" + name)
                self.assertHostFile("one/" + name, data)
                # boxkited writes a call's log line once it has answered: wait for the Begin's.
                deadline = time.monotonic() + 10
                while True:
                    calls = [json.loads(line).get("method") for line in self.daemon.log()[before:].splitlines()
                             if line.startswith("{")]
                    uploads = [m for m in calls if m and m.startswith("FileUpload")]
                    if uploads or time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
                self.assertEqual(uploads, ["FileUploadBegin"], calls)

    def test_sha256_on_request_both_ways(self):
        # --sha256: the plain SHA-256 computed on each side (one more pass each) and checked, then
        # printed as sha256sum prints it, so that sha256sum -c checks the local side too.
        data = os.urandom(2 * CHUNK_MAX + 5)
        src = self.local_file("s.bin", data)
        r = self.bkctl("cp", "--sha256", src, ":s.bin")
        self.assertIn(("%s  %s\n" % (sha256(data).hex(), src)).encode(), r.stdout)
        self.assertHostFile("s.bin", data)
        back = os.path.join(self.local, "s-back.bin")
        r = self.bkctl("-o", "json", "cp", "--sha256", ":s.bin", back)
        self.assertEqual(json.loads(r.stdout)["sha256"], [{"path": back, "sha256": sha256(data).hex()}])
        check = subprocess.run(["sha256sum", "-c"], input=("%s  %s\n" % (sha256(data).hex(), back)).encode(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # Without it: no SHA-256 pass, none printed.
        r = self.bkctl("-o", "json", "cp", src, ":t.bin")
        self.assertNotIn("sha256", json.loads(r.stdout))

    def test_a_tree_up_and_back(self):
        files = {"a.txt": b"alpha\n", "sub/b.bin": os.urandom(5000), "sub/deeper/c": b"",
                 "big.bin": os.urandom(2 * CHUNK_MAX + 7)}
        files.update({"many/%03d" % i: b"%d\n" % i for i in range(200)})
        for rel, data in files.items():
            self.local_file(os.path.join("tree", rel), data)
        # Symlinks as symlinks (a venv's bin/python, node_modules/.bin): beside, below, above.
        links = {"link": "a.txt", "sub/up": "../a.txt", "sub/deeper/dir": "..", "dangling": "no-such-file"}
        for rel, target in links.items():
            os.symlink(target, os.path.join(self.local, "tree", rel))
        r = self.bkctl("cp", "-r", "-o", "json", os.path.join(self.local, "tree"), ":")
        summary = json.loads(r.stdout)
        self.assertEqual(summary["files"], len(files))
        self.assertEqual(summary["bytes"], sum(len(d) for d in files.values()))
        self.assertEqual((summary["symlinks"], summary["skipped"], summary["errors"]), (len(links), [], []), summary)
        for rel, data in files.items():
            self.assertHostFile(os.path.join("tree", rel), data)
        for rel, target in links.items():
            host = self.host(os.path.join("tree", rel))
            self.assertTrue(os.path.islink(host), rel)
            self.assertEqual(os.readlink(host), target, rel)
            st = os.lstat(host)
            self.assertEqual((st.st_uid, st.st_gid), (UID, UID), rel)
        back = os.path.join(self.local, "back")
        os.mkdir(back)
        r = self.bkctl("cp", "-r", "-o", "json", ":tree", back)
        self.assertEqual(json.loads(r.stdout)["symlinks"], len(links))
        cmp = filecmp.dircmp(os.path.join(self.local, "tree"), os.path.join(back, "tree"), ignore=list(links))
        self.assertEqual((cmp.left_only, cmp.right_only, cmp.diff_files), ([], [], []))
        for rel, data in files.items():
            with open(os.path.join(back, "tree", rel), "rb") as f:
                self.assertEqual(f.read(), data, rel)
        for rel, target in links.items():
            self.assertEqual(os.readlink(os.path.join(back, "tree", rel)), target, rel)

    def test_symlinks_that_leave_the_workspace_are_refused(self):
        tree = os.path.join(self.local, "out")
        os.makedirs(os.path.join(tree, "a"))
        self.local_file("out/a/f", b"f")
        for name, target in (("etc", "/etc/passwd"), ("a/climb", "../../../x"), ("tmp", "/tmp"),
                             ("a/sneak", "../a/../../../y"), ("ws", "/workspace/../etc")):
            os.symlink(target, os.path.join(tree, name))
        os.symlink("/workspace/out/a/f", os.path.join(tree, "inside"))
        r = self.bkctl("cp", "-r", "-o", "json", tree, ":", ok=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        summary = json.loads(r.stdout)
        self.assertEqual((summary["files"], summary["symlinks"]), (1, 1), summary)
        refused = sorted(os.path.relpath(e["path"], tree) for e in summary["errors"])
        self.assertEqual(refused, ["a/climb", "a/sneak", "etc", "tmp", "ws"], summary)
        for e in summary["errors"]:
            self.assertEqual(e["status"], "PERMISSION_DENIED", e)
            self.assertIn("leads out of /workspace", e["message"], e)
        self.assertEqual(sorted(os.listdir(self.host("out"))), ["a", "inside"])
        self.assertEqual(os.listdir(self.host("out/a")), ["f"])
        self.assertEqual(os.readlink(self.host("out/inside")), "/workspace/out/a/f")

    def test_a_symlink_replaces_a_file_unless_no_clobber(self):
        tree = os.path.join(self.local, "t")
        os.makedirs(tree)
        os.symlink("target", os.path.join(tree, "x"))
        os.makedirs(self.host("t"), exist_ok=True)
        with open(self.host("t/x"), "w") as f:
            f.write("old")
        os.chown(self.host("t"), UID, UID)
        os.chown(self.host("t/x"), UID, UID)
        r = self.bkctl("cp", "-r", "-n", tree, ":", ok=False)
        self.assertIn(b"ALREADY_EXISTS", r.stderr)
        self.assertFalse(os.path.islink(self.host("t/x")))
        self.bkctl("cp", "-r", tree, ":")
        self.assertEqual(os.readlink(self.host("t/x")), "target")

    def test_refusals_leave_the_workspace_as_it_was(self):
        old = os.urandom(1000)
        self.local_file("old", old)
        self.bkctl("cp", os.path.join(self.local, "old"), ":kept.bin")
        new = self.local_file("new", os.urandom(CHUNK_MAX + 5))
        r = self.bkctl("cp", "-n", new, ":kept.bin", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"ALREADY_EXISTS", r.stderr)
        self.assertHostFile("kept.bin", old)
        r = self.bkctl("cp", new, ":/etc/boxkite-test", ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"not inside a sandbox root", r.stderr)
        self.assertFalse(os.path.exists("/etc/boxkite-test"))
        r = self.bkctl("cp", ":no-such-file", os.path.join(self.local, "x"), ok=False)
        self.assertIn(b"NOT_FOUND", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.local, "x")), "a failed download left a file")
        self.assertEqual(self.workspace_names(), ["kept.bin"])

    def test_resume_finishes_an_upload_another_client_began(self):
        data = os.urandom(3 * CHUNK_MAX + 99)
        src = self.local_file("resumed", data)
        b = self.fs.begin("resumed.bin", len(data))
        self.assertEqual(self.fs.chunk(b.upload_id, 0, data[:CHUNK_MAX]), CHUNK_MAX)
        self.bkctl("cp", "--resume", b.upload_id, src, ":resumed.bin")
        self.assertHostFile("resumed.bin", data)
        # A resume with other bytes than the upload began with: bkctl hashes its own source for
        # the part the server has, so the content hashes disagree at commit, and nothing lands.
        b = self.fs.begin("other.bin", len(data))
        self.assertEqual(self.fs.chunk(b.upload_id, 0, data[:CHUNK_MAX]), CHUNK_MAX)
        src = self.local_file("other", os.urandom(len(data)))
        r = self.bkctl("cp", "--resume", b.upload_id, src, ":other.bin", ok=False)
        self.assertIn(b"DATA_LOSS", r.stderr)
        self.assertIn(b"content hash", r.stderr)
        self.assertEqual(self.workspace_names(), ["resumed.bin"])

