"""Whole-file upload and download over the chunk rpcs, checked end to end by the content hash
(docs/PROTOCOL.md, "Files", "Content hash", "FileUploadChunk", "FileDownload").

Chunks are whole 4 MiB blocks, sent one after the other, plain (the standard library has no
zstd). Each chunk is hashed once on this side: its SHA-256 is both what its MAC covers and its
block's hash in the content hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import tempfile
from typing import BinaryIO, Callable, Optional, Tuple, Union

from .errors import DataLossError, FailedPreconditionError
from .results import FileInfo, FileType
from .v1 import boxkite_pb2 as pb
from .wire import BLOCK_SIZE, Channel, ContentHasher

Progress = Callable[[int, int], None]
Source = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", BinaryIO]
Dest = Union[str, "os.PathLike[str]", BinaryIO]


def _open_source(source: Source) -> Tuple[BinaryIO, int, bool]:
    """(a binary file at offset 0, its size, whether it is ours to close)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return io.BytesIO(data), len(data), True
    if isinstance(source, (str, os.PathLike)):
        f = open(source, "rb")
        st = os.fstat(f.fileno())
        return f, st.st_size, True
    if not source.seekable():
        # The size comes first (FileUploadBegin): a stream is read whole to know it.
        data = source.read()
        return io.BytesIO(data), len(data), True
    start = source.tell()
    size = source.seek(0, io.SEEK_END) - start
    source.seek(start)
    return source, size, False


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    buf = f.read(n)
    while len(buf) < n:
        more = f.read(n - len(buf))
        if not more:
            raise DataLossError("the source of %s shrank during the upload" % what)
        buf += more
    return buf


def upload(ch: Channel, source: Source, path: str, *, mode: int = 0, overwrite: bool = False,
           make_parents: bool = False, sha256: bool = False, progress: Optional[Progress] = None) -> FileInfo:
    f, size, ours = _open_source(source)
    try:
        start = f.tell()
        whole: Optional[bytes] = None
        if sha256:
            # Asked for: the plain SHA-256, a pass of its own, for the server to check at commit.
            h = hashlib.sha256()
            left = size
            while left:
                piece = _read_exact(f, min(left, BLOCK_SIZE), path)
                h.update(piece)
                left -= len(piece)
            whole = h.digest()
            f.seek(start)
        begin = ch.call("FileUploadBegin", pb.FileUploadBeginRequest(
            path=path, size=size, sha256=whole or b"", mode=mode, overwrite=overwrite,
            make_parents=make_parents)).message
        upload_id = begin.upload_id
        if not upload_id or begin.confirmed_offset != 0:
            raise DataLossError("FileUploadBegin: implausible answer (id %r, offset %d of a new upload)"
                                % (upload_id, begin.confirmed_offset), verified=True, method="FileUploadBegin")
        try:
            if begin.max_chunk < BLOCK_SIZE:
                raise FailedPreconditionError(
                    "FileUploadBegin: the server takes chunks of %d bytes, smaller than the %d-byte block"
                    % (begin.max_chunk, BLOCK_SIZE), verified=True, method="FileUploadBegin")
            hasher = ContentHasher()
            offset = 0
            while offset < size:
                chunk = _read_exact(f, min(size - offset, BLOCK_SIZE), path)
                digest = hashlib.sha256(chunk).digest()
                confirmed = ch.call("FileUploadChunk", pb.FileUploadChunkRequest(upload_id=upload_id, offset=offset),
                                    data=chunk, data_digest=digest).message.confirmed_offset
                if confirmed != offset + len(chunk):
                    raise DataLossError("FileUploadChunk: confirmed offset %d after a chunk at %d+%d of %d"
                                        % (confirmed, offset, len(chunk), size), verified=True,
                                        method="FileUploadChunk")
                hasher.update(chunk, digest)
                offset = confirmed
                if progress:
                    progress(offset, size)
            content = hasher.digest()
            info = ch.call("FileUploadCommit", pb.FileUploadCommitRequest(
                upload_id=upload_id, content_hash=content)).message.info
        except BaseException:
            # Nothing left waiting for its idle expiry (best effort: the error is the one to see).
            try:
                ch.call("FileUploadAbort", pb.FileUploadAbortRequest(upload_id=upload_id))
            except Exception:
                pass
            raise
    finally:
        if ours:
            f.close()
    return dataclasses.replace(FileInfo._from_pb(info, content), sha256=whole)


def download(ch: Channel, path: str, sink: Callable[[bytes], object], *, sha256: bool = False,
             progress: Optional[Progress] = None) -> FileInfo:
    """Every chunk of path, in order, to sink; checked as one version of one file (every answer
    with the same size, mtime and ctime), its content hash compared with the server's when it
    has one, and its plain SHA-256 when asked for."""
    hasher = ContentHasher()
    whole = hashlib.sha256() if sha256 else None
    offset = 0
    first = None
    while True:
        reply = ch.call("FileDownload", pb.FileDownloadRequest(
            path=path, offset=offset, length=BLOCK_SIZE, sha256=sha256 and offset == 0))
        r = reply.message
        if first is None:
            if sha256 and len(r.sha256) != 32:
                raise DataLossError("FileDownload: no SHA-256 in the first answer for %s" % path, verified=True,
                                    method="FileDownload")
            first = r
        elif (r.size, r.mtime_ns, r.ctime_ns) != (first.size, first.mtime_ns, first.ctime_ns):
            raise DataLossError("%s changed during the download" % path, verified=True, method="FileDownload")
        eof = offset + r.data_length == first.size
        if (r.offset != offset or r.data_length > BLOCK_SIZE or r.data_length > first.size - offset
                or r.eof != eof or (not eof and r.data_length != BLOCK_SIZE)):
            raise DataLossError("FileDownload: implausible answer for %s (%d bytes at %d, eof %s, size %d, asked at %d)"
                                % (path, r.data_length, r.offset, r.eof, first.size, offset), verified=True,
                                method="FileDownload")
        if r.compression != pb.COMPRESSION_NONE or len(reply.data) != r.data_length:
            raise DataLossError("FileDownload: %d data bytes (compression %d), %d plain bytes announced"
                                % (len(reply.data), r.compression, r.data_length), verified=True,
                                method="FileDownload")
        # A plain chunk's block hash is the digest its MAC was checked with.
        hasher.update(reply.data, reply.data_digest if reply.data else None)
        if whole is not None:
            whole.update(reply.data)
        sink(reply.data)
        offset += r.data_length
        if progress:
            progress(offset, first.size)
        if r.eof:
            break
    content = hasher.digest()
    if len(first.content_hash) == 32 and content != first.content_hash:
        raise DataLossError("%s: the content hash of the bytes received is not the file's" % path, verified=True,
                            method="FileDownload")
    if whole is not None and whole.digest() != first.sha256:
        raise DataLossError("%s: the SHA-256 of the bytes received is not the file's" % path, verified=True,
                            method="FileDownload")
    return FileInfo(path, FileType.REGULAR, first.size, first.mode, 0, 0, first.mtime_ns,
                    raw_path=path.encode("utf-8"), content_hash=content,
                    sha256=whole.digest() if whole is not None else None)


def download_to(ch: Channel, path: str, dest: Dest, *, sha256: bool = False,
                progress: Optional[Progress] = None) -> FileInfo:
    """download() into a binary file object, or into a local file that appears whole or not at
    all: written beside it under a temporary name, renamed over it once every check passed, with
    the mode a new file gets (0666 less the umask)."""
    if not isinstance(dest, (str, os.PathLike)):
        return download(ch, path, dest.write, sha256=sha256, progress=progress)
    target = os.fspath(dest)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(target), suffix=".part",
                               dir=os.path.dirname(target) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            info = download(ch, path, f.write, sha256=sha256, progress=progress)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return info


def _umask() -> int:
    """The process's umask, read without setting it (umask(2) would change it for every thread
    for a moment): /proc/self/status says it since Linux 4.7."""
    try:
        with open("/proc/self/status", "r", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
