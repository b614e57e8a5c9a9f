"""Full disk: the workspace is a 16 MiB tmpfs mounted on the host for this class. An upload
bigger than the disk fails cleanly with RESOURCE_EXHAUSTED naming its path, and the space comes
back at once (statvfs) with nothing left in the workspace; so does one that meets a disk the
sandboxed user filled; another upload in progress is not disturbed."""

import os
import subprocess
import tempfile
import time
import unittest

from fileskit import (CHUNK_MAX, FilesTestCase, MiB, boxkite, content_hash, sha256, status_name, undo_at_exit, undone)

SIZE = 16 * MiB


def free_bytes(path):
    s = os.statvfs(path)
    return s.f_bfree * s.f_frsize


def total_bytes(path):
    s = os.statvfs(path)
    return s.f_blocks * s.f_frsize


class FullDiskTest(FilesTestCase):

    @classmethod
    def workspace_dir(cls):
        mnt = tempfile.mkdtemp(prefix="boxkite-files-tmpfs-")
        # Registered before the daemon's: runs after the daemon is gone (and at exit if need be).
        cls._undo = undo_at_exit(cls._unmount, mnt)
        cls.addClassCleanup(cls._unmount, mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % SIZE, "boxkite-files-test", mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise unittest.SkipTest("SKIP: cannot mount a tmpfs here: %s" % r.stderr.strip())
        return mnt

    @classmethod
    def _unmount(cls, mnt):
        undone(cls._undo)
        if os.path.ismount(mnt):
            if subprocess.run(["umount", mnt], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mnt], check=True)
        if os.path.isdir(mnt):
            os.rmdir(mnt)

    def setUp(self):
        super().setUp()
        # Empty: every block free. (A file the previous test committed and removed may take a
        # moment to be freed: the daemon closes its descriptor just after answering.)
        self.free0 = total_bytes(self.ws)
        self.assertEqual(self.wait_free(self.free0), self.free0, "the tmpfs is not empty at the start")

    def wait_free(self, want, timeout=3.0):
        deadline = time.monotonic() + timeout
        while free_bytes(self.ws) != want and time.monotonic() < deadline:
            time.sleep(0.02)
        return free_bytes(self.ws)

    def send_until_refused(self, upload_id, data):
        """Chunks until the server refuses one: (the error, the offset it was refused at)."""
        offset = 0
        while offset < len(data):
            try:
                offset = self.fs.chunk(upload_id, offset, data[offset:offset + CHUNK_MAX])
            except boxkite.BoxkiteError as e:
                return e, offset
        return None, offset

    def test_upload_bigger_than_the_disk(self):
        self.assertTrue(os.path.ismount(self.ws))
        free0 = self.free0
        self.assertEqual(free0, SIZE)
        data = os.urandom(32 * MiB)
        b = self.fs.begin("big.bin", len(data), sha256(data))
        e, at = self.send_until_refused(b.upload_id, data)
        self.assertIsNotNone(e, "32 MiB went into a 16 MiB tmpfs")
        self.assertEqual(status_name(e.code), "RESOURCE_EXHAUSTED", e)
        self.assertTrue(e.verified)
        self.assertIn("/workspace/big.bin", e.message)
        self.assertIn("nothing written", e.message)
        self.assertLessEqual(at, SIZE)
        # The space is back, nothing is there, and the upload is gone.
        back = self.wait_free(free0)
        self.assertEqual(back, free0)
        self.assertEqual(os.listdir(self.ws), [])
        time.sleep(0.2)  # (see test_3_integrity.test_upload_id_is_gone_once_answered)
        self.assertStatus("NOT_FOUND", self.fs.commit, b.upload_id, content_hash(data))
        # And it serves the next upload.
        small = os.urandom(MiB)
        self.fs.upload("small.bin", small)
        with open(os.path.join(self.ws, "small.bin"), "rb") as f:
            self.assertEqual(f.read(), small)
        print("\n    refused at %.1f MiB of 32 on a %d MiB tmpfs; free space back to %d of %d bytes"
              % (at / MiB, SIZE // MiB, back, free0))

    def test_two_uploads_one_does_not_fit(self):
        free0 = self.free0
        first, second = os.urandom(10 * MiB), os.urandom(10 * MiB)
        b1 = self.fs.begin("first.bin", len(first), sha256(first))
        self.fs.send(b1.upload_id, first)
        b2 = self.fs.begin("second.bin", len(second), sha256(second))
        e, at = self.send_until_refused(b2.upload_id, second)
        self.assertIsNotNone(e)
        self.assertEqual(status_name(e.code), "RESOURCE_EXHAUSTED", e)
        self.assertIn("/workspace/second.bin", e.message)
        # The first is whole and lands.
        self.assertEqual(self.fs.commit(b1.upload_id, content_hash(first)).size, len(first))
        with open(os.path.join(self.ws, "first.bin"), "rb") as f:
            self.assertEqual(f.read(), first)
        self.assertEqual(os.listdir(self.ws), ["first.bin"])
        self.assertEqual(self.wait_free(free0 - len(first)), free0 - len(first))

    def test_a_disk_the_sandbox_filled(self):
        free0 = self.free0
        r = self.fs.exec("head -c %d /dev/zero > fill; echo $?" % (SIZE - 256 * 1024), check=False)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "fill")), r)
        data = os.urandom(2 * MiB)
        b = self.fs.begin("late.bin", len(data), sha256(data))
        e, _ = self.send_until_refused(b.upload_id, data)
        self.assertIsNotNone(e)
        self.assertEqual(status_name(e.code), "RESOURCE_EXHAUSTED", e)
        self.assertIn("/workspace/late.bin", e.message)
        self.assertEqual(os.listdir(self.ws), ["fill"])
        self.fs.remove("fill")
        self.assertEqual(self.wait_free(free0), free0)
        self.fs.upload("late.bin", data)
        self.assertEqual(os.listdir(self.ws), ["late.bin"])


if __name__ == "__main__":
    unittest.main()
