"""The workspace quota (--workspace-quota): uploads that would fill /workspace past it are refused
with RESOURCE_EXHAUSTED naming the path and leave nothing; what commands wrote counts; uploads in
progress count; /tmp does not."""

import os
import threading
import time

from fileskit import FilesTestCase, MiB, boxkite, content_hash, sha256, status_name

QUOTA = 4 * MiB


# boxkited keeps its measure of the workspace for 2 s (adding what uploads commit meanwhile):
# each test starts after the previous one's files are gone and that measure is stale.
CACHE_S = 2.1


class QuotaTest(FilesTestCase):
    DAEMON_ARGS = ("--workspace-quota", str(QUOTA))

    def setUp(self):
        super().setUp()
        time.sleep(CACHE_S)

    def test_uploads_fill_up_to_the_quota_and_no_further(self):
        self.fs.upload("a.bin", b"a" * (3 * MiB))
        e = self.assertStatus("RESOURCE_EXHAUSTED", self.fs.upload, "b.bin", b"b" * (2 * MiB),
                              path="/workspace/b.bin")
        self.assertIn("quota", e.message)
        self.assertEqual(self.workspace_names(), ["a.bin"])
        # What is left still fits.
        self.fs.upload("c.bin", b"c" * (MiB // 2))
        self.assertEqual(self.workspace_names(), ["a.bin", "c.bin"])

    def test_a_file_sent_whole_counts_as_any_upload(self):
        # PROTOCOL.md, "A file in one request": admitted against the quota before anything is
        # written, and counted once committed.
        whole = b"w" * (3 * MiB)
        self.fs.call("FileUploadBegin", whole, path="w.bin", size=len(whole), content_hash=content_hash(whole))
        self.assertEqual(self.workspace_names(), ["w.bin"])
        more = b"m" * (2 * MiB)
        e = self.assertStatus("RESOURCE_EXHAUSTED", lambda: self.fs.call(
            "FileUploadBegin", more, path="m.bin", size=len(more), content_hash=content_hash(more)),
            path="/workspace/m.bin")
        self.assertIn("quota", e.message)
        self.assertEqual(self.workspace_names(), ["w.bin"])
        # What is left still fits, sent whole too.
        last = b"l" * (MiB // 2)
        self.fs.call("FileUploadBegin", last, path="l.bin", size=len(last), content_hash=content_hash(last))
        self.assertEqual(self.workspace_names(), ["l.bin", "w.bin"])

    def test_files_written_by_commands_count(self):
        self.fs.exec("head -c %d /dev/zero > /workspace/made-by-a-command" % (3 * MiB + MiB // 2))
        self.assertStatus("RESOURCE_EXHAUSTED", self.fs.upload, "x.bin", b"x" * MiB, path="/workspace/x.bin")

    def test_files_however_deep_count(self):
        # Below the depth the measure once stopped at (256): counted like any other.
        fd = os.open(self.host(""), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(400):
                os.mkdir("d", dir_fd=fd)
                nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            big = os.open("big", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
            os.ftruncate(big, 3 * MiB + MiB // 2)
            os.close(big)
        finally:
            os.close(fd)
        os.system("chmod -R a+rX %s" % self.host("d"))
        self.assertStatus("RESOURCE_EXHAUSTED", self.fs.upload, "x.bin", b"x" * MiB, path="/workspace/x.bin")

    def test_uploads_in_progress_count(self):
        data = b"p" * (3 * MiB)
        first = self.fs.begin("p.bin", len(data), sha256(data))
        self.assertStatus("RESOURCE_EXHAUSTED", self.fs.begin, "q.bin", 2 * MiB, sha256(b"q" * (2 * MiB)),
                          path="/workspace/q.bin")
        self.fs.abort(first.upload_id)

    def test_begins_at_the_same_time_cannot_pass_the_quota_together(self):
        # Eight Begins of 1.5 MiB at once, each within the 4 MiB quota alone: two fit, and no
        # more may be admitted, however the eight interleave.
        size = 3 * MiB // 2
        warm = self.fs.begin("warm.bin", 1, sha256(b"w"))  # the usage measure is fresh for all eight
        self.addCleanup(self.fs.abort, warm.upload_id)
        start, answers, lock = threading.Barrier(8), [], threading.Lock()

        def begin(i):
            fs = self.files()
            start.wait()
            try:
                got = fs.begin("c%d.bin" % i, size, sha256(b"c" * size)).upload_id
            except boxkite.BoxkiteError as e:
                got = status_name(e.code)
            with lock:
                answers.append(got)

        threads = [threading.Thread(target=begin, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for a in answers:
            if a != "RESOURCE_EXHAUSTED":
                self.addCleanup(self.fs.abort, a)  # uploads left open would count in later tests
        self.assertEqual((len(answers), answers.count("RESOURCE_EXHAUSTED")), (8, 6), answers)

    def test_tmp_is_not_the_workspace(self):
        self.fs.upload("/tmp/big.bin", b"t" * (5 * MiB))
        self.assertEqual(self.fs.stat("/tmp/big.bin").size, 5 * MiB)
        self.fs.remove("/tmp/big.bin")
