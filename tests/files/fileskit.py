"""Shared machinery of the files tier (tests/files): a real boxkited per test class, driven
through the boxkite package's wire layer (installed: tests/python/python.mk), with the host side
of its workspace checked as root.

What is here, and nothing more:
  * Daemon       -- boxkited_process.Boxkited (extra flags such as --root or --upload-idle, a
                    workspace anywhere: a tmpfs the test mounted; never outliving the test run)
                    with the sandbox waited for and, at the end, stopped even if the run is cut
                    short;
  * Files        -- the File* and Exec rpcs as small methods (upload in chunks and commit with
                    the content hash, download to the end with the content hash checked, list
                    all pages, ...);
  * zstd         -- compress/decompress through libzstd.so.1 (ctypes: no Python binding needed);
  * FilesTestCase-- one daemon per class, a clean workspace per test, assertStatus(), a
                    snapshot of /etc to prove it untouched, SKIP with the reason when a test
                    cannot run here.
"""

import atexit
import ctypes
import ctypes.util
import hashlib
import os
import shutil
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

try:
    import boxkite  # noqa: E402
    from boxkite import wire  # noqa: E402
    from boxkite.errors import detail_name, status_name  # noqa: E402
    from boxkite.v1 import boxkite_pb2 as pb  # noqa: E402
    import boxkited_process  # noqa: E402
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-files, which installs the package
    boxkite = wire = pb = boxkited_process = detail_name = status_name = None
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-files installs it" % e

MiB = 1 << 20
CHUNK_MAX = 4 * MiB  # BK_FILE_CHUNK_MAX (server/files/files.h)


def sha256(data):
    return hashlib.sha256(data).digest()


def content_hash(data):
    return wire.content_hash(data)



def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(8 * MiB)
            if not block:
                return h.digest()
            h.update(block)


def skip_reason():
    """Why the tier cannot run here, or None."""
    if IMPORT_ERROR:
        return IMPORT_ERROR
    why = boxkited_process.missing_binaries()
    if why:
        return why
    if os.geteuid() != 0:
        return "not root: boxkited makes a sandbox (namespaces, mounts), and the tests check the host side as root"
    return None


# --- zstd through libzstd ---------------------------------------------------------------------

class Zstd:
    def __init__(self):
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        self.lib = ctypes.CDLL(name)
        self.lib.ZSTD_compressBound.restype = ctypes.c_size_t
        self.lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        self.lib.ZSTD_compress.restype = ctypes.c_size_t
        self.lib.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                           ctypes.c_int]
        self.lib.ZSTD_decompress.restype = ctypes.c_size_t
        self.lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.ZSTD_isError.restype = ctypes.c_uint
        self.lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        self.lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
        self.lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def compress(self, data, level=3):
        """One frame, its content size in the header (ZSTD_compress always writes it)."""
        cap = self.lib.ZSTD_compressBound(len(data))
        out = ctypes.create_string_buffer(cap)
        n = self.lib.ZSTD_compress(out, cap, data, len(data), level)
        if self.lib.ZSTD_isError(n):
            raise ValueError("ZSTD_compress failed")
        return out.raw[:n]

    def compress_without_size(self, data, level=3):
        """One frame whose header does not say its content size (ZSTD_c_contentSizeFlag = 0)."""
        lib = self.lib
        lib.ZSTD_createCCtx.restype = ctypes.c_void_p
        lib.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
        lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
        lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.ZSTD_compress2.restype = ctypes.c_size_t
        lib.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                       ctypes.c_size_t]
        cctx = lib.ZSTD_createCCtx()
        try:
            ZSTD_c_compressionLevel, ZSTD_c_contentSizeFlag = 100, 200
            if lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) or \
                    lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0)):
                raise ValueError("ZSTD_CCtx_setParameter failed")
            cap = lib.ZSTD_compressBound(len(data))
            out = ctypes.create_string_buffer(cap)
            n = lib.ZSTD_compress2(cctx, out, cap, data, len(data))
            if lib.ZSTD_isError(n):
                raise ValueError("ZSTD_compress2 failed")
            frame = out.raw[:n]
        finally:
            lib.ZSTD_freeCCtx(cctx)
        if lib.ZSTD_getFrameContentSize(frame, len(frame)) != (1 << 64) - 1:  # ZSTD_CONTENTSIZE_UNKNOWN
            raise ValueError("the frame says its size")
        return frame

    def decompress(self, frame, limit=64 * MiB):
        size = self.lib.ZSTD_getFrameContentSize(frame, len(frame))
        if size >= (1 << 64) - 2 or size > limit:
            raise ValueError("zstd frame without a usable content size")
        out = ctypes.create_string_buffer(max(size, 1))
        n = self.lib.ZSTD_decompress(out, size, frame, len(frame))
        if self.lib.ZSTD_isError(n) or n != size:
            raise ValueError("ZSTD_decompress failed")
        return out.raw[:n]

    @staticmethod
    def set_content_size(frame, size):
        """The same frame with another content size written in its header (a lie the decoder
        must catch): only for headers whose size field is 4 or 8 bytes wide."""
        fhd = frame[4]
        fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
        width = {2: 4, 3: 8}.get(fcs_flag)
        if width is None:
            raise ValueError("frame header's content size is %d bytes wide" % fcs_flag)
        at = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
        return frame[:at] + size.to_bytes(width, "little") + frame[at + width:]


_zstd = None


def zstd():
    global _zstd
    if _zstd is None:
        _zstd = Zstd()
    return _zstd


# --- undo at exit ----------------------------------------------------------------------------

# Undo actions (stop a daemon, unmount a tmpfs) still pending when the run ends — interrupted,
# or a class cleanup that never ran — are run at exit, last first. SIGTERM stops the run as ^C
# does (unittest lets KeyboardInterrupt through), and so exits through them.
_pending = []


def undo_at_exit(fn, *args):
    entry = (fn, args)
    _pending.append(entry)
    return entry


def undone(entry):
    if entry in _pending:
        _pending.remove(entry)


@atexit.register
def _undo_all():
    while _pending:
        fn, args = _pending.pop()
        try:
            fn(*args)
        except Exception as e:  # keep undoing the rest
            sys.stderr.write("cleanup %s%r failed: %s\n" % (getattr(fn, "__name__", fn), args, e))


def _interrupt(*_):
    raise KeyboardInterrupt("SIGTERM")


signal.signal(signal.SIGTERM, _interrupt)


# --- the daemon -------------------------------------------------------------------------------

class Daemon(boxkited_process.Boxkited if boxkited_process else object):
    """A boxkited in local mode on a free 127.0.0.1 port, its workspace a host directory, dying
    with the test run (boxkited_process.Boxkited), and not ready before its sandbox is.

    args: extra flags (e.g. ["--root", "/usr:ro", "--upload-idle", "2"]); workspace: a host
    directory (default <temp dir>/workspace). <temp dir>/outside is a host directory next to
    the workspace, for symlinks that would climb out of it."""

    def __init__(self, args=(), workspace=None, key_file=None):
        super().__init__(args, workspace, key_file)
        self._undo = undo_at_exit(self.stop)
        self.outside = os.path.join(self.dir, "outside")
        os.mkdir(self.outside, 0o755)

    def _after_ready(self):
        deadline = time.monotonic() + 15
        with wire.Channel(self.url, timeout=5.0) as c:
            while time.monotonic() < deadline:
                if c.call("Health", pb.HealthRequest(), pb.HealthResponse).message.sandbox_ready:
                    return
                time.sleep(0.05)
        raise RuntimeError("the sandbox did not become ready; boxkited's log:\n%s" % self.log())

    def stop(self, term_wait=5.0):
        """Boxkited.stop(), 5 s for SIGTERM by default; no longer pending at exit."""
        status = super().stop(term_wait)
        undone(self._undo)
        return status


# --- the rpcs ---------------------------------------------------------------------------------

class Files:
    """The File* and Exec rpcs of one channel; errors raise boxkite.BoxkiteError."""

    def __init__(self, port, key, timeout=120.0):
        self.client = wire.Channel("tcp://127.0.0.1:%d" % port, key=key, timeout=timeout)

    def close(self):
        self.client.close()

    def call(self, method, data=b"", **fields):
        return self.reply(method, data, **fields).message

    def reply(self, method, data=b"", **fields):
        """The whole Reply (its data too) of method called with fields and data."""
        request = getattr(pb, method + "Request")(**fields)
        return self.client.call(method, request, getattr(pb, method + "Response"), data=data)

    # uploads, one step at a time
    def begin(self, path, size, digest=None, mode=0, overwrite=False, make_parents=False, upload_id=""):
        """digest: the plain SHA-256 to have the server check at commit (None: no such check)."""
        return self.call("FileUploadBegin", path=path, size=size, sha256=digest or b"", mode=mode,
                         overwrite=overwrite, make_parents=make_parents, upload_id=upload_id)

    def chunk(self, upload_id, offset, data, compress=False, frame=None, compression=None, corrupt=None):
        """Send data at offset; compress=True sends it as one zstd frame (or frame, as it is).
        corrupt=i flips a bit of byte i of the data sent after the request was MAC'd. Returns the
        confirmed offset."""
        payload = frame if frame is not None else zstd().compress(data) if compress else data
        if compression is None:
            compression = pb.COMPRESSION_ZSTD if compress or frame is not None else pb.COMPRESSION_NONE
        request = pb.FileUploadChunkRequest(upload_id=upload_id, offset=offset, compression=compression)
        if corrupt is None:
            return self.client.call("FileUploadChunk", request, pb.FileUploadChunkResponse,
                                    data=payload).message.confirmed_offset
        env = self.client.seal("FileUploadChunk", request, payload)
        bad = bytearray(env.data)
        bad[corrupt] ^= 0x10
        env.data = bytes(bad)
        answer = self.client.exchange(env.SerializeToString())
        return self.client.open_answer(answer, env, pb.FileUploadChunkResponse).message.confirmed_offset

    def commit(self, upload_id, digest):
        """digest: the content hash of what was sent."""
        return self.call("FileUploadCommit", upload_id=upload_id, content_hash=digest).info

    def abort(self, upload_id):
        return self.call("FileUploadAbort", upload_id=upload_id)

    def send(self, upload_id, data, offset=0, chunk=CHUNK_MAX, compress=False):
        """Send data[offset:] in chunks; returns the last confirmed offset."""
        while offset < len(data):
            piece = data[offset:offset + chunk]
            confirmed = self.chunk(upload_id, offset, piece, compress=compress)
            if confirmed != offset + len(piece):
                raise AssertionError("confirmed %d after a chunk at %d of %d bytes" % (confirmed, offset, len(piece)))
            offset = confirmed
        return offset

    def upload(self, path, data, mode=0, overwrite=False, make_parents=False, chunk=CHUNK_MAX, compress=False,
               digest=None):
        """Begin (with the plain SHA-256 digest, if given), every chunk, commit with the content
        hash: the committed FileInfo."""
        b = self.begin(path, len(data), digest, mode, overwrite, make_parents)
        if b.confirmed_offset != 0 or b.max_chunk != CHUNK_MAX:
            raise AssertionError("begin answered offset %d, max_chunk %d" % (b.confirmed_offset, b.max_chunk))
        self.send(b.upload_id, data, chunk=chunk, compress=compress)
        return self.commit(b.upload_id, content_hash(data))

    def download(self, path, compress=False, length=0, sink=None, plain_sha256=False):
        """The whole file, chunk after chunk from its data fields, every answer of the same
        version (size, mtime, ctime); its content hash computed here and checked against the
        server's when it sends one; with plain_sha256, the plain SHA-256 asked for and checked.

        Returns (data, content hash, first response); with sink, data goes there (sink(bytes))
        and None is returned in its place."""
        parts, blocks, h, offset, first = [], [], hashlib.sha256(), 0, None
        while True:
            r = self.reply("FileDownload", path=path, offset=offset, length=length, sha256=plain_sha256 and offset == 0,
                           compression=pb.COMPRESSION_ZSTD if compress else pb.COMPRESSION_NONE)
            m = r.message
            if first is None:
                first = m
            if (m.size, m.mtime_ns, m.ctime_ns) != (first.size, first.mtime_ns, first.ctime_ns):
                raise AssertionError("the file changed during the download")
            if m.offset != offset:
                raise AssertionError("asked offset %d, answered %d" % (offset, m.offset))
            data = zstd().decompress(r.data) if m.compression == pb.COMPRESSION_ZSTD else r.data
            if len(data) != m.data_length:
                raise AssertionError("data_length %d but %d bytes" % (m.data_length, len(data)))
            h.update(data)
            blocks.append(data)
            if sink:
                sink(data)
            else:
                parts.append(data)
            offset += len(data)
            if m.eof:
                break
            if not data:
                raise AssertionError("no data and no eof at %d of %d" % (offset, m.size))
        if offset != first.size:
            raise AssertionError("read %d bytes of a %d-byte file" % (offset, first.size))
        # Chunks of the block size (length 0) are blocks: their hashes add up to the content hash.
        digest = wire.content_hash(blocks=[sha256(b) for b in blocks]) if length in (0, CHUNK_MAX) else None
        if first.content_hash and digest is not None and digest != first.content_hash:
            raise AssertionError("the downloaded content's content hash is not the one the server sent")
        if plain_sha256 and h.digest() != first.sha256:
            raise AssertionError("the downloaded content's SHA-256 is not the one the server sent")
        return (None if sink else b"".join(parts)), digest, first

    def stat(self, path):
        return self.call("FileStat", path=path).info

    def list(self, path, page_size=0, page_token=""):
        return self.call("FileList", path=path, page_size=page_size, page_token=page_token)

    def list_all(self, path, page_size=0):
        """Every entry, following the page tokens; also the page sizes seen."""
        entries, pages, token = [], [], ""
        while True:
            r = self.list(path, page_size, token)
            entries.extend(r.entries)
            pages.append(len(r.entries))
            if not r.next_page_token:
                return entries, pages
            token = r.next_page_token
            if len(pages) > 10000:
                raise AssertionError("list does not end")

    def mkdir(self, path, parents=False, mode=0):
        return self.call("FileMkdir", path=path, parents=parents, mode=mode)

    def remove(self, path, recursive=False):
        return self.call("FileRemove", path=path, recursive=recursive).removed

    def move(self, src, dst, overwrite=False):
        return self.call("FileMove", **{"from": src, "to": dst, "overwrite": overwrite})

    def symlink(self, path, target):
        return self.call("FileSymlink", path=path, target=target)

    def exec(self, shell, timeout_ms=60000, check=True):
        """Run shell with /bin/sh -c in the sandbox (uid 1001, cwd /workspace)."""
        r = self.call("Exec", shell=shell, timeout_ms=timeout_ms)
        if check and (r.exit_code != 0 or r.signal or r.timed_out):
            raise AssertionError("exec %r: exit %d signal %d timed_out %s\nstdout: %s\nstderr: %s" % (
                shell, r.exit_code, r.signal, r.timed_out, r.stdout.decode(errors="replace"),
                r.stderr.decode(errors="replace")))
        return r


# --- /etc must stay as it was -----------------------------------------------------------------

def etc_snapshot():
    """/etc's own inode and mtime, and each top-level entry's (inode, type, size, mtime)."""
    st = os.lstat("/etc")
    entries = {}
    for e in os.scandir("/etc"):
        s = e.stat(follow_symlinks=False)
        entries[e.name] = (s.st_ino, s.st_mode, s.st_size, s.st_mtime_ns)
    return (st.st_ino, st.st_mtime_ns), entries


# --- the test base ----------------------------------------------------------------------------

class FilesTestCase(unittest.TestCase):
    """One boxkited per class (DAEMON_ARGS, the workspace from workspace_dir()), a fresh workspace
    for each test, and helpers to check statuses and the host side."""

    DAEMON_ARGS = ()
    maxDiff = None

    @classmethod
    def workspace_dir(cls):
        """The host directory to serve as /workspace (None: <the daemon's temp dir>/workspace);
        a class that mounts something there registers its cleanup first (it runs last)."""
        return None

    @classmethod
    def setUpClass(cls):
        why = skip_reason()
        if why:
            raise unittest.SkipTest("SKIP: " + why)
        cls.daemon = Daemon(cls.DAEMON_ARGS, cls.workspace_dir())
        cls.addClassCleanup(cls._stop_daemon)
        cls.daemon.__enter__()
        cls.key = wire.load_key_file(cls.daemon.key_file)
        cls.ws = cls.daemon.workspace
        cls.outside = cls.daemon.outside
        cls.etc_before = etc_snapshot()

    @classmethod
    def _stop_daemon(cls):
        """Stop the class's daemon; it must have lived through the tests, exited 0 within 5 s of
        SIGTERM and left nothing behind (else the class fails, with its log)."""
        d = cls.daemon
        status = d.stop()
        if status is None:
            return  # it never started, or was stopped when setUpClass failed (that failure says why)
        problems = []
        if d.died_early:
            problems.append("died during the tests (status %s)" % status)
        elif d.hung:
            problems.append("did not exit within 5 s of SIGTERM (killed)")
        elif status != 0:
            problems.append("exited with %s" % status)
        if d.leftover:
            problems.append("left processes behind (killed): %s" % d.leftover)
        if problems:
            raise AssertionError("boxkited of %s %s; its log:\n%s" % (cls.__name__, "; ".join(problems), d.last_log))

    def setUp(self):
        self.fs = self.files()
        self.clean_workspace()
        self.addCleanup(self.clean_workspace)

    def files(self, timeout=120.0):
        f = Files(self.daemon.port, self.key, timeout)
        self.addCleanup(f.close)
        return f

    def clean_workspace(self):
        """Empty the workspace and the outside directory, as root on the host."""
        for top in (self.ws, self.outside):
            for name in os.listdir(top):
                p = os.path.join(top, name)
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)

    def host(self, rel):
        return os.path.join(self.ws, rel)

    def assertStatus(self, name, fn, *args, path=None, **kwargs):
        """fn(*args, **kwargs) fails with status name (and its message names path): the error."""
        with self.assertRaises(boxkite.BoxkiteError, msg="%s: expected %s" % (getattr(fn, "__name__", fn), name)) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertEqual(status_name(e.code), name, "status of %s: %s" % (getattr(fn, "__name__", fn), e))
        self.assertTrue(e.verified, "an unverified refusal: %s" % e)
        if path is not None:
            self.assertIn(path, e.message, "the error does not name %s" % path)
        return e

    def assertEtcUntouched(self):
        self.assertEqual(etc_snapshot(), self.etc_before, "/etc changed")

    def assertNothingOutside(self):
        self.assertEqual(os.listdir(self.outside), [], "something appeared outside the workspace")

    def workspace_names(self, rel=""):
        return sorted(os.listdir(self.host(rel)))
