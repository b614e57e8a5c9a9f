"""Every file rpc of docs/PROTOCOL.md, one by one, through the boxkite package's wire layer (the
client's whole-file methods are test_client.py's), against a real boxkited (local mode, as root):
the second language uploads in whole blocks and commits with the content hash it computed
itself, downloads with the server's content hash and the plain SHA-256 checked, and drives
FileStat, FileList, FileMkdir, FileRemove, FileMove and FileSymlink — each result checked on the
host side of the workspace too, and each refusal by the status and detail the document gives.
Nothing here uses libboxkite."""

import hashlib
import os
import time
import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import wire
    from boxkite.errors import detail_name, status_name
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e

MiB = 1 << 20
UID = 1001


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"


def pattern(n, seed=0):
    """n bytes that are not all alike (so that a misplaced block shows)."""
    block = hashlib.sha256(b"%d" % seed).digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class FilesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = boxkited_process.Boxkited().__enter__()
        cls.key = wire.load_key_file(cls.daemon.key_file)
        cls.client = wire.Channel(cls.daemon.url, key=cls.key, timeout=60.0)
        deadline = time.monotonic() + 15
        while not cls.call_health().sandbox_ready:
            if time.monotonic() > deadline:
                raise RuntimeError("the sandbox did not become ready; boxkited's log:\n%s" % cls.daemon.log())
            time.sleep(0.05)

    @classmethod
    def call_health(cls):
        return cls.client.call("Health", pb.HealthRequest(), pb.HealthResponse).message

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    # --- helpers ------------------------------------------------------------------------------

    def reply(self, method, data=b"", **fields):
        r = self.client.call(method, getattr(pb, method + "Request")(**fields), getattr(pb, method + "Response"),
                             data=data)
        self.assertTrue(r.verified, "a keyed answer must carry a valid MAC")
        return r

    def call(self, method, data=b"", **fields):
        return self.reply(method, data, **fields).message

    def refused(self, status, detail, method, data=b"", **fields):
        """method fails with status (and detail name); the error."""
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.call(method, data, **fields)
        e = cm.exception
        self.assertEqual((status_name(e.code), detail_name(e.detail)), (status, detail), str(e))
        return e

    def host(self, rel):
        return os.path.join(self.daemon.workspace, rel)

    def upload(self, path, data, chunk=wire.BLOCK_SIZE, sha256=None, **begin):
        b = self.call("FileUploadBegin", path=path, size=len(data), sha256=sha256 or b"", **begin)
        self.assertEqual((b.confirmed_offset, b.max_chunk), (0, wire.BLOCK_SIZE))
        self.assertRegex(b.upload_id, "^[0-9a-f]{32}$")
        offset = 0
        while offset < len(data):
            piece = data[offset:offset + chunk]
            got = self.call("FileUploadChunk", piece, upload_id=b.upload_id, offset=offset).confirmed_offset
            self.assertEqual(got, offset + len(piece))
            offset = got
        return b.upload_id, self.call("FileUploadCommit", upload_id=b.upload_id, content_hash=wire.content_hash(data))

    def download(self, path, plain_sha256=False):
        """The whole file, block after block from the answers' data fields: (bytes, first answer,
        the content hash of what arrived, computed from each block's hash)."""
        parts, blocks, first, offset = [], [], None, 0
        while True:
            r = self.reply("FileDownload", path=path, offset=offset, sha256=plain_sha256 and offset == 0)
            m = r.message
            first = first or m
            self.assertEqual((m.size, m.mtime_ns, m.ctime_ns, m.offset), (first.size, first.mtime_ns,
                                                                          first.ctime_ns, offset))
            self.assertEqual((m.compression, m.data_length), (pb.COMPRESSION_NONE, len(r.data)))
            parts.append(r.data)
            blocks.append(hashlib.sha256(r.data).digest())
            offset += len(r.data)
            if m.eof:
                return b"".join(parts), first, wire.content_hash(blocks=blocks)
            self.assertEqual(len(r.data), wire.BLOCK_SIZE, "an answer before the end that is not a whole block")

    # --- upload and download ------------------------------------------------------------------

    def test_upload_in_blocks_then_download_with_the_content_hash(self):
        data = pattern(2 * wire.BLOCK_SIZE + 12345)
        _, c = self.upload("py/round.bin", data, mode=0o640, make_parents=True)
        i = c.info
        self.assertEqual((i.path, i.type, i.size, i.mode, i.uid, i.gid),
                         ("/workspace/py/round.bin", pb.FILE_TYPE_REGULAR, len(data), 0o640, UID, UID))
        with open(self.host("py/round.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        got, first, digest = self.download("py/round.bin")
        self.assertEqual(got, data)
        # The server wrote it: it knows the content hash, and it is the client's.
        self.assertEqual((first.content_hash, digest), (wire.content_hash(data), wire.content_hash(data)))
        self.assertEqual(first.sha256, b"", "the plain SHA-256 is sent only when asked")
        got, first, _ = self.download("py/round.bin", plain_sha256=True)
        self.assertEqual(first.sha256, hashlib.sha256(data).digest())

    def test_empty_file_and_chunks_of_any_size(self):
        _, c = self.upload("empty", b"")
        self.assertEqual(c.info.size, 0)
        r = self.reply("FileDownload", path="empty")
        self.assertEqual((r.data, r.message.eof, r.message.content_hash),
                         (b"", True, bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")))
        # 1 MiB chunks: not whole blocks, taken all the same (the server hashes them once more).
        data = pattern(5 * MiB + 3, seed=1)
        self.upload("odd.bin", data, chunk=MiB)
        self.assertEqual(self.download("odd.bin")[0], data)

    def test_a_file_of_one_block_goes_whole_in_its_begin(self):
        """PROTOCOL.md, "A file in one request": the content in the Begin's data with its content
        hash, created, written and committed by that one call."""
        for size in (0, 4096, wire.BLOCK_SIZE):
            with self.subTest(size):
                data = pattern(size, seed=20)
                b = self.call("FileUploadBegin", data, path="whole-%d.bin" % size, size=size, mode=0o640,
                              content_hash=wire.content_hash(data))
                self.assertEqual((b.upload_id, b.info.path, b.info.size, b.info.mode),
                                 ("", "/workspace/whole-%d.bin" % size, size, 0o640))
                with open(self.host("whole-%d.bin" % size), "rb") as f:
                    self.assertEqual(f.read(), data)
                self.assertEqual(os.stat(self.host("whole-%d.bin" % size)).st_uid, UID)
        # And checked against the plain SHA-256 when that is given too.
        data = pattern(5000, seed=21)
        self.call("FileUploadBegin", data, path="whole-sha.bin", size=len(data), content_hash=wire.content_hash(data),
                  sha256=hashlib.sha256(data).digest())
        e = self.refused("DATA_LOSS", "NONE", "FileUploadBegin", data, path="whole-sha-bad.bin", size=len(data),
                         content_hash=wire.content_hash(data), sha256=hashlib.sha256(b"x").digest())
        self.assertIn("SHA-256 of the bytes received is not the one given: nothing written", e.message)
        self.assertFalse(os.path.exists(self.host("whole-sha-bad.bin")))

    def test_a_whole_begin_that_is_not_what_it_says_lands_nothing(self):
        data = pattern(5000, seed=22)
        good = wire.content_hash(data)
        # Another content hash: nothing written, nothing left to commit.
        e = self.refused("DATA_LOSS", "NONE", "FileUploadBegin", data, path="whole-bad.bin", size=len(data),
                         content_hash=wire.content_hash(data + b"!"))
        self.assertIn("content hash", e.message)
        # Data without a content hash, a short hash, or a resumption with data.
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data, path="whole-bad.bin", size=len(data))
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data, path="whole-bad.bin", size=len(data),
                     content_hash=good[:16])
        b = self.call("FileUploadBegin", path="whole-resume.bin", size=len(data))
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data, path="whole-resume.bin", size=len(data),
                     content_hash=good, upload_id=b.upload_id)
        self.call("FileUploadAbort", upload_id=b.upload_id)
        # Not the size it declares, either way; more than one block.
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data, path="whole-bad.bin", size=len(data) + 1,
                     content_hash=good)
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data[:-1], path="whole-bad.bin", size=len(data),
                     content_hash=good)
        big = pattern(wire.BLOCK_SIZE + 1, seed=23)
        self.refused("OUT_OF_RANGE", "NONE", "FileUploadBegin", big, path="whole-bad.bin", size=len(big),
                     content_hash=wire.content_hash(big))
        # A compression the server does not know.
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", data, path="whole-bad.bin", size=len(data),
                     content_hash=good, compression=7)
        self.assertFalse(os.path.exists(self.host("whole-bad.bin")))
        self.assertFalse(os.path.exists(self.host("whole-resume.bin")))
        # Nothing of them holds a place: the uploads that may be open are all still there.
        self.call("FileUploadBegin", data, path="whole-after.bin", size=len(data), content_hash=good)

    def test_a_whole_begin_follows_the_upload_rules(self):
        data = pattern(3000, seed=24)
        h = wire.content_hash(data)
        self.call("FileUploadBegin", data, path="whole-exists.bin", size=len(data), content_hash=h)
        other = pattern(3000, seed=25)
        # An existing file is not replaced unless asked; missing parents are not made unless asked.
        self.refused("ALREADY_EXISTS", "NONE", "FileUploadBegin", other, path="whole-exists.bin", size=len(other),
                     content_hash=wire.content_hash(other))
        with open(self.host("whole-exists.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.call("FileUploadBegin", other, path="whole-exists.bin", size=len(other),
                  content_hash=wire.content_hash(other), overwrite=True)
        with open(self.host("whole-exists.bin"), "rb") as f:
            self.assertEqual(f.read(), other)
        self.refused("NOT_FOUND", "NONE", "FileUploadBegin", data, path="whole-dir/a/b.bin", size=len(data),
                     content_hash=h)
        self.call("FileUploadBegin", data, path="whole-dir/a/b.bin", size=len(data), content_hash=h, make_parents=True)
        # Outside the roots, or through a symlink out of them: refused as any upload.
        os.symlink("/etc", self.host("whole-link"))
        self.refused("PERMISSION_DENIED", "NONE", "FileUploadBegin", data, path="whole-link/passwd2", size=len(data),
                     content_hash=h)
        self.assertFalse(os.path.exists("/etc/passwd2"))

    def test_plain_sha256_given_at_begin_is_checked_at_commit(self):
        data = pattern(MiB, seed=2)
        self.upload("sha.bin", data, sha256=hashlib.sha256(data).digest())
        b = self.call("FileUploadBegin", path="sha-bad.bin", size=len(data), sha256=hashlib.sha256(b"x").digest())
        self.call("FileUploadChunk", data, upload_id=b.upload_id)
        e = self.refused("DATA_LOSS", "NONE", "FileUploadCommit", upload_id=b.upload_id,
                         content_hash=wire.content_hash(data))
        self.assertIn("SHA-256 of the bytes received is not the one given: nothing written", e.message)
        self.assertFalse(os.path.exists(self.host("sha-bad.bin")))

    def test_a_wrong_content_hash_lands_nothing(self):
        data = pattern(MiB, seed=3)
        b = self.call("FileUploadBegin", path="wrong.bin", size=len(data))
        self.call("FileUploadChunk", data, upload_id=b.upload_id)
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadCommit", upload_id=b.upload_id, content_hash=b"short")
        e = self.refused("DATA_LOSS", "NONE", "FileUploadCommit", upload_id=b.upload_id,
                         content_hash=wire.content_hash(data + b"!"))
        self.assertIn("content hash", e.message)
        self.assertFalse(os.path.exists(self.host("wrong.bin")))
        time.sleep(0.2)  # the id is dropped with the answer
        self.refused("NOT_FOUND", "NONE", "FileUploadCommit", upload_id=b.upload_id, content_hash=wire.content_hash(data))

    def test_a_chunk_changed_after_its_mac_is_refused_before_anything(self):
        data = pattern(MiB, seed=4)
        b = self.call("FileUploadBegin", path="tampered.bin", size=len(data))
        env = self.client.seal("FileUploadChunk", pb.FileUploadChunkRequest(upload_id=b.upload_id), data)
        env.data = data[:-1] + bytes([data[-1] ^ 1])
        answer = self.client.exchange(env.SerializeToString())
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.client.open_answer(answer, env, pb.FileUploadChunkResponse)
        self.assertEqual((status_name(cm.exception.code), detail_name(cm.exception.detail),
                          cm.exception.verified), ("UNAUTHENTICATED", "BAD_MAC", False))
        resumed = self.call("FileUploadBegin", path="tampered.bin", size=len(data), upload_id=b.upload_id)
        self.assertEqual(resumed.confirmed_offset, 0, "a refused chunk was written")

    def test_out_of_order_and_resume_and_abort(self):
        data = pattern(3 * wire.BLOCK_SIZE, seed=5)
        b = self.call("FileUploadBegin", path="resume.bin", size=len(data))
        self.call("FileUploadChunk", data[:wire.BLOCK_SIZE], upload_id=b.upload_id)
        # Not at the confirmed offset, and not a whole block ahead: refused at once, saying where.
        e = self.refused("FAILED_PRECONDITION", "NONE", "FileUploadChunk", data[10:20], upload_id=b.upload_id,
                         offset=wire.BLOCK_SIZE + 10)
        self.assertIn("%d bytes are confirmed: send from there" % wire.BLOCK_SIZE, e.message)
        self.refused("OUT_OF_RANGE", "NONE", "FileUploadChunk", b"x", upload_id=b.upload_id, offset=len(data))
        # The first chunk again (its answer lost): answered, not rewritten.
        self.assertEqual(self.call("FileUploadChunk", data[:wire.BLOCK_SIZE], upload_id=b.upload_id).confirmed_offset,
                         wire.BLOCK_SIZE)
        r = self.call("FileUploadBegin", path="resume.bin", size=len(data), upload_id=b.upload_id)
        self.assertEqual(r.confirmed_offset, wire.BLOCK_SIZE)
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", path="other.bin", size=len(data),
                     upload_id=b.upload_id)
        self.call("FileUploadAbort", upload_id=b.upload_id)
        self.refused("NOT_FOUND", "NONE", "FileUploadAbort", upload_id=b.upload_id)
        self.refused("NOT_FOUND", "NONE", "FileUploadChunk", data[:10], upload_id=b.upload_id,
                     offset=wire.BLOCK_SIZE)
        self.assertFalse(os.path.exists(self.host("resume.bin")))

    def test_begin_refusals(self):
        self.upload("taken.txt", b"first\n")
        self.refused("ALREADY_EXISTS", "NONE", "FileUploadBegin", path="taken.txt", size=3)
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", path="x", size=3, sha256=b"short")
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", path="x", size=3, mode=0o4755)
        self.refused("INVALID_ARGUMENT", "NONE", "FileUploadBegin", path="../x", size=3)
        self.refused("NOT_FOUND", "NONE", "FileUploadBegin", path="no/such/dir/x", size=3)
        self.refused("RESOURCE_EXHAUSTED", "NONE", "FileUploadBegin", path="huge", size=1 << 60)

    def test_download_details(self):
        data = pattern(MiB, seed=6)
        self.upload("dl.bin", data)
        r = self.reply("FileDownload", path="dl.bin", offset=10, length=100)
        self.assertEqual((r.data, r.message.offset, r.message.data_length, r.message.eof), (data[10:110], 10, 100, False))
        r = self.reply("FileDownload", path="dl.bin", offset=len(data))
        self.assertEqual((r.data, r.message.eof), (b"", True))
        self.refused("OUT_OF_RANGE", "NONE", "FileDownload", path="dl.bin", offset=len(data) + 1)
        self.refused("INVALID_ARGUMENT", "NONE", "FileDownload", path="dl.bin", offset=1, sha256=True)
        self.refused("INVALID_ARGUMENT", "NONE", "FileDownload", path="dl.bin", compression=7)
        self.refused("NOT_FOUND", "NONE", "FileDownload", path="no-such")
        # Asked as ZSTD, a chunk that would not shrink comes back plain.
        self.upload("random.bin", os.urandom(4096))
        r = self.reply("FileDownload", path="random.bin", compression=pb.COMPRESSION_ZSTD)
        self.assertEqual((r.message.compression, len(r.data)), (pb.COMPRESSION_NONE, 4096))
        # A file the server did not write: no content hash until it was read whole.
        with open(self.host("host.bin"), "wb") as f:
            f.write(data)
        self.assertEqual(self.call("FileDownload", path="host.bin").content_hash, b"")
        self.assertEqual(self.download("host.bin")[2], wire.content_hash(data))
        self.assertEqual(self.call("FileDownload", path="host.bin").content_hash, wire.content_hash(data))

    def test_download_answers_are_not_kept_for_resends(self):
        self.upload("kept.bin", b"abc")
        env = self.client.seal("FileDownload", pb.FileDownloadRequest(path="kept.bin"))
        raw = env.SerializeToString()
        first = self.client.open_answer(self.client.exchange(raw), env, pb.FileDownloadResponse)
        self.assertEqual(first.data, b"abc")
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.client.open_answer(self.client.exchange(raw), env, pb.FileDownloadResponse)
        self.assertEqual(detail_name(cm.exception.detail), "REPLAYED")
        # An answer without data is kept: its re-send gets the same bytes.
        env = self.client.seal("FileStat", pb.FileStatRequest(path="kept.bin"))
        raw = env.SerializeToString()
        self.assertEqual(self.client.exchange(raw), self.client.exchange(raw))

    # --- the other file rpcs ------------------------------------------------------------------

    def test_mkdir_stat_list_move_symlink_remove(self):
        self.call("FileMkdir", path="tree/a/b", parents=True, mode=0o750)
        self.call("FileMkdir", path="tree/a/b", parents=True)  # parents: an existing one is fine
        self.refused("ALREADY_EXISTS", "NONE", "FileMkdir", path="tree/a/b")
        self.refused("INVALID_ARGUMENT", "NONE", "FileMkdir", path="tree/c", mode=0o1777)
        self.assertEqual(os.stat(self.host("tree/a/b")).st_mode & 0o777, 0o750)
        for name in ("z.txt", "m.txt", "a.txt"):
            self.upload("tree/" + name, name.encode())
        s = self.call("FileStat", path="tree/m.txt").info
        self.assertEqual((s.path, s.type, s.size, s.uid), ("/workspace/tree/m.txt", pb.FILE_TYPE_REGULAR, 5, UID))
        self.assertEqual(self.call("FileStat", path="/workspace/tree").info.type, pb.FILE_TYPE_DIRECTORY)
        self.refused("NOT_FOUND", "NONE", "FileStat", path="tree/nope")
        # Pages of two, sorted, bare names, a hex token naming the last one.
        page = self.call("FileList", path="tree", page_size=2)
        self.assertEqual([e.path for e in page.entries], ["a", "a.txt"])
        self.assertEqual(bytes.fromhex(page.next_page_token), b"a.txt")
        page = self.call("FileList", path="tree", page_size=2, page_token=page.next_page_token)
        self.assertEqual(([e.path for e in page.entries], page.next_page_token), (["m.txt", "z.txt"], ""))
        self.refused("INVALID_ARGUMENT", "NONE", "FileList", path="tree", page_token="zz")
        self.refused("INVALID_ARGUMENT", "NONE", "FileList", path="tree", page_size=1001)
        self.refused("FAILED_PRECONDITION", "NONE", "FileList", path="tree/m.txt")
        # Move: never over an existing name without overwrite.
        self.refused("ALREADY_EXISTS", "NONE", "FileMove", **{"from": "tree/m.txt", "to": "tree/z.txt"})
        self.call("FileMove", **{"from": "tree/m.txt", "to": "tree/z.txt", "overwrite": True})
        with open(self.host("tree/z.txt"), "rb") as f:
            self.assertEqual(f.read(), b"m.txt")
        self.refused("NOT_FOUND", "NONE", "FileMove", **{"from": "tree/m.txt", "to": "tree/y.txt"})
        # Symlinks: stored as given when they stay in their root, never replacing a name.
        self.call("FileSymlink", path="tree/link", target="a/b")
        info = self.call("FileStat", path="tree/link").info
        self.assertEqual((info.type, info.symlink_target), (pb.FILE_TYPE_SYMLINK, "a/b"))
        self.assertEqual(os.readlink(self.host("tree/link")), "a/b")
        for target in ("../../../etc", "/etc/passwd", "/tmp/x"):
            with self.subTest(target=target):
                e = self.refused("PERMISSION_DENIED", "NONE", "FileSymlink", path="tree/bad", target=target)
                self.assertIn("leads out of /workspace", e.message)
        self.refused("ALREADY_EXISTS", "NONE", "FileSymlink", path="tree/link", target="z.txt")
        # Remove: a non-empty directory only with recursive; the count of what went.
        self.refused("FAILED_PRECONDITION", "NONE", "FileRemove", path="tree")
        # tree, a, a/b, a.txt, z.txt, link
        self.assertEqual(self.call("FileRemove", path="tree", recursive=True).removed, 6)
        self.assertFalse(os.path.exists(self.host("tree")))
        self.refused("NOT_FOUND", "NONE", "FileRemove", path="tree")
        self.refused("FAILED_PRECONDITION", "NONE", "FileRemove", path="/workspace", recursive=True)

    # --- bodies and data ----------------------------------------------------------------------

    def test_unknown_body_fields_and_misplaced_data_are_refused(self):
        # FileStatRequest{path: "x"} plus field 15: a field this server does not know.
        env = self.client.seal("FileStat", pb.FileStatRequest(path="x"))
        env.body = env.body + b"\x78\x01"
        env.mac = wire.envelope_mac(self.key.secret, env)
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            self.client.open_answer(self.client.exchange(env.SerializeToString()), env, pb.FileStatResponse)
        self.assertEqual(detail_name(cm.exception.detail), "BAD_BODY")
        self.assertTrue(cm.exception.verified)
        e = self.refused("INVALID_ARGUMENT", "BAD_BODY", "FileStat", b"data", path="x")
        self.assertIn("takes no data", e.message)


if __name__ == "__main__":
    unittest.main()
