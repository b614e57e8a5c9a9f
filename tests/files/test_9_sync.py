"""Sync (issue 13): snapshots of /workspace pushed to a store and pulled back, against the real
boxkited with a file:// store in a temp directory (--sync-store). Each result is checked on the
host: the restored tree byte for byte, the store's blobs counted, the manifest read with the
generated Python code of proto/boxkite/store/snapshot.proto.

The same suite runs against each backend: SyncSuite holds the tests, and a class per backend
says how to make its store and how to reach its blobs (FileStore here)."""

import contextlib
import hashlib
import socket
import subprocess
import os
import random
import re
import shutil
import signal
import stat as st_
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

from fileskit import (HERE, MiB, Daemon, Files, FilesTestCase, boxkite, boxkited_process, pb, status_name,
                      undo_at_exit, undone, wire, zstd)

try:
    from boxkite.store import snapshot_pb2 as spb
except ImportError:  # the files tier's skip_reason() says why (the package is not installed)
    spb = None

UID = 1001
BLOCK = 4 * MiB
FILE_TYPE_REGULAR, FILE_TYPE_DIRECTORY, FILE_TYPE_SYMLINK = 1, 2, 3


def tree_of(top):
    """rel -> (kind, permission bits, sha256 of the content | symlink target | None) of every
    entry under top, not following symlinks."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, top)
            s = os.lstat(p)
            if st_.S_ISLNK(s.st_mode):
                out[rel] = ("link", None, os.readlink(p))
            elif st_.S_ISDIR(s.st_mode):
                out[rel] = ("dir", st_.S_IMODE(s.st_mode), None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st_.S_IMODE(s.st_mode), hashlib.sha256(f.read()).hexdigest())
    return out


class FileStore:
    """A file:// store: a directory boxkited is given with --sync-store."""

    @staticmethod
    def skip_reason():
        return None

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="boxkite-store-")
        self._undo = undo_at_exit(shutil.rmtree, self.dir, True)
        self.url = "file://" + self.dir
        self.tenant = ""  # the store prefix of the suite's key, where its requests' URLs are

    @contextlib.contextmanager
    def environment(self):
        yield

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        undone(self._undo)

    def args(self):
        return ["--sync-store", self.url]

    def clear(self):
        for name in os.listdir(self.dir):
            p = os.path.join(self.dir, name)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)

    def blobs(self, prefix="", tenant=None):
        """Names of the blobs under the tenant's place in the store (or a prefix of it); tenant:
        another key's store prefix than the suite's."""
        top = os.path.join(self.dir, self.tenant if tenant is None else tenant, prefix, "blobs")
        names = []
        for dirpath, _, filenames in os.walk(top):
            names.extend(n for n in filenames if not n.startswith("."))
        return sorted(names)

    def blob_path(self, hexname, prefix=""):
        return os.path.join(self.dir, self.tenant, prefix, "blobs", hexname[:2], hexname)

    def read_blob(self, hexname):
        with open(self.blob_path(hexname), "rb") as f:
            return f.read()

    def write_blob(self, hexname, data):
        with open(self.blob_path(hexname), "wb") as f:
            f.write(data)

    def remove_blob(self, hexname):
        os.unlink(self.blob_path(hexname))

    def snapshots(self, prefix="", tenant=None):
        d = os.path.join(self.dir, self.tenant if tenant is None else tenant, prefix, "snapshots")
        return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []

    def manifest(self, snapshot_id):
        with open(os.path.join(self.dir, self.tenant, "snapshots", snapshot_id), "rb") as f:
            m = spb.Manifest()
            m.ParseFromString(zstd().decompress(f.read(), limit=512 * MiB))
            return m

    def write_manifest(self, m):
        self.write_manifest_bytes(m.id, zstd().compress(m.SerializeToString()))

    def write_manifest_bytes(self, snapshot_id, stored):
        d = os.path.join(self.dir, self.tenant, "snapshots")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, snapshot_id), "wb") as f:
            f.write(stored)
        os.system("chown -R 65532:65532 %s" % self.dir)


def front_peak(daemon):
    """The front's peak resident memory so far (VmHWM), in bytes."""
    with open("/proc/%d/status" % daemon.proc.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


class SyncSuite:
    """The tests, for any backend: a subclass sets STORE (a class like FileStore)."""

    STORE = None

    @classmethod
    def setUpClass(cls):
        why = cls.STORE.skip_reason()
        if why:
            raise unittest.SkipTest("SKIP: " + why)
        cls.store = cls.STORE()
        cls.DAEMON_ARGS = tuple(cls.store.args())
        try:
            with cls.store.environment():
                super().setUpClass()
        except BaseException:
            cls.store.close()
            raise
        cls.addClassCleanup(cls.store.close)
        # A request's URLs are the tenant's: under its key's prefix in the store.
        cls.store.tenant = wire.store_prefix(cls.key)

    def new_daemon(self, extra=(), workspace=None, same_tenant=False):
        """Another boxkited on the same store (started; stopped at the test's end): with a key of
        its own, or (same_tenant) the suite's."""
        d = Daemon(list(self.store.args()) + list(extra), workspace=workspace,
                   key_file=self.daemon.key_file if same_tenant else None)
        with self.store.environment():
            d.__enter__()
        self.addCleanup(d.stop)
        return d

    def setUp(self):
        super().setUp()
        self.store.clear()

    # --- helpers ---------------------------------------------------------------------------

    def put(self, rel, data=b"", mode=0o644):
        """A file of the sandbox user's, and its new parents: nothing else's ctime moves (the
        file index knows the others' versions by it)."""
        p = self.host(rel)
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = self.host("/".join(parts[:i]))
            if not os.path.isdir(d):
                os.mkdir(d)
                os.chown(d, UID, UID)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        os.chown(p, UID, UID)

    def own(self):
        os.system("chown -R -h %d:%d %s" % (UID, UID, self.ws))

    def push(self, **fields):
        return self.fs.call("SyncPush", **fields)

    def pull(self, **fields):
        return self.fs.call("SyncPull", **fields)

    def wipe(self):
        self.clean_workspace()

    def sample_tree(self):
        """Files of every size class around the block size, modes, empty and nested directories,
        in-workspace symlinks (relative and absolute), a name that is not UTF-8."""
        rnd = random.Random(13)
        self.put("empty", b"")
        self.put("small.txt", b"hello\n", 0o600)
        self.put("exec.sh", b"#!/bin/sh\necho hi\n", 0o755)
        self.put("block.bin", rnd.randbytes(BLOCK), 0o640)
        self.put("block-plus-one.bin", rnd.randbytes(BLOCK + 1))
        self.put("deep/a/b/c/nine.bin", rnd.randbytes(9 * MiB))
        self.put("deep/a/zeros", bytes(3 * MiB))
        os.makedirs(self.host("empty-dir/inner-empty"))
        os.chmod(self.host("empty-dir"), 0o750)
        os.symlink("deep/a/zeros", self.host("rel-link"))
        os.symlink("/workspace/small.txt", self.host("abs-link"))
        os.symlink("../b", self.host("deep/a/up-link"))
        with open(os.path.join(self.ws.encode(), b"name-\xff"), "wb") as f:
            f.write(b"not utf-8")
        self.own()

    # --- round trip ------------------------------------------------------------------------

    def test_round_trip_is_byte_identical_with_modes_empty_dirs_and_symlinks(self):
        self.sample_tree()
        before = tree_of(self.ws)
        r = self.push()
        self.assertTrue(r.snapshot)
        self.assertEqual(r.files, 8)
        self.assertEqual(r.symlinks, 3)
        self.assertEqual(r.bytes, sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.ws)
                                      for f in fs if not os.path.islink(os.path.join(d, f))))
        # Blocks: empty 0, small 1, exec 1, block 1, block+1 2, nine 3, zeros 1, name-\xff 1
        self.assertEqual(r.blobs, 10)
        self.assertEqual(r.blobs_uploaded, 10)
        self.assertEqual(len(self.store.blobs()), 10)
        self.assertEqual(self.store.snapshots(), [r.snapshot])
        self.wipe()
        p = self.pull()
        self.assertEqual(p.snapshot, r.snapshot)
        self.assertEqual((p.files, p.symlinks), (8, 3))
        self.assertEqual(tree_of(self.ws), before)
        # Written as the sandbox user.
        self.assertEqual(os.lstat(self.host("deep/a/b/c/nine.bin")).st_uid, UID)
        self.assertEtcUntouched()

    def test_a_fresh_sidecar_pulls_what_another_pushed(self):
        self.sample_tree()
        before = tree_of(self.ws)
        r = self.push()
        # Another tenant's sidecar on the same store sees none of it...
        stranger = self.daemon_files(self.new_daemon())
        self.assertEqual(list(stranger.call("SyncList").snapshots), [])
        self.assertStatus("NOT_FOUND", stranger.call, "SyncPull", snapshot=r.snapshot)
        # ...the same tenant's (its key) sees all of it.
        other = self.new_daemon(same_tenant=True)
        if True:
            f = self.daemon_files(other)
            p = f.call("SyncPull", snapshot=r.snapshot)
            self.assertEqual(p.files, 8)
            self.assertEqual(tree_of(other.workspace), before)
            # and the latest without naming it
            shutil.rmtree(os.path.join(other.workspace, "deep"))
            f.call("SyncPull")
            self.assertEqual(tree_of(other.workspace), before)

    # --- incremental -----------------------------------------------------------------------

    def test_a_large_file_with_one_changed_block_uploads_one_blob(self):
        data = bytearray(random.Random(1).randbytes(5 * BLOCK))
        self.put("big.bin", bytes(data))
        first = self.push()
        self.assertEqual(first.blobs_uploaded, 5)
        with open(self.host("big.bin"), "r+b") as f:
            f.seek(2 * BLOCK + 12345)
            f.write(b"changed")
        second = self.push()
        self.assertEqual(second.blobs_uploaded, 1)
        self.assertEqual(len(self.store.blobs()), 6)
        self.assertEqual(second.files_read, 1)
        self.wipe()
        self.pull(snapshot=second.snapshot)
        data[2 * BLOCK + 12345:2 * BLOCK + 12352] = b"changed"
        with open(self.host("big.bin"), "rb") as f:
            self.assertEqual(f.read(), bytes(data))

    def test_a_second_push_after_changing_one_file_uploads_exactly_one_blob(self):
        rnd = random.Random(2)
        for i in range(40):
            self.put("src/f%02d.py" % i, rnd.randbytes(1000 + 97 * i))
        first = self.push()
        self.assertEqual(first.blobs_uploaded, 40)
        self.assertEqual(first.files_read, 40)
        self.put("src/f07.py", b"print('changed')\n")
        second = self.push()
        self.assertEqual(second.blobs_uploaded, 1)
        self.assertEqual(len(self.store.blobs()), 41)
        # The 39 others were known from the file index: not read at all.
        self.assertEqual(second.files_read, 1)
        self.assertEqual(second.files, 40)
        third = self.push()
        self.assertEqual((third.blobs_uploaded, third.files_read), (0, 0))

    # --- deletions, mirror -----------------------------------------------------------------

    def test_a_deletion_carries_over_on_pull_with_mirror(self):
        self.put("keep.txt", b"keep")
        self.put("gone.txt", b"gone")
        self.put("dir/gone-too.txt", b"x")
        first = self.push()
        os.unlink(self.host("gone.txt"))
        shutil.rmtree(self.host("dir"))
        second = self.push()
        self.assertEqual(second.files, 1)
        # Back to the first state, then the second: without mirror the deleted files stay...
        self.pull(snapshot=first.snapshot)
        self.assertEqual(self.workspace_names(), ["dir", "gone.txt", "keep.txt"])
        self.pull(snapshot=second.snapshot)
        self.assertEqual(self.workspace_names(), ["dir", "gone.txt", "keep.txt"])
        # ...with mirror they go, and an excluded path is left alone.
        self.put("local.log", b"mine")
        p = self.pull(snapshot=second.snapshot, mirror=True, exclude=["*.log"])
        self.assertEqual(self.workspace_names(), ["keep.txt", "local.log"])
        self.assertEqual(p.removed, 3)

    def test_pull_replaces_what_is_in_the_way(self):
        self.put("x/file", b"1")
        os.symlink("x", self.host("link"))
        self.own()
        r = self.push()
        self.wipe()
        self.put("x", b"a file where a directory was")
        os.makedirs(self.host("link/sub"))
        self.own()
        self.pull(snapshot=r.snapshot)
        self.assertEqual(os.readlink(self.host("link")), "x")
        with open(self.host("x/file"), "rb") as f:
            self.assertEqual(f.read(), b"1")

    # --- corruption ------------------------------------------------------------------------

    def _one_file_snapshot(self, data):
        self.put("f.bin", data)
        r = self.push()
        (name,) = self.store.blobs()
        self.assertEqual(name, hashlib.sha256(data).hexdigest())
        # The workspace moves on; the pull must leave it as it is.
        self.put("f.bin", b"what the workspace holds now")
        return r, name

    def test_a_corrupted_blob_is_detected(self):
        data = random.Random(3).randbytes(100000)
        r, name = self._one_file_snapshot(data)
        raw = bytearray(self.store.read_blob(name))
        raw[len(raw) // 2] ^= 0x40
        self.store.write_blob(name, bytes(raw))
        e = self.assertStatus("DATA_LOSS", self.pull, snapshot=r.snapshot, path=None)
        self.assertIn("/workspace/f.bin", e.message)
        with open(self.host("f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"what the workspace holds now")

    def test_a_blob_replaced_by_other_valid_content_is_detected(self):
        r, name = self._one_file_snapshot(b"the real content" * 100)
        self.store.write_blob(name, zstd().compress(b"the wrong content" * 100))
        e = self.assertStatus("DATA_LOSS", self.pull, snapshot=r.snapshot)
        self.assertIn("corrupt", e.message)
        with open(self.host("f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"what the workspace holds now")

    def test_a_missing_blob_fails_the_pull_clearly(self):
        r, name = self._one_file_snapshot(b"content" * 1000)
        self.store.remove_blob(name)
        e = self.assertStatus("DATA_LOSS", self.pull, snapshot=r.snapshot)
        self.assertIn("/workspace/f.bin", e.message)
        with open(self.host("f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"what the workspace holds now")

    def test_a_manifest_naming_paths_outside_the_tree_restores_nothing(self):
        for bad in (b"../escape", b"a/../../escape", b"/etc/passwd", b"a//b", b"."):
            m = spb.Manifest(version=1, id="bad", created_ms=1, root="/workspace")
            m.entries.add(path=b"fine", type=FILE_TYPE_DIRECTORY, mode=0o755)
            m.entries.add(path=bad, type=FILE_TYPE_DIRECTORY, mode=0o755)
            self.store.write_manifest(m)
            self.assertStatus("DATA_LOSS", self.pull, snapshot="bad")
            self.assertEqual(self.workspace_names(), [], "a manifest with %r restored something" % bad)
            self.assertNothingOutside()

    # --- symlinks that leave the workspace ---------------------------------------------------

    def test_symlinks_outside_the_workspace_are_not_followed_on_push(self):
        with open(os.path.join(self.outside, "secret"), "wb") as f:
            f.write(b"outside secret")
        os.symlink("/etc", self.host("etc-link"))
        os.symlink("/etc/passwd", self.host("passwd-link"))
        os.symlink("../outside/secret", self.host("secret-link"))
        self.put("ok.txt", b"ok")
        r = self.push()
        self.assertEqual((r.files, r.symlinks, r.skipped), (1, 0, 3))
        m = self.store.manifest(r.snapshot)
        self.assertEqual([e.path for e in m.entries], [b"ok.txt"])
        with open("/etc/passwd", "rb") as f:
            passwd = hashlib.sha256(f.read()).hexdigest()
        self.assertNotIn(passwd, self.store.blobs())
        self.assertNotIn(hashlib.sha256(b"outside secret").hexdigest(), self.store.blobs())

    def test_symlinks_outside_the_workspace_are_not_created_on_pull(self):
        m = spb.Manifest(version=1, id="links", created_ms=1, root="/workspace")
        m.entries.add(path=b"to-etc", type=FILE_TYPE_SYMLINK, symlink_target=b"/etc/passwd")
        m.entries.add(path=b"up", type=FILE_TYPE_SYMLINK, symlink_target=b"../outside")
        m.entries.add(path=b"d", type=FILE_TYPE_DIRECTORY, mode=0o755)
        m.entries.add(path=b"d/up2", type=FILE_TYPE_SYMLINK, symlink_target=b"../../tmp")
        m.entries.add(path=b"d/fine", type=FILE_TYPE_SYMLINK, symlink_target=b"../d")
        self.store.write_manifest(m)
        p = self.pull(snapshot="links")
        self.assertEqual((p.symlinks, p.skipped), (1, 3))
        self.assertEqual(self.workspace_names(), ["d"])
        self.assertEqual(self.workspace_names("d"), ["fine"])
        self.assertNothingOutside()

    # --- a push killed halfway, a file rewritten during a push ------------------------------------

    def daemon_files(self, d):
        f = Files(d.port, wire.load_key_file(d.key_file))
        self.addCleanup(f.close)
        return f

    # --- bounds on what a store can make boxkited do (issue 19) -----------------------------

    def test_a_pull_counts_against_the_workspace_quota(self):
        # One block of zeros, its blob a few hundred bytes, named 24 times by a manifest: 96 MiB
        # from one blob. Before, the pull wrote all of it past a 16 MiB quota.
        d = self.new_daemon(["--workspace-quota", "16M"], same_tenant=True)
        f = self.daemon_files(d)
        zeros = os.path.join(d.workspace, "zeros")
        with open(zeros, "wb") as fh:
            fh.write(bytes(BLOCK))
        os.chown(zeros, UID, UID)
        r = f.call("SyncPush")
        m = self.store.manifest(r.snapshot)
        entry = [e for e in m.entries if e.path == b"zeros"][0]
        bomb = spb.Manifest()
        bomb.CopyFrom(m)
        del bomb.entries[:]
        bomb.id, bomb.files, bomb.bytes = "quota-bomb", 24, 24 * BLOCK
        for i in range(24):
            e = bomb.entries.add()
            e.CopyFrom(entry)
            e.path = b"z%02d" % i
        self.store.write_manifest(bomb)
        os.unlink(zeros)
        e = self.assertStatus("RESOURCE_EXHAUSTED", f.call, "SyncPull", snapshot="quota-bomb")
        self.assertIn("workspace quota is 16777216 bytes", e.message)
        written = sum(os.path.getsize(os.path.join(d.workspace, n)) for n in os.listdir(d.workspace))
        self.assertLessEqual(written, 16 * MiB)
        self.assertEqual(written, 4 * BLOCK)  # what fitted was written, whole files only
        # An upload is refused the same way afterwards: the pull's files count as used.
        self.assertStatus("RESOURCE_EXHAUSTED", f.begin, "/workspace/more", 1)

    def test_a_manifest_that_unpacks_to_far_more_is_refused_before_it_is(self):
        # Four million empty entries: 8 MiB that zstd stores in under a kilobyte. Before, reading
        # it took the front's peak up by about 237 MiB (15 GiB at the old 512 MiB limit).
        plain = b"\x08\x01" + b"\x12\x04bomb" + b"\x3a\x00" * (4 << 20)
        stored = zstd().compress(plain, level=19)
        self.assertLess(len(stored), 4096)
        self.store.write_manifest_bytes("bomb", stored)
        before = front_peak(self.daemon)
        e = self.assertStatus("DATA_LOSS", self.fs.call, "SyncPull", snapshot="bomb")
        # A listing reads every manifest: it skips this one, and holds no more for it.
        self.assertEqual([s.name for s in self.fs.call("SyncList").snapshots], [])
        grown = front_peak(self.daemon) - before
        self.assertLess(grown, 16 * MiB, "the front's peak grew by %d MiB" % (grown >> 20))
        self.assertIn("unpacks to %d" % len(plain), e.message)

    def test_a_manifest_of_many_small_entries_decodes_within_its_cap(self):
        # Within the ratio a stored manifest may unpack to, entries that are small on the wire and
        # large in memory: refused once their decoding passes 24 times the plain bytes.
        # 16 KiB that do not compress (one entry's path) let 480 000 empty entries (2 bytes each
        # on the wire, ~130 decoded) stay within the ratio.
        noise = random.Random(19).randbytes(16 << 10)
        plain = b"\x08\x01" + b"\x12\x05small" + b"\x3a\x84\x80\x01\x0a\x80\x80\x01" + noise
        plain += b"\x3a\x00" * 480000
        stored = zstd().compress(plain, level=19)
        self.assertLessEqual(len(plain), 64 * len(stored) + 65536, "not within the stored ratio")
        self.store.write_manifest_bytes("small", stored)
        e = self.assertStatus("DATA_LOSS", self.fs.call, "SyncPull", snapshot="small")
        self.assertIn("decodes to more memory than allowed", e.message)

    def test_a_push_killed_halfway_leaves_no_snapshot_and_the_next_completes_it(self):
        rnd = random.Random(4)
        for i in range(40):
            self.put("big/%02d.bin" % i, rnd.randbytes(BLOCK))
        before = tree_of(self.ws)
        # A boxkited of its own on this workspace (the same tenant: the suite's key), to be killed.
        victim = self.new_daemon(workspace=self.ws, same_tenant=True)
        result = {}

        def push():
            try:
                result["r"] = self.daemon_files(victim).call("SyncPush")
            except Exception as e:  # the daemon is killed under it
                result["e"] = e

        t = threading.Thread(target=push)
        t.start()
        status = self.daemon_files(victim)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            s = status.call("SyncStatus")
            if (s.running and s.blobs_uploaded >= 3) or (not s.running and s.files_done):
                break
            time.sleep(0.005)
        self.assertTrue(s.running and s.blobs_uploaded >= 3, "the push was never seen half done: %s" % s)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        victim.stop()
        t.join(30)
        self.assertNotIn("r", result, "the push finished before it was killed")
        self.assertEqual(self.store.snapshots(), [], "a killed push left a visible snapshot")
        self.assertEqual(list(self.fs.call("SyncList").snapshots), [])
        halfway = len(self.store.blobs())
        self.assertGreater(halfway, 0)
        self.assertLess(halfway, 40)
        r = self.push()
        # The store was asked: what the killed push wrote is not written again.
        self.assertEqual(r.blobs_uploaded, 40 - halfway)
        self.assertEqual(len(self.store.blobs()), 40)
        self.wipe()
        self.pull()
        self.assertEqual(tree_of(self.ws), before)

    def test_a_file_rewritten_during_push_is_not_stored_torn(self):
        size = 6 * BLOCK
        self.put("a", b"A" * size)
        self.put("b", b"B" * size)
        self.put("f", b"A" * size)
        stop = time.monotonic() + 20
        # In the sandbox: f rewritten in place, over and over, as A... then B... (cp truncates and
        # writes: a reader sees mixes of the two).
        writer = threading.Thread(target=lambda: self.files().exec(
            "end=$(( $(date +%%s) + %d )); while [ $(date +%%s) -lt $end ]; do cp a f; cp b f; done" %
            int(stop - time.monotonic()), timeout_ms=60000))
        writer.start()
        time.sleep(0.5)
        outcomes = []
        try:
            while time.monotonic() < stop - 2:
                try:
                    r = self.push()
                except boxkite.BoxkiteError as e:
                    self.assertEqual(status_name(e.code), "ABORTED", str(e))
                    self.assertIn("/workspace/f", e.message)
                    outcomes.append("aborted")
                    continue
                m = self.store.manifest(r.snapshot)
                (entry,) = [e for e in m.entries if e.path == b"f"]
                # Every block is of one version: all A or all B, whatever size f had when read.
                versions = set()
                for k, h in enumerate(entry.blocks):
                    n = min(BLOCK, entry.size - k * BLOCK)
                    letters = [c for c in (b"A", b"B") if hashlib.sha256(c * n).digest() == h]
                    self.assertTrue(letters, "block %d of f stored torn (size %d)" % (k, entry.size))
                    versions.update(letters)
                self.assertLessEqual(len(versions), 1, "f stored as a mix of two versions")
                outcomes.append("stored")
        finally:
            writer.join(60)
        # Whichever happened, each push ended one of the two ways checked above.
        self.assertTrue(outcomes)
        sys.stderr.write("(pushes during rewrites: %d stored whole, %d aborted) " % (
            outcomes.count("stored"), outcomes.count("aborted")))

    # --- excludes, list, status, urls --------------------------------------------------------

    def test_excludes(self):
        self.put("node_modules/pkg/index.js", b"x")
        self.put("src/.cache/c", b"x")
        self.put("src/main.c", b"x")
        self.put("build.log", b"x")
        self.put("sub/build.log", b"x")
        self.put("out/keep.log", b"x")
        r = self.push()
        names = {e.path for e in self.store.manifest(r.snapshot).entries}
        self.assertIn(b"node_modules/pkg/index.js", names, "defaults are applied only on request")
        r = self.push(default_excludes=True, exclude=["*.log", "out"])
        names = {e.path for e in self.store.manifest(r.snapshot).entries}
        self.assertEqual(names, {b"src", b"src/main.c", b"sub"})
        r = self.push(exclude=["sub/*.log"])
        names = {e.path for e in self.store.manifest(r.snapshot).entries}
        self.assertIn(b"build.log", names)
        self.assertNotIn(b"sub/build.log", names)

    def test_list_and_status(self):
        self.put("a", b"12345")
        first = self.push(snapshot="first")
        self.put("b", b"678")
        second = self.push()
        snaps = self.fs.call("SyncList").snapshots
        self.assertEqual([s.name for s in snaps], ["first", second.snapshot])
        self.assertEqual([(s.files, s.bytes) for s in snaps], [(1, 5), (2, 8)])
        self.assertEqual(snaps[0].path, "/workspace")
        s = self.fs.call("SyncStatus")
        self.assertFalse(s.running)
        self.assertEqual((s.operation, s.snapshot, s.status), ("push", second.snapshot, 0))
        self.assertEqual(s.files_done, 2)
        self.assertStatus("ALREADY_EXISTS", self.push, snapshot="first")
        self.assertStatus("INVALID_ARGUMENT", self.push, snapshot="../x")
        self.assertStatus("NOT_FOUND", self.pull, snapshot="nonesuch")
        self.assertEqual(first.snapshot, "first")

    def test_stores_other_than_the_configured_are_refused(self):
        self.put("a", b"1")
        for url in ("file:///tmp", "file://" + self.store.dir + "-other", self.store.url + "/../x",
                    self.store.url + "/a/./b", "http://127.0.0.1/"):
            e = self.assertStatus("PERMISSION_DENIED" if "%" not in url else "INVALID_ARGUMENT", self.push, url=url)
            self.assertIn("sync-store", e.message)
        # A prefix under the store is a store of its own.
        r = self.push(url=self.store.url + "/session-1")
        self.assertEqual(self.store.snapshots("session-1"), [r.snapshot])
        self.assertEqual(self.store.snapshots(), [])
        self.assertStatus("NOT_FOUND", self.pull, url=self.store.url + "/session-2")

    def test_restore_from_at_start_up(self):
        self.sample_tree()
        before = tree_of(self.ws)
        self.push(url=self.store.url + "/moving")
        ws = tempfile.mkdtemp(prefix="boxkite-restore-ws-")
        self.addCleanup(shutil.rmtree, ws, True)
        os.chown(ws, UID, UID)
        # The operator's flag names the store's real place: under the tenant's prefix.
        d = self.new_daemon(["--restore-from", "%s/%s/moving" % (self.store.url, self.store.tenant)], workspace=ws)
        # Ready means served: the workspace was whole before the first request.
        self.assertEqual(tree_of(ws), before)
        d.stop()
        # Nothing under the prefix yet: a first pod starts empty.
        ws2 = tempfile.mkdtemp(prefix="boxkite-restore-ws-")
        self.addCleanup(shutil.rmtree, ws2, True)
        d = self.new_daemon(["--restore-from", self.store.url + "/new"], workspace=ws2)
        self.assertEqual(os.listdir(ws2), [])
        self.assertIn("no snapshot there yet", d.log())

    def test_a_reset_pushes_the_workspace_before_it_wipes_it(self):
        # --sync-on-reset: the last tenant's workspace is a snapshot before it goes, and a fresh
        # sidecar pulls it back whole.
        self.sample_tree()
        before = tree_of(self.ws)
        d = self.new_daemon(["--sync-on-reset", self.store.url + "/recycled"], workspace=self.ws)
        key = wire.load_key_file(d.key_file)
        fs = Files(d.port, key)
        self.addCleanup(fs.close)
        r = fs.call("Reset")
        self.assertTrue(r.snapshot, "the snapshot's id is in the answer")
        # Under the departing tenant's prefix: the key that signed the Reset.
        departing = wire.store_prefix(key)
        self.assertEqual(self.store.snapshots("recycled", tenant=departing), [r.snapshot])
        self.assertEqual(os.listdir(self.ws), [], "then the workspace was wiped")
        ws = tempfile.mkdtemp(prefix="boxkite-reset-ws-")
        self.addCleanup(shutil.rmtree, ws, True)
        os.chown(ws, UID, UID)
        self.new_daemon(["--restore-from", "%s/%s/recycled" % (self.store.url, departing)], workspace=ws)
        self.assertEqual(tree_of(ws), before)

    # --- bkctl sync ----------------------------------------------------------------------------

    def bkctl(self, *args, stderr=None):
        bkctl = os.environ.get("BOXKITE_BKCTL", os.path.join(os.environ.get("BOXKITE_BUILD", ""), "bkctl"))
        if not os.access(bkctl, os.X_OK):
            self.skipTest("SKIP: %s is not built" % bkctl)
        r = subprocess.run([bkctl, "--url", "tcp://127.0.0.1:%d" % self.daemon.port, "--key-file",
                            self.daemon.key_file] + list(args), stdout=subprocess.PIPE,
                           stderr=stderr or subprocess.PIPE, timeout=300)
        err = r.stderr.decode(errors="replace") if r.stderr else ""
        self.assertNotIn("Sanitizer", err)
        self.assertEqual(r.returncode, 0, "bkctl %s: %s" % (" ".join(args), err))
        return r.stdout.decode()

    def test_bkctl_sync_push_pull_ls(self):
        import json
        self.sample_tree()
        before = tree_of(self.ws)
        pushed = json.loads(self.bkctl("-o", "json", "sync", "push", "--to", self.store.url + "/cli", "--id", "one"))
        self.assertEqual((pushed["snapshot"], pushed["files"], pushed["blobs_uploaded"]), ("one", 8, 10))
        self.put("extra", b"not in the snapshot")
        listed = json.loads(self.bkctl("-o", "json", "sync", "ls", "--from", self.store.url + "/cli"))
        self.assertEqual([(s["snapshot"], s["files"], s["path"]) for s in listed], [("one", 8, "/workspace")])
        pulled = json.loads(self.bkctl("-o", "json", "sync", "pull", "--from", self.store.url + "/cli", "--mirror"))
        self.assertEqual((pulled["snapshot"], pulled["removed"]), ("one", 1))
        self.assertEqual(tree_of(self.ws), before)
        text = self.bkctl("sync", "ls", "--from", self.store.url + "/cli")
        self.assertRegex(text, r"^one  \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +8 files ")
        self.assertIn("pushed ", self.bkctl("sync", "push", "-x", "deep"))

    def test_bkctl_sync_summaries_count_in_words(self):
        """'1 files read' it said; one of each now."""
        self.put("d/one.txt", b"one\n")
        os.symlink("d/one.txt", self.host("link"))
        self.own()
        self.assertRegex(self.bkctl("sync", "push", "--id", "single"),
                         r"^pushed single: 1 file \(4 B\), 1 directory, 1 symlink; 1 of 1 blob uploaded \(\d+ B\), "
                         r"1 file read, 0 skipped\n$")
        self.assertRegex(self.bkctl("sync", "pull", "--id", "single"),
                         r"^pulled single: 1 file \(4 B\), 1 directory, 1 symlink; 0 removed, 0 skipped\n$")

    def test_bkctl_sync_shows_progress_on_a_terminal(self):
        rnd = random.Random(5)
        for i in range(48):
            self.put("p/%02d.bin" % i, rnd.randbytes(BLOCK))
        master, slave = os.openpty()
        self.addCleanup(os.close, master)
        chunks = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: _read_pty(master), b"")))
        reader.start()
        try:
            out = self.bkctl("sync", "push", stderr=slave)
        finally:
            os.close(slave)
            reader.join(10)
        shown = b"".join(chunks).decode(errors="replace")
        self.assertIn("pushed ", out)
        # A push's own work (its total is known only at its end): files walked, of them read, and
        # what it uploaded — an unchanged file is walked, not read.
        m = re.findall(r"push (\d+) files \([\d.]+ (?:B|[KMG]iB)\) walked, (\d+) read, (\d+) blobs uploaded "
                       r"\([\d.]+ (?:B|[KMG]iB)\)  [\d.]+ s", shown)
        self.assertTrue(m, shown)
        self.assertTrue(all(int(read) <= int(walked) for walked, read, _ in m), m)
        self.assertTrue(shown.endswith("\r\x1b[K"), "the progress line is not cleared: %r" % shown[-80:])


def _read_pty(fd):
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO once the other end is closed
        return b""


S3_BUCKET = "boxkite-test"
S3_KEY, S3_SECRET = "S3RVER", "S3RVER"  # the one key pair s3rver knows
S3RVER = os.path.join(HERE, "s3", "node_modules", "s3rver", "bin", "s3rver.js")
sys.path.insert(0, os.path.join(HERE, "s3"))
import sigv4_proxy  # noqa: E402


class S3Store(FileStore):
    """s3rver (npm, pinned in tests/files/s3/package-lock.json, installed by make test-deps) on a free
    loopback port: a real S3-speaking server, its objects kept on disk under self.dir as
    KEY._S3rver_object, where the tests count them; reads, writes and deletions of the tests go
    through its S3 API (curl --aws-sigv4), as a user of the store would make them. s3rver 3.7.1
    refuses an unknown access key but does not check V4 signatures, so boxkited talks to it
    through tests/files/s3/sigv4_proxy.py, which does (signature, payload hash) and can answer
    503 to first tries."""

    SUFFIX = "._S3rver_object"

    @staticmethod
    def skip_reason():
        if not shutil.which("node"):
            return "no node: s3rver cannot run (make test-deps installs nodejs)"
        if not os.path.exists(S3RVER):
            return "%s is missing: run make test-deps (npm ci in tests/files/s3)" % S3RVER
        if not shutil.which("curl"):
            return "no curl (make test-deps installs it)"
        return None

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="boxkite-s3rver-")
        self._undo = undo_at_exit(shutil.rmtree, self.dir, True)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = open(os.path.join(self.dir, "s3rver.log"), "wb")
        self.proc = subprocess.Popen(["node", S3RVER, "-d", os.path.join(self.dir, "data"), "-a", "127.0.0.1",
                                      "-p", str(self.port), "--configure-bucket", S3_BUCKET, "--silent"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self._undo_proc = undo_at_exit(self._stop_server)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("s3rver did not start; its log: %s" % open(self.log.name).read())
                time.sleep(0.1)
        self.proxy = sigv4_proxy.Proxy(self.port, S3_KEY, S3_SECRET)
        self.endpoint = "http://127.0.0.1:%d" % self.proxy.start()
        self.direct = "http://127.0.0.1:%d" % self.port
        self.url = "s3://%s/t" % S3_BUCKET
        self.top = os.path.join(self.dir, "data", S3_BUCKET, "t")

    def _stop_server(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def close(self):
        self.proxy.stop()
        self._stop_server()
        undone(self._undo_proc)
        super().close()

    @contextlib.contextmanager
    def environment(self):
        """The credentials in boxkited's environment while it starts (it reads and drops them)."""
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = S3_KEY, S3_SECRET
        try:
            yield
        finally:
            del os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]

    def args(self):
        return ["--sync-store", self.url, "--s3-endpoint", self.endpoint, "--s3-path-style"]

    def clear(self):
        shutil.rmtree(self.top, ignore_errors=True)

    def _objects(self, sub):
        names = []
        for dirpath, _, filenames in os.walk(os.path.join(self.top, sub)):
            names.extend(n[:-len(self.SUFFIX)] for n in filenames if n.endswith(self.SUFFIX))
        return sorted(names)

    def blobs(self, prefix="", tenant=None):
        return self._objects(os.path.join(self.tenant if tenant is None else tenant, prefix, "blobs"))

    def snapshots(self, prefix="", tenant=None):
        return [n for n in self._objects(os.path.join(self.tenant if tenant is None else tenant, prefix, "snapshots"))]

    def _key_url(self, key):
        return "%s/%s/t/%s/%s" % (self.direct, S3_BUCKET, self.tenant, key)

    def _curl(self, *args, data=None):
        payload = hashlib.sha256(data or b"").hexdigest()
        r = subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                            "%s:%s" % (S3_KEY, S3_SECRET), "-H", "x-amz-content-sha256: " + payload] + list(args),
                           input=data, capture_output=True, timeout=60)
        if r.returncode:
            raise AssertionError("curl %s: %s" % (args, r.stderr.decode(errors="replace")))
        return r.stdout

    def read_blob(self, hexname):
        return self._curl(self._key_url("blobs/%s/%s" % (hexname[:2], hexname)))

    def write_blob(self, hexname, data):
        self._curl("-X", "PUT", "--data-binary", "@-", self._key_url("blobs/%s/%s" % (hexname[:2], hexname)),
                   data=data)

    def remove_blob(self, hexname):
        self._curl("-X", "DELETE", self._key_url("blobs/%s/%s" % (hexname[:2], hexname)))

    def manifest(self, snapshot_id):
        m = spb.Manifest()
        m.ParseFromString(zstd().decompress(self._curl(self._key_url("snapshots/" + snapshot_id)),
                                            limit=512 * MiB))
        return m

    def write_manifest(self, m):
        self.write_manifest_bytes(m.id, zstd().compress(m.SerializeToString()))

    def write_manifest_bytes(self, snapshot_id, stored):
        self._curl("-X", "PUT", "--data-binary", "@-", self._key_url("snapshots/" + snapshot_id), data=stored)


class HostileS3:
    """An S3 endpoint on loopback that does what no store should (issue 19), one way per mode:
      hang   reads each request and never answers it;
      loop   answers every listing "truncated", with the same continuation token and one more name
             each time;
      flood  lists one snapshot, and answers its GET with 256 MiB of garbage and no length."""

    def __init__(self, mode):
        import http.server
        self.mode, self.requests = mode, 0
        self.release = threading.Event()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_one(self):
                stub.requests += 1
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                if stub.mode == "hang":
                    stub.release.wait(300)
                    return
                if "list-type=2" in self.path:
                    # Under the prefix asked (the tenant's, t/<store prefix>/snapshots/).
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    listed = query.get("prefix", ["t/snapshots/"])[0]
                    key = listed + ("s%d" % stub.requests if stub.mode == "loop" else "big")
                    more = "true" if stub.mode == "loop" else "false"
                    body = ("<ListBucketResult><Contents><Key>%s</Key></Contents><IsTruncated>%s</IsTruncated>"
                            "<NextContinuationToken>same</NextContinuationToken></ListBucketResult>" % (key, more))
                    self.answer(200, body.encode())
                elif stub.mode == "flood" and self.path.endswith("/snapshots/big"):
                    self.send_response(200)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    chunk = random.Random(256).randbytes(MiB)
                    try:
                        for _ in range(256):
                            self.wfile.write(chunk)
                    except OSError:
                        pass
                    self.close_connection = True
                else:
                    self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")

            def answer(self, code, body):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = handle_one

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class HostileS3Test(unittest.TestCase):
    """Every store call has a deadline, a size bound and a cancel: a store that hangs cannot hold
    a Reset or a SIGTERM, one that lists for ever cannot keep a listing going, and one that sends
    without end cannot make the front buffer it. Before, a push to a store that never answered
    made Reset give up after 30 s (the sidecar then served only Health for good) and SIGTERM wait,
    a listing grew for ever, and a 256 MiB object was buffered whole."""

    def daemon(self, mode):
        stub = HostileS3(mode)
        self.addCleanup(stub.close)
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = "AKIDEXAMPLE", "secret"
        try:
            d = Daemon(["--sync-store", "s3://hostile/t", "--s3-endpoint", stub.endpoint, "--s3-path-style"])
            d.__enter__()
        finally:
            del os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        self.addCleanup(d.stop)
        key = wire.load_key_file(d.key_file)
        return stub, d, lambda: Files(d.port, key, timeout=60)

    def push_in_background(self, files, stub):
        out = {}

        def push():
            f = files()
            try:
                out["push"] = f.call("SyncPush")
            except boxkite.BoxkiteError as e:
                out["error"] = e
            finally:
                f.close()
        t = threading.Thread(target=push, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while not stub.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(stub.requests, "the push never reached the store")
        return t, out

    def test_reset_cancels_a_push_the_store_never_answers(self):
        stub, d, files = self.daemon("hang")
        t, out = self.push_in_background(files, stub)
        f = files()
        self.addCleanup(f.close)
        started = time.monotonic()
        f.call("Reset")  # OK: the push was cancelled, not waited out
        took = time.monotonic() - started
        t.join(10)
        self.assertIn("error", out, out)
        self.assertEqual(status_name(out["error"].code), "CANCELLED", out["error"])
        self.assertLess(took, 10, "Reset took %.1f s" % took)
        # And the sidecar serves on.
        self.assertEqual(f.exec("echo served").stdout, b"served\n")

    def test_sigterm_ends_boxkited_while_a_push_waits_on_the_store(self):
        stub, d, files = self.daemon("hang")
        self.push_in_background(files, stub)
        started = time.monotonic()
        status = d.stop(term_wait=5)
        self.assertFalse(d.hung, "boxkited was still running 5 s after SIGTERM")
        self.assertEqual(status, 0, d.last_log)
        self.assertLess(time.monotonic() - started, 5)

    def test_a_listing_that_never_ends_is_refused(self):
        stub, d, files = self.daemon("loop")
        f = files()
        self.addCleanup(f.close)
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            f.call("SyncList")
        self.assertEqual(status_name(cm.exception.code), "DATA_LOSS", cm.exception)
        self.assertIn("a continuation token repeated", cm.exception.message)
        self.assertLessEqual(stub.requests, 2)

    def test_an_object_without_end_is_not_buffered_past_its_bound(self):
        stub, d, files = self.daemon("flood")
        f = files()
        self.addCleanup(f.close)
        before = front_peak(d)
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            f.call("SyncPull")
        grown = front_peak(d) - before
        self.assertEqual(status_name(cm.exception.code), "DATA_LOSS", cm.exception)
        # The manifest's bound (64 MiB stored) and the slack of the error document, no more.
        self.assertLess(grown, 100 * MiB, "the front's peak grew by %d MiB" % (grown >> 20))


class StoreCheckedAtStartUp(unittest.TestCase):
    """A file:// store the front cannot use is refused at start-up, with the directory that stops it
    and what to change — it was accepted, and the first push failed with a bare 'Permission denied';
    so is an s3:// store without credentials. Every store is checked, not only the first."""

    def start(self, stores, wrap=(), env=None, extra=()):
        """boxkited with these stores, extra options and env (else ours), until it exits or serves
        (then stopped): (served, stderr)."""
        d = tempfile.mkdtemp(prefix="boxkite-store-check-")
        self.addCleanup(shutil.rmtree, d, True)
        subprocess.run([boxkited_process.BKCTL, "keygen", d + "/key"], check=True, capture_output=True)
        args = [*wrap, boxkited_process.BOXKITED, "--listen", "ipc://%s/s.sock" % d, "--key-file", d + "/key",
                "--workspace", d + "/ws", "--state-dir", d + "/state"]
        for store in stores:
            args += ["--sync-store", store]
        args += extra
        with open(d + "/log", "w") as log:
            p = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while p.poll() is None and "listening on" not in open(d + "/log").read():
            self.assertLess(time.monotonic(), deadline, "boxkited neither served nor exited")
            time.sleep(0.05)
        served = p.poll() is None
        if served:
            p.terminate()
        p.wait(timeout=30)
        return served, open(d + "/log").read()

    def test_a_store_below_a_directory_the_front_cannot_search(self):
        locked = tempfile.mkdtemp(prefix="boxkite-locked-")  # mode 0700, root's
        self.addCleanup(shutil.rmtree, locked, True)
        ok = tempfile.mkdtemp(prefix="boxkite-ok-store-")
        self.addCleanup(shutil.rmtree, ok, True)
        served, log = self.start(["file://" + ok, "file://%s/snapshots" % locked])
        self.assertFalse(served, log[-2000:])
        self.assertIn("--sync-store file://%s/snapshots: the front (uid 65532) cannot reach it past %s: give it "
                      "search permission there (e.g. chmod o+x %s) or put the store elsewhere" % (locked, locked, locked),
                      log)
        # What it says to change is enough.
        os.chmod(locked, 0o701)
        served, log = self.start(["file://" + ok, "file://%s/snapshots" % locked])
        self.assertTrue(served, log[-2000:])

    def test_a_store_on_a_read_only_mount(self):
        ro = tempfile.mkdtemp(prefix="boxkite-ro-store-")
        self.addCleanup(shutil.rmtree, ro, True)
        os.chmod(ro, 0o755)
        os.mkdir(ro + "/store")
        os.chown(ro + "/store", 65532, 65532)
        os.chmod(ro + "/store", 0o700)
        if not shutil.which("unshare"):
            self.skipTest("SKIP: no unshare (util-linux) to mount in a namespace of the test's own")
        # Read-only in a mount namespace of its own: nothing of this machine's mounts changes.
        wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount --bind -o ro "$0" "$0" && exec "$@"', ro]
        served, log = self.start(["file://%s/store" % ro], wrap)
        self.assertFalse(served, log[-2000:])
        self.assertIn("--sync-store file://%s/store: the front (uid 65532) cannot read and write it: make it the "
                      "front's (chown 65532 %s/store) on a filesystem mounted read-write: Read-only file system"
                      % (ro, ro), log)


    def test_an_s3_store_without_credentials(self):
        """It was accepted, and every push failed; it is not contacted at start-up (an endpoint away
        for a moment must not keep the sandbox from serving), but its credentials are there or not."""
        ok = tempfile.mkdtemp(prefix="boxkite-ok-store-")
        self.addCleanup(shutil.rmtree, ok, True)
        # An endpoint nothing listens on: only the credentials decide.
        stores = ["file://" + ok, "s3://bucket/snapshots"]
        s3 = ["--s3-endpoint", "http://127.0.0.1:9", "--s3-path-style"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        served, log = self.start(stores, env=env, extra=s3)
        self.assertFalse(served, log[-2000:])
        self.assertIn("--sync-store s3://bucket/snapshots: no S3 credentials: give --s3-credentials FILE "
                      "('ACCESS_KEY_ID SECRET_ACCESS_KEY [SESSION_TOKEN]', mode 0600) or AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY in boxkited's environment", log)
        served, log = self.start(stores, env=dict(env, AWS_ACCESS_KEY_ID="AKIDEXAMPLE"), extra=s3)
        self.assertFalse(served, log[-2000:])
        self.assertIn("--sync-store s3://bucket/snapshots: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is "
                      "not: set both (or give --s3-credentials FILE)", log)
        served, log = self.start(stores, env=dict(env, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="s",
                                                  AWS_SESSION_TOKEN="t" * 5000), extra=s3)
        self.assertFalse(served, log[-2000:])
        self.assertIn("--sync-store s3://bucket/snapshots: AWS_SESSION_TOKEN is too long (at most 4095 bytes)", log)
        # What it says to give is enough.
        served, log = self.start(stores, env=dict(env, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="s"),
                                 extra=s3)
        self.assertTrue(served, log[-2000:])
        creds = tempfile.NamedTemporaryFile("w", prefix="boxkite-s3-creds-")  # mode 0600
        self.addCleanup(creds.close)
        creds.write("AKIDEXAMPLE secret\n")
        creds.flush()
        served, log = self.start(stores, env=env, extra=s3 + ["--s3-credentials", creds.name])
        self.assertTrue(served, log[-2000:])


@unittest.skipIf(spb is None, "the boxkite package is not installed: make test-files installs it")
class FileStoreSyncTest(SyncSuite, FilesTestCase):
    STORE = FileStore


@unittest.skipIf(spb is None, "the boxkite package is not installed: make test-files installs it")
class S3StoreSyncTest(SyncSuite, FilesTestCase):
    """The same suite on s3://, and what only S3 has: credentials, 403, 404."""
    STORE = S3Store

    def test_the_credentials_never_reach_an_exec_nor_the_log(self):
        self.put("a", b"x")
        self.push()
        env = self.fs.exec("env; cat /proc/self/environ; cat /proc/1/environ 2>/dev/null; true").stdout
        self.assertNotIn(b"AWS_", env)
        self.assertNotIn(S3_SECRET.encode(), env)
        # boxkited read them, then took them out of its environment: nothing it starts sees them.
        for pid in [self.daemon.proc.pid] + boxkited_process.descendants(self.daemon.proc.pid):
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    self.assertNotIn(b"AWS_SECRET_ACCESS_KEY", f.read(), "pid %d" % pid)
            except FileNotFoundError:
                pass
        self.assertNotIn(S3_SECRET, self.daemon.log())

    def test_wrong_credentials_are_a_clear_403(self):
        bad = tempfile.NamedTemporaryFile(prefix="boxkite-s3-creds-", delete=False)
        self.addCleanup(os.unlink, bad.name)
        bad.write(b"%s not-the-secret\n" % S3_KEY.encode())
        bad.close()
        d = Daemon(list(self.store.args()) + ["--s3-credentials", bad.name])
        d.__enter__()
        self.addCleanup(d.stop)
        f = self.daemon_files(d)
        e = self.assertStatus("PERMISSION_DENIED", f.call, "SyncPush")
        self.assertIn("403", e.message)
        self.assertNotIn("not-the-secret", d.log() + e.message)

    def test_every_request_is_signed_and_its_body_with_it(self):
        self.sample_tree()
        before = self.store.proxy.verified
        refused = len(self.store.proxy.refused)
        self.push()
        self.wipe()
        self.pull()
        self.assertGreater(self.store.proxy.verified - before, 20)
        self.assertEqual(self.store.proxy.refused[refused:], [])

    def test_transient_errors_are_retried(self):
        self.put("a.bin", random.Random(6).randbytes(2 * BLOCK + 5))
        self.put("b.txt", b"b")
        self.store.proxy.fail_first = {"/blobs/"}
        self.addCleanup(setattr, self.store.proxy, "fail_first", set())
        r = self.push()
        # Every blob's first HEAD and PUT was answered 503; each was tried again.
        self.assertEqual(r.blobs_uploaded, 4)
        self.assertGreaterEqual(len([p for p in self.store.proxy.failed_once if "/blobs/" in p]), 4)
        self.wipe()
        self.pull()
        with open(self.host("a.bin"), "rb") as f:
            self.assertEqual(f.read(), random.Random(6).randbytes(2 * BLOCK + 5))

    def test_a_missing_bucket_is_a_clear_404(self):
        d = self.new_daemon(["--sync-store", "s3://no-such-bucket/x"])
        f = self.daemon_files(d)
        e = self.assertStatus("NOT_FOUND", f.call, "SyncPush", url="s3://no-such-bucket/x")
        self.assertIn("no such bucket", e.message)


if __name__ == "__main__":
    unittest.main()
