"""Integrity: what lands is exactly what was sent, or nothing. A 1 GiB round trip, its content
hash known to the server from the upload; a wrong content hash or plain SHA-256 at commit; a
chunk changed after its MAC, then going on from the confirmed offset; zstd and plain chunks of
any size, and zstd frames that are too big, lie about their size or do not say it; a client
SIGKILLed mid-upload and another resuming it; overwrite=false at begin and at commit; readers
racing overwrites; a file growing while it is downloaded; an upload id after its commit; and
(with --upload-idle 2) an abandoned upload that leaves nothing and is dropped."""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

from fileskit import (CHUNK_MAX, HERE, MiB, FilesTestCase, boxkite, content_hash, detail_name, file_sha256, pb,
                      sha256, status_name, wire, zstd)

UID = 1001
# FILES_BIG_MIB=64 make test-files: a quicker run while working on the tier.
BIG = int(os.environ.get("FILES_BIG_MIB", "1024")) * MiB


def random_bytes(n):
    """n random bytes: AES-128-CTR of zeros under a random key (openssl, ~1 GB/s) when it is
    there, else the kernel's generator (~250 MB/s here)."""
    if shutil.which("openssl"):
        key, iv = os.urandom(16).hex(), os.urandom(16).hex()
        out = subprocess.run(
            ["sh", "-c", "openssl enc -aes-128-ctr -K %s -iv %s -nosalt -in /dev/zero 2>/dev/null | head -c %d"
             % (key, iv, n)], stdout=subprocess.PIPE, check=True).stdout
        if len(out) == n:
            return out
    return os.urandom(n)


def compressible(n, seed=7):
    """n bytes that zstd shrinks a lot, with some randomness so that it is not trivial."""
    r = random.Random(seed)
    words = [bytes(r.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9))) for _ in range(500)]
    out, size = [], 0
    while size < n:
        line = b" ".join(r.choice(words) for _ in range(12)) + b"\n"
        out.append(line)
        size += len(line)
    return b"".join(out)[:n]


class IntegrityTest(FilesTestCase):

    def read(self, rel):
        with open(self.host(rel), "rb") as f:
            return f.read()

    def assertNoTemp(self, rel=""):
        self.assertEqual([n for n in self.workspace_names(rel) if n.startswith(".boxkite")], [])

    # --- a big round trip ------------------------------------------------------------------

    def test_1gib_round_trip(self):
        data = random_bytes(BIG)
        digest = sha256(data)
        info = self.fs.upload("big.bin", data, mode=0o600)
        self.assertEqual((info.size, info.uid, info.gid, info.mode), (BIG, UID, UID, 0o600))
        st = os.stat(self.host("big.bin"))
        self.assertEqual((st.st_size, st.st_uid, st.st_gid, st.st_mode), (BIG, UID, UID, 0o100600))
        self.assertEqual(file_sha256(self.host("big.bin")), digest, "the file on the host differs")
        view, where = memoryview(data), [0]

        def compare(piece):
            at = where[0]
            if view[at:at + len(piece)] != piece:
                raise AssertionError("downloaded bytes differ at %d..%d" % (at, at + len(piece)))
            where[0] += len(piece)

        # The server hashed the blocks as they were written: it knows the content hash, and the
        # download is checked against it without reading the file twice.
        _, got, first = self.fs.download("big.bin", sink=compare)
        self.assertEqual((where[0], first.size, got, first.content_hash), (BIG, BIG, content_hash(data),
                                                                           content_hash(data)))

    def test_content_hash_and_plain_sha256(self):
        data = random_bytes(2 * CHUNK_MAX + 77)
        fs = self.fs
        # A file the server did not write: its content hash is not known before it was read whole
        # (nor after a change), and then it is.
        with open(self.host("host.bin"), "wb") as f:
            f.write(data)
        os.chown(self.host("host.bin"), UID, UID)
        r = fs.call("FileDownload", path="host.bin")
        self.assertEqual(r.content_hash, b"")
        self.assertEqual(fs.download("host.bin")[1], content_hash(data))
        self.assertEqual(fs.call("FileDownload", path="host.bin").content_hash, content_hash(data))
        fs.exec("printf x | dd of=host.bin bs=1 seek=5 conv=notrunc status=none")
        self.assertEqual(fs.call("FileDownload", path="host.bin").content_hash, b"")
        # The plain SHA-256 on request, checked both ways: given at begin, it is checked at commit.
        changed = data[:5] + b"x" + data[6:]
        got, _, first = fs.download("host.bin", plain_sha256=True)
        self.assertEqual((got, first.sha256), (changed, sha256(changed)))
        self.assertEqual(fs.call("FileDownload", path="host.bin").sha256, b"", "sent without being asked")
        self.assertStatus("INVALID_ARGUMENT", lambda: fs.call("FileDownload", path="host.bin", offset=1, sha256=True))
        fs.upload("plain.bin", data, digest=sha256(data))
        self.assertEqual(file_sha256(self.host("plain.bin")), sha256(data))

    def test_wrong_content_hash_or_sha256_lands_nothing(self):
        data = random_bytes(5 * MiB + 3)
        for what, begin_sha, commit_hash in (("content hash", None, content_hash(data + b"x")),
                                             ("SHA-256", sha256(data + b"x"), content_hash(data))):
            with self.subTest(wrong=what):
                b = self.fs.begin("wrong.bin", len(data), begin_sha)
                self.fs.send(b.upload_id, data)
                e = self.assertStatus("DATA_LOSS", self.fs.commit, b.upload_id, commit_hash,
                                      path="/workspace/wrong.bin")
                self.assertIn("the %s of the bytes received is not the one given: nothing written" % what,
                              e.message)
                self.assertEqual(self.workspace_names(), [], "a file or a temp name is there")
                time.sleep(0.2)  # (an id dropped after a failure: see test_upload_id_is_gone_once_answered)
                self.assertStatus("NOT_FOUND", self.fs.commit, b.upload_id, content_hash(data))
        # A commit must say which content it means.
        b = self.fs.begin("nohash.bin", 3)
        self.fs.chunk(b.upload_id, 0, b"abc")
        self.assertStatus("INVALID_ARGUMENT", self.fs.commit, b.upload_id, b"")
        self.assertStatus("INVALID_ARGUMENT", self.fs.commit, b.upload_id, b"\0" * 31)
        self.fs.commit(b.upload_id, content_hash(b"abc"))
        # Over an existing file, with overwrite: the old file stays as it was.
        self.fs.upload("old.bin", b"old content\n")
        ino = os.stat(self.host("old.bin")).st_ino
        b = self.fs.begin("old.bin", len(data), overwrite=True)
        self.fs.send(b.upload_id, data)
        self.assertStatus("DATA_LOSS", self.fs.commit, b.upload_id, content_hash(b"not it"), path="/workspace/old.bin")
        self.assertEqual(self.read("old.bin"), b"old content\n")
        self.assertEqual(os.stat(self.host("old.bin")).st_ino, ino)
        self.assertEqual(self.workspace_names(), ["nohash.bin", "old.bin"])

    def assertBadMac(self, fn, *args, **kwargs):
        """fn fails UNAUTHENTICATED/BAD_MAC: refused before anything of it was acted on, and so
        answered without a MAC (the server cannot tell who sent it)."""
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertEqual((status_name(e.code), detail_name(e.detail), e.verified),
                         ("UNAUTHENTICATED", "BAD_MAC", False), str(e))

    def test_chunk_changed_after_its_mac_then_go_on_from_the_confirmed_offset(self):
        data = random_bytes(10 * MiB + 5)
        fs = self.fs
        b = fs.begin("resumed.bin", len(data), mode=0o640)
        self.assertEqual(fs.chunk(b.upload_id, 0, data[:CHUNK_MAX]), CHUNK_MAX)
        piece = data[CHUNK_MAX:2 * CHUNK_MAX]
        # One flipped bit anywhere in a chunk, plain or zstd: its MAC, which covers the data's
        # SHA-256, no longer verifies. Nothing of it touches the file.
        for at in (0, 12345, len(piece) - 1):
            self.assertBadMac(fs.chunk, b.upload_id, CHUNK_MAX, piece, corrupt=at)
        self.assertBadMac(fs.chunk, b.upload_id, CHUNK_MAX, piece, compress=True, corrupt=100)
        # The upload goes on: resuming says where.
        r = fs.begin("resumed.bin", len(data), upload_id=b.upload_id)
        self.assertEqual((r.upload_id, r.confirmed_offset), (b.upload_id, CHUNK_MAX))
        # Resuming another file with this id is refused (another path, size, or a SHA-256 check
        # this upload does not have).
        for path, size, d in (("other.bin", len(data), None), ("resumed.bin", len(data) + 1, None),
                              ("resumed.bin", len(data), sha256(data))):
            self.assertStatus("INVALID_ARGUMENT", fs.begin, path, size, d, upload_id=b.upload_id)
        self.assertStatus("NOT_FOUND", fs.begin, "resumed.bin", len(data), upload_id="0" * 32)
        # A chunk ahead of the confirmed offset: held for the gap before it to fill (chunks
        # sent at once may overtake each other), then refused, saying where to send from.
        e = self.assertStatus("FAILED_PRECONDITION", fs.chunk, b.upload_id, 2 * CHUNK_MAX, data[2 * CHUNK_MAX:])
        self.assertIn("%d bytes are confirmed" % CHUNK_MAX, e.message)
        # The first chunk again (its answer was lost): answered, not rewritten.
        self.assertEqual(fs.chunk(b.upload_id, 0, data[:CHUNK_MAX]), CHUNK_MAX)
        self.assertEqual(fs.chunk(b.upload_id, CHUNK_MAX, piece, compress=True), 2 * CHUNK_MAX)
        self.assertEqual(fs.chunk(b.upload_id, 2 * CHUNK_MAX, data[2 * CHUNK_MAX:]), len(data))
        self.assertEqual(self.workspace_names(), [], "visible before its commit")
        info = fs.commit(b.upload_id, content_hash(data))
        self.assertEqual((info.size, info.mode), (len(data), 0o640))
        self.assertEqual(file_sha256(self.host("resumed.bin")), sha256(data))
        # Committing with bytes missing is refused and keeps the upload.
        b = fs.begin("short.bin", 100)
        fs.chunk(b.upload_id, 0, b"y" * 60)
        e = self.assertStatus("FAILED_PRECONDITION", fs.commit, b.upload_id, content_hash(b"y" * 100),
                              path="/workspace/short.bin")
        self.assertIn("60 of 100 bytes", e.message)
        fs.chunk(b.upload_id, 60, b"y" * 40)
        fs.commit(b.upload_id, content_hash(b"y" * 100))
        self.assertEqual(self.read("short.bin"), b"y" * 100)

    # --- zstd ------------------------------------------------------------------------------

    def test_zstd_and_plain_chunks(self):
        # Chunks of any size, whole blocks or not, plain or zstd: the server's block hashes come
        # out the same as from whole blocks (it hashes partial ones once more).
        data = compressible(13 * MiB + 777)
        fs = self.fs
        b = fs.begin("mixed.txt", len(data))
        offset = 0
        for size, z in ((MiB, True), (CHUNK_MAX, False), (CHUNK_MAX, True), (3 * MiB + 1, False), (1, True),
                        (10 ** 9, True)):
            piece = data[offset:offset + size]
            offset = fs.chunk(b.upload_id, offset, piece, compress=z)
        self.assertEqual(offset, len(data))
        fs.commit(b.upload_id, content_hash(data))
        self.assertEqual(self.read("mixed.txt"), data)
        # Downloaded compressed: zstd frames, much smaller, the same bytes.
        r = fs.reply("FileDownload", path="mixed.txt", compression=pb.COMPRESSION_ZSTD)
        m = r.message
        self.assertEqual((m.compression, m.data_length, m.size, m.content_hash),
                         (pb.COMPRESSION_ZSTD, CHUNK_MAX, len(data), content_hash(data)))
        self.assertLess(len(r.data), CHUNK_MAX // 2)
        self.assertEqual(zstd().decompress(r.data), data[:CHUNK_MAX])
        got, d, _ = fs.download("mixed.txt", compress=True)
        self.assertEqual((got, d), (data, content_hash(data)))
        # Random bytes do not shrink: they come back plain even when zstd is accepted.
        rnd = random_bytes(MiB)
        fs.upload("random.bin", rnd, compress=True)
        r = fs.reply("FileDownload", path="random.bin", compression=pb.COMPRESSION_ZSTD)
        self.assertEqual((r.message.compression, r.data), (pb.COMPRESSION_NONE, rnd))
        # Ranges: a slice, the end, past the end.
        r = fs.reply("FileDownload", path="mixed.txt", offset=5, length=1000)
        self.assertEqual((r.data, r.message.offset, r.message.eof, r.message.sha256), (data[5:1005], 5, False, b""))
        r = fs.reply("FileDownload", path="mixed.txt", offset=len(data))
        self.assertEqual((r.data, r.message.eof), (b"", True))
        self.assertStatus("OUT_OF_RANGE", lambda: fs.call("FileDownload", path="mixed.txt", offset=len(data) + 1),
                          path="past the end")
        self.assertStatus("INVALID_ARGUMENT", lambda: fs.call("FileDownload", path="mixed.txt", compression=7))

    def test_zstd_frames_past_the_chunk_limit_or_lying_are_refused(self):
        fs = self.fs
        data = compressible(CHUNK_MAX + MiB)
        b = fs.begin("frames.txt", len(data), sha256(data))
        uid = b.upload_id
        over = bytes(CHUNK_MAX + 1)
        for what, frame in (
                ("4 MiB + 1 of zeros", zstd().compress(over)),
                ("5 MiB claiming 1 MiB", zstd().set_content_size(zstd().compress(data[:5 * MiB]), MiB)),
                ("5 MiB claiming 4 MiB", zstd().set_content_size(zstd().compress(data[:5 * MiB]), CHUNK_MAX)),
                ("no content size", zstd().compress_without_size(data[:MiB])),
                ("not zstd at all", b"\x28\xb5\x2f\xfd" + os.urandom(1000)),
                ("empty", b"")):
            with self.subTest(frame=what):
                e = self.assertStatus("INVALID_ARGUMENT", fs.chunk, uid, 0, None, frame=frame)
                self.assertIn("zstd frame of at most %d bytes" % CHUNK_MAX, e.message)
        # A bomb: a small frame of a huge content, refused from its header alone.
        bomb = zstd().compress(bytes(256 * MiB), level=1)
        self.assertLess(len(bomb), 64 * 1024)
        self.assertStatus("INVALID_ARGUMENT", fs.chunk, uid, 0, None, frame=bomb)
        # Plain: more than 4 MiB in one chunk, or past the declared size.
        self.assertStatus("OUT_OF_RANGE", fs.chunk, uid, 0, over)
        self.assertStatus("INVALID_ARGUMENT", fs.chunk, uid, 0, b"x", compression=9)
        # Exactly 4 MiB in one frame is fine; then more than the file's size is not.
        self.assertEqual(fs.chunk(uid, 0, data[:CHUNK_MAX], compress=True), CHUNK_MAX)
        e = self.assertStatus("OUT_OF_RANGE", fs.chunk, uid, CHUNK_MAX, data[CHUNK_MAX:] + b"!")
        self.assertIn("goes past", e.message)
        self.assertEqual(fs.chunk(uid, CHUNK_MAX, data[CHUNK_MAX:], compress=True), len(data))
        fs.commit(uid, content_hash(data))
        self.assertEqual(self.read("frames.txt"), data)

    # --- a client killed mid-upload --------------------------------------------------------

    def test_client_killed_mid_upload_then_resumed(self):
        seed, size, chunk = 20261129, 48 * MiB, MiB
        child = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "upload_child.py"), str(self.daemon.port), self.daemon.key_file,
             "killed.bin", str(seed), str(size), str(chunk)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE)
        self.addCleanup(child.stdin.close)
        self.addCleanup(child.stdout.close)
        self.addCleanup(lambda: child.poll() is None and (child.kill(), child.wait()))
        upload_id, seen = None, 0
        for line in child.stdout:
            word = line.split()
            if word[0] == "ID":
                upload_id = word[1]
            elif word[0] == "CONFIRMED":
                seen = int(word[1])
                if seen >= 16 * MiB:
                    break
        child.send_signal(signal.SIGKILL)  # most likely in the middle of sending the next chunk
        child.wait()
        self.assertEqual(child.returncode, -signal.SIGKILL)
        self.assertIsNotNone(upload_id)
        self.assertEqual(self.workspace_names(), [], "visible before its commit")
        from upload_child import content
        data = content(seed, size)
        digest = sha256(data)
        # The server may still be finishing the chunk the child was sending: ABORTED until then.
        deadline = time.monotonic() + 10
        while True:
            try:
                r = self.fs.begin("killed.bin", size, digest, mode=0o600, upload_id=upload_id)
                break
            except boxkite.BoxkiteError as e:
                if status_name(e.code) != "ABORTED" or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.assertEqual(r.upload_id, upload_id)
        self.assertGreaterEqual(r.confirmed_offset, seen)
        self.assertLessEqual(r.confirmed_offset, seen + chunk)
        self.assertEqual(r.confirmed_offset % chunk, 0)
        self.fs.send(upload_id, data, offset=r.confirmed_offset)
        info = self.fs.commit(upload_id, content_hash(data))
        self.assertEqual((info.size, info.mode), (size, 0o600))
        self.assertEqual(file_sha256(self.host("killed.bin")), digest)
        self.assertEqual(self.fs.download("killed.bin")[1], content_hash(data))
        print("\n    killed after %d MiB confirmed; resumed from %d MiB" % (seen // MiB, r.confirmed_offset // MiB))

    # --- overwrite=false -------------------------------------------------------------------

    def test_overwrite_false(self):
        fs = self.fs
        fs.upload("exists", b"first\n")
        self.assertStatus("ALREADY_EXISTS", fs.begin, "exists", 6, sha256(b"again\n"), path="/workspace/exists")
        self.assertStatus("ALREADY_EXISTS", fs.upload, "exists", b"again\n", path="/workspace/exists")
        self.assertEqual(self.read("exists"), b"first\n")
        # The name is taken between begin and commit: ALREADY_EXISTS, the other file untouched,
        # the upload kept (the caller may clear the name and commit again).
        data = random_bytes(3 * MiB)
        b = fs.begin("later", len(data), sha256(data))
        fs.send(b.upload_id, data)
        fs.exec("echo other > later")
        self.assertStatus("ALREADY_EXISTS", fs.commit, b.upload_id, content_hash(data), path="/workspace/later")
        self.assertEqual(self.read("later"), b"other\n")
        self.assertNoTemp()
        fs.remove("later")
        fs.commit(b.upload_id, content_hash(data))
        self.assertEqual(self.read("later"), data)
        # A directory appearing: ALREADY_EXISTS without overwrite; with it, FAILED_PRECONDITION
        # (EISDIR). A directory already there at begin: FAILED_PRECONDITION either way.
        for overwrite, status in ((False, "ALREADY_EXISTS"), (True, "FAILED_PRECONDITION")):
            name = "dir-%s" % overwrite
            b = fs.begin(name, 3, sha256(b"abc"), overwrite=overwrite)
            fs.chunk(b.upload_id, 0, b"abc")
            fs.exec("mkdir %s && touch %s/inside" % (name, name))
            self.assertStatus(status, fs.commit, b.upload_id, content_hash(b"abc"), path="/workspace/" + name)
            self.assertEqual(self.workspace_names(name), ["inside"])
            fs.abort(b.upload_id)
            self.assertStatus("FAILED_PRECONDITION", fs.begin, name, 3, sha256(b"abc"), overwrite=overwrite,
                              path="/workspace/" + name)
        self.assertNoTemp()
        self.assertEqual(self.workspace_names(), ["dir-False", "dir-True", "exists", "later"])

    # --- readers racing writers ------------------------------------------------------------

    def test_readers_never_see_a_partial_file(self):
        a, b = random_bytes(3 * MiB), random_bytes(MiB + 7)
        contents = {sha256(a): "A", sha256(b): "B"}
        self.fs.upload("hot.bin", a)
        stop = threading.Event()
        seen = {"rpc": {}, "host": {}, "stat": {}}
        errors, temp_names = [], [0]
        lock = threading.Lock()

        def note(kind, what):
            with lock:
                seen[kind][what] = seen[kind].get(what, 0) + 1

        def rpc_reader():
            fs = self.files()
            while not stop.is_set():
                try:
                    r = fs.reply("FileDownload", path="hot.bin", sha256=True)
                    m = r.message
                    ok = m.eof and m.offset == 0 and len(r.data) == m.size and sha256(r.data) == m.sha256
                    ok = ok and m.content_hash in (b"", wire.content_hash(r.data))
                    note("rpc", contents.get(sha256(r.data), "partial") if ok else "inconsistent")
                    note("stat", {len(a): "A", len(b): "B"}.get(fs.stat("hot.bin").size, "other size"))
                except Exception as e:
                    errors.append(e)
                    return

        def host_reader():
            while not stop.is_set():
                with open(self.host("hot.bin"), "rb") as f:
                    note("host", contents.get(sha256(f.read()), "partial"))
                names = os.listdir(self.ws)
                if len(names) > 1:
                    temp_names[0] += 1

        readers = [threading.Thread(target=rpc_reader, daemon=True) for _ in range(2)]
        readers.append(threading.Thread(target=host_reader, daemon=True))
        for t in readers:
            t.start()
        try:
            for i in range(40):
                self.fs.upload("hot.bin", b if i % 2 == 0 else a, overwrite=True, chunk=MiB)
        finally:
            stop.set()
            for t in readers:
                t.join(30)
        self.assertEqual(errors, [])
        print("\n    reads while overwritten: %s; a temp name seen in %d host listings" % (seen, temp_names[0]))
        for kind in seen:
            self.assertLessEqual(set(seen[kind]), {"A", "B"}, "%s readers saw %s" % (kind, seen[kind]))
            self.assertEqual(set(seen[kind]), {"A", "B"}, "%s readers did not see both contents" % kind)
        self.assertNoTemp()

    def test_download_of_a_growing_file_is_consistent(self):
        # The file grows (an exec appends) while it is downloaded: each answer must describe what
        # it carries — no more bytes than its size says, the SHA-256 of them when asked — or,
        # when the file changed while that answer was read, be refused ABORTED (ask again),
        # never carry a mix. Small and growing slowly (~0.5 MB/s), so that one answer carries
        # the whole file.
        self.fs.upload("grow.log", compressible(256 * 1024))
        done = {}

        def appender():
            fs = self.files()
            done["r"] = fs.call("Exec", argv=["/usr/bin/python3", "-c",
                                              "import time\nf = open('grow.log', 'ab', buffering=0)\n"
                                              "end = time.monotonic() + 2\n"
                                              "while time.monotonic() < end:\n"
                                              "    f.write(b'x' * 100)\n"
                                              "    time.sleep(0.0002)\n"],
                                timeout_ms=20000)

        t = threading.Thread(target=appender, daemon=True)
        t.start()
        bad, n, aborted = [], 0, 0
        try:
            time.sleep(0.2)
            while t.is_alive() and n < 400:
                n += 1
                try:
                    r = self.fs.reply("FileDownload", path="grow.log", sha256=n % 2 == 0)
                except boxkite.BoxkiteError as e:
                    self.assertEqual(status_name(e.code), "ABORTED", str(e))
                    self.assertIn("changed while it was read", e.message)
                    aborted += 1
                    continue
                m = r.message
                self.assertLess(m.size, CHUNK_MAX)
                if m.offset + len(r.data) > m.size or m.data_length != len(r.data) or not m.eof or \
                        (m.sha256 and sha256(r.data) != m.sha256) or (n % 2 == 0 and not m.sha256):
                    bad.append((m.size, len(r.data)))
        finally:
            t.join(30)
        self.assertEqual(done["r"].exit_code, 0, done["r"].stderr)
        print("\n    %d downloads of a growing file, %d ABORTED" % (n, aborted))
        self.assertGreater(n - aborted, 5)
        self.assertEqual(bad[:5], [], "%d of %d answers carried more bytes than their size and hash describe "
                                      "(size, bytes sent)" % (len(bad), n))

    # --- chunks that overtake each other ---------------------------------------------------

    def test_chunks_that_arrive_ahead_wait_for_the_gap(self):
        # A client that sends chunks at once (libboxkite does, from two threads) may have a later
        # one arrive first: it is held until those before it come, then all are confirmed in
        # order. Chunks 3, 2 and 1 are sent before 0, each on its own connection.
        data = random_bytes(4 * CHUNK_MAX - 3)
        b = self.fs.begin("ahead.bin", len(data), sha256(data))
        answers, lock = {}, threading.Lock()

        def send(k):
            try:
                got = self.files().chunk(b.upload_id, k * CHUNK_MAX, data[k * CHUNK_MAX:(k + 1) * CHUNK_MAX])
            except boxkite.BoxkiteError as e:
                got = status_name(e.code)
            with lock:
                answers[k] = got

        early = [threading.Thread(target=send, args=(k,), daemon=True) for k in (3, 2, 1)]
        for t in early:
            t.start()
            time.sleep(0.2)
        self.assertEqual(answers, {}, "a chunk ahead of a gap was answered before the gap filled")
        send(0)
        for t in early:
            t.join(30)
        self.assertEqual(answers, {0: CHUNK_MAX, 1: 2 * CHUNK_MAX, 2: 3 * CHUNK_MAX, 3: len(data)})
        self.fs.commit(b.upload_id, content_hash(data))
        self.assertEqual(file_sha256(self.host("ahead.bin")), sha256(data))

    # --- an upload's id once it is over ----------------------------------------------------

    def test_upload_id_is_gone_once_answered(self):
        # Once the commit (or its DATA_LOSS) is answered, the id is gone: the next request for it
        # is NOT_FOUND, not ABORTED ("another request for it is in progress"). Four clients at
        # once, so that the daemon's threads are busy and a late drop shows.
        answers, lock = {}, threading.Lock()

        def client(t):
            fs = self.files()
            for i in range(75):
                data = b"%d-%d\n" % (t, i)
                good = i % 2 == 0
                b = fs.begin("id-%d-%d" % (t, i), len(data), sha256(data if good else b"other"))
                fs.chunk(b.upload_id, 0, data)
                try:
                    fs.commit(b.upload_id, content_hash(data))
                    first = "OK"
                except boxkite.BoxkiteError as e:
                    first = status_name(e.code)
                try:
                    fs.commit(b.upload_id, content_hash(data))
                    second = "OK"
                except boxkite.BoxkiteError as e:
                    second = status_name(e.code)
                key = "%s then %s" % (first, second)
                with lock:
                    answers[key] = answers.get(key, 0) + 1

        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(answers, {"OK then NOT_FOUND": 152, "DATA_LOSS then NOT_FOUND": 148})


class IdleUploadTest(FilesTestCase):
    DAEMON_ARGS = ("--upload-idle", "2")

    def temp_fds(self):
        """The daemon's descriptors on unnamed files in the workspace (its uploads): the kernel
        names them as the sandbox sees them, "/workspace/#<inode> (deleted)"."""
        out = []
        fd_dir = "/proc/%d/fd" % self.daemon.proc.pid
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if re.fullmatch(r"/workspace/#\d+ \(deleted\)", target):
                out.append(target)
        return out

    def test_abandoned_upload_leaves_nothing_and_expires(self):
        data = random_bytes(8 * MiB)
        b = self.fs.begin("abandoned.bin", len(data), sha256(data))
        self.assertEqual(self.fs.chunk(b.upload_id, 0, data[:CHUNK_MAX]), CHUNK_MAX)
        touched = time.monotonic()
        fds = self.temp_fds()
        self.assertEqual(len(fds), 1, fds)
        self.assertEqual(self.workspace_names(), [])
        # Still there after 1 s (and resuming touches it).
        time.sleep(max(0.0, touched + 1.0 - time.monotonic()))
        r = self.fs.begin("abandoned.bin", len(data), sha256(data), upload_id=b.upload_id)
        touched = time.monotonic()
        self.assertEqual(r.confirmed_offset, CHUNK_MAX)
        # Then left alone: dropped once idle 2 s (the daemon looks each second), not before.
        # Watching its descriptors does not touch the upload. 30 s is a hang guard.
        while self.temp_fds() and time.monotonic() < touched + 30:
            time.sleep(0.05)
        idle = time.monotonic() - touched
        self.assertEqual(self.temp_fds(), [], "still there after %.1f s idle" % idle)
        self.assertGreaterEqual(idle, 1.9, "dropped after %.2f s idle (--upload-idle 2)" % idle)
        for fn, args in ((self.fs.chunk, (b.upload_id, CHUNK_MAX, data[CHUNK_MAX:])),
                         (self.fs.commit, (b.upload_id, content_hash(data))), (self.fs.abort, (b.upload_id,)),
                         (self.fs.begin, ("abandoned.bin", len(data), sha256(data), 0, False, False, b.upload_id))):
            e = self.assertStatus("NOT_FOUND", fn, *args)
            self.assertIn(b.upload_id, e.message)
        self.assertEqual(self.workspace_names(), [])
        self.assertIn("expired", self.daemon.log())

    def test_a_slow_but_active_upload_is_kept(self):
        data = random_bytes(5 * MiB)
        b = self.fs.begin("slow.bin", len(data), sha256(data))
        for i in range(5):  # 5 chunks, 1.2 s apart: 6 s in all, never 2 s idle
            self.fs.chunk(b.upload_id, i * MiB, data[i * MiB:(i + 1) * MiB])
            time.sleep(1.2)
        self.fs.commit(b.upload_id, content_hash(data))
        with open(self.host("slow.bin"), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_aborted_upload_leaves_nothing(self):
        data = random_bytes(2 * MiB)
        b = self.fs.begin("aborted.bin", len(data), sha256(data))
        self.fs.chunk(b.upload_id, 0, data[:MiB])
        self.fs.abort(b.upload_id)
        self.assertEqual(self.temp_fds(), [])
        self.assertEqual(self.workspace_names(), [])
        time.sleep(0.2)
        self.assertStatus("NOT_FOUND", self.fs.chunk, b.upload_id, MiB, data[MiB:])


if __name__ == "__main__":
    unittest.main()
