"""What calls return: plain, immutable records of the answers (docs/PROTOCOL.md names every field).

Times the server measures keep its units (``duration_us``, ``mtime_ns``, ``started_ms``); bytes
that come from the sandbox (output, names that are not UTF-8) stay bytes.
"""

from __future__ import annotations

import enum
import signal as _signal
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from .errors import CommandError

__all__ = [
    "Chunk", "ExecResult", "FileInfo", "FileType", "Health", "ProcessInfo", "ProcessStatus", "PullResult",
    "PushResult", "ReadResult", "ResetResult", "SnapshotInfo", "StreamRead", "SyncStatus",
]


@dataclass(frozen=True)
class Health:
    """The server's Health answer."""

    version: str
    mode: str                 # "local", "pod", or "none"
    sandbox_ready: bool
    auth_configured: bool     # the server has at least one key
    authenticated: bool       # this call was keyed and its answer's MAC verified
    uptime_ms: int
    not_ready_reason: str     # why sandbox_ready is false, when the server knows ("" otherwise)
    egress_ceiling: Tuple[str, ...]  # what an exec may be granted (--egress-allow); told a keyed caller only

    @classmethod
    def _from_pb(cls, m: Any, verified: bool) -> "Health":
        return cls(m.version, m.mode, m.sandbox_ready, m.auth_configured, verified, m.uptime_ms, m.not_ready_reason,
                   tuple(m.egress_ceiling))


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return "signal %d" % sig


@dataclass(frozen=True)
class ExecResult:
    """How a command run by :meth:`boxkite.Client.exec` ended, and its whole output (up to the
    limits asked). ``exit_code`` is meaningful when ``signal`` is 0 and it did not time out."""

    exit_code: int
    signal: int               # the signal that ended it, or 0
    timed_out: bool           # killed (its whole tree, SIGKILL) at its timeout: signal is 9
    oom_killed: bool          # the kernel's OOM killer struck in its memory cgroup
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool    # more was written than kept
    stderr_truncated: bool
    stdout_dropped: int       # bytes past the limit, read and discarded
    stderr_dropped: int
    duration_us: int
    isolation_profile: str    # e.g. "bk1:netns-fresh,..." (SECURITY.md)

    @classmethod
    def _from_pb(cls, m: Any) -> "ExecResult":
        return cls(m.exit_code, m.signal, m.timed_out, m.oom_killed, m.stdout, m.stderr, m.stdout_truncated,
                   m.stderr_truncated, m.stdout_dropped, m.stderr_dropped, m.duration_us, m.isolation_profile)

    @property
    def ok(self) -> bool:
        """It exited 0: no signal, no timeout."""
        return self.exit_code == 0 and self.signal == 0 and not self.timed_out

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (an invalid byte shown as U+FFFD)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def describe(self) -> str:
        """``"exited 3"``, ``"was killed by SIGKILL"``, ``"timed out"`` ..."""
        if self.timed_out:
            return "timed out"
        if self.signal:
            return "was killed by %s%s" % (_signal_name(self.signal), " (out of memory)" if self.oom_killed else "")
        return "exited %d" % self.exit_code

    def check(self) -> "ExecResult":
        """self if the command succeeded, else raise :class:`boxkite.CommandError`."""
        if not self.ok:
            raise CommandError(self)
        return self


class FileType(enum.IntEnum):
    """What a file is (the proto's FileType)."""

    UNKNOWN = 0
    REGULAR = 1
    DIRECTORY = 2
    SYMLINK = 3
    OTHER = 4


def _file_type(value: int) -> FileType:
    try:
        return FileType(value)
    except ValueError:
        return FileType.UNKNOWN


@dataclass(frozen=True)
class FileInfo:
    """A file of the sandbox.

    ``path`` is the normalized absolute path (stat, upload, download) or the entry's bare name
    (ls). A name that is not UTF-8 (legal in a file system, not in a protobuf string) shows each
    invalid byte as ``\\xNN`` in ``path``; ``raw_path`` always holds the exact bytes (likewise
    ``symlink_target`` and ``raw_symlink_target``). ``content_hash`` (docs/PROTOCOL.md,
    "Content hash") and ``sha256`` are filled by uploads and downloads only, ``sha256`` when
    asked for."""

    path: str
    type: FileType
    size: int
    mode: int                 # permission bits
    uid: int
    gid: int
    mtime_ns: int
    symlink_target: str = ""
    raw_path: bytes = b""
    raw_symlink_target: bytes = b""
    content_hash: Optional[bytes] = None
    sha256: Optional[bytes] = None

    @classmethod
    def _from_pb(cls, m: Any, content_hash: Optional[bytes] = None) -> "FileInfo":
        return cls(m.path, _file_type(m.type), m.size, m.mode, m.uid, m.gid, m.mtime_ns, m.symlink_target,
                   m.raw_path or m.path.encode("utf-8"), m.raw_symlink_target or m.symlink_target.encode("utf-8"),
                   content_hash)

    @property
    def name(self) -> str:
        """The last component of path."""
        return self.path.rstrip("/").rsplit("/", 1)[-1] or self.path

    @property
    def is_file(self) -> bool:
        return self.type == FileType.REGULAR

    @property
    def is_dir(self) -> bool:
        return self.type == FileType.DIRECTORY

    @property
    def is_symlink(self) -> bool:
        return self.type == FileType.SYMLINK


@dataclass(frozen=True)
class ProcessStatus:
    """How a background process ended, or that it has not (``running``): never a made-up exit 0.
    While it runs, every field but ``duration_us`` is 0."""

    running: bool
    exit_code: int            # when it ended and signal is 0
    signal: int               # the signal that ended it (9 for a kill by boxkited)
    runtime_exceeded: bool    # killed at its max_runtime
    lease_expired: bool       # killed because no call for it came within its lease
    oom_killed: bool
    duration_us: int          # so far, or in all

    @classmethod
    def _from_pb(cls, m: Any) -> "ProcessStatus":
        return cls(m.running, m.exit_code, m.signal, m.runtime_exceeded, m.lease_expired, m.oom_killed,
                   m.duration_us)

    @property
    def ok(self) -> bool:
        """It ended with exit code 0."""
        return not self.running and self.signal == 0 and self.exit_code == 0

    def describe(self) -> str:
        if self.running:
            return "is running"
        if self.signal:
            why = (" (runtime exceeded)" if self.runtime_exceeded else " (lease expired)" if self.lease_expired
                   else " (out of memory)" if self.oom_killed else "")
            return "was killed by %s%s" % (_signal_name(self.signal), why)
        return "exited %d" % self.exit_code


@dataclass(frozen=True)
class ProcessInfo:
    """A process's record, as listed."""

    process_id: str
    argv: Tuple[str, ...]     # a shell string shows as ("/bin/sh", "-c", STRING)
    tag: str
    status: ProcessStatus
    expose_port: int          # 0, or the port it exposes in the sandbox's network namespace
    started_ms: int           # wall clock, ms since the Unix epoch
    tty: bool
    stdout_end: int           # bytes each stream has produced
    stderr_end: int
    epoch: int                # the epoch process_id is of (boxkite.Client.process takes both)

    @classmethod
    def _from_pb(cls, m: Any, epoch: int) -> "ProcessInfo":
        return cls(m.process_id, tuple(m.argv), m.tag, ProcessStatus._from_pb(m.status), m.expose_port,
                   m.started_ms, m.tty, m.stdout_end, m.stderr_end, epoch)


@dataclass(frozen=True)
class StreamRead:
    """What one read found in one stream: ``data`` from absolute ``offset``, where ``offset``
    is the offset asked, or where the ring starts now when ``lost`` bytes before it were dropped
    unread. ``end``: the bytes the stream has produced so far; ``eof``: it is closed and data
    reaches its end."""

    data: bytes
    offset: int
    lost: int
    end: int
    eof: bool


@dataclass(frozen=True)
class ReadResult:
    """One ProcessRead: both streams, and the status when it was answered."""

    stdout: StreamRead
    stderr: StreamRead
    status: ProcessStatus

    @property
    def ended(self) -> bool:
        """Nothing will change any more: the process ended and both streams are at their end."""
        return not self.status.running and self.stdout.eof and self.stderr.eof


@dataclass(frozen=True)
class Chunk:
    """Output as it came, from :meth:`boxkite.Client.stream` or :meth:`boxkite.Process.follow`:
    ``data`` of ``stream`` ("stdout" or "stderr") from absolute ``offset``; ``lost`` bytes just
    before it were dropped by the ring unread (0 unless the process was started without
    ``lossless`` and wrote faster than it was read)."""

    stream: str
    data: bytes
    offset: int
    lost: int = 0

    @property
    def text(self) -> str:
        """data decoded as UTF-8 (an invalid byte shown as U+FFFD; a character split between two
        chunks shows as two)."""
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True)
class PushResult:
    """A snapshot pushed."""

    snapshot: str
    url: str
    files: int
    bytes: int
    directories: int
    symlinks: int
    skipped: int              # not stored: excluded, symlinks leaving the tree, sockets...
    blobs: int                # distinct blobs the snapshot names
    blobs_uploaded: int       # those this push wrote (the store had the others)
    bytes_uploaded: int       # compressed bytes written, the manifest included
    files_read: int           # files read to be hashed (the others' blocks were known)

    @classmethod
    def _from_pb(cls, m: Any) -> "PushResult":
        return cls(m.snapshot, m.url, m.files, m.bytes, m.directories, m.symlinks, m.skipped, m.blobs,
                   m.blobs_uploaded, m.bytes_uploaded, m.files_read)


@dataclass(frozen=True)
class PullResult:
    """A snapshot pulled."""

    snapshot: str
    files: int
    bytes: int
    directories: int
    symlinks: int
    skipped: int              # symlinks leaving the tree, not made
    removed: int              # mirror: entries removed
    blobs_fetched: int

    @classmethod
    def _from_pb(cls, m: Any) -> "PullResult":
        return cls(m.snapshot, m.files, m.bytes, m.directories, m.symlinks, m.skipped, m.removed, m.blobs_fetched)


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot of a store."""

    name: str
    files: int
    bytes: int
    created_ms: int           # wall clock
    path: str                 # the tree it was pushed from

    @classmethod
    def _from_pb(cls, m: Any) -> "SnapshotInfo":
        return cls(m.name, m.files, m.bytes, m.created_ms, m.path)


@dataclass(frozen=True)
class SyncStatus:
    """The sync running now, or (``running`` false) the last one to end."""

    running: bool
    operation: str            # "push", "pull", or "" before the first
    snapshot: str
    files_done: int
    bytes_done: int
    files_total: int          # a pull's from its manifest; a push's only once it ended
    bytes_total: int
    blobs_uploaded: int
    started_ms: int
    status: int               # once ended: its status code (0: OK)
    message: str              # once ended: its error message

    @classmethod
    def _from_pb(cls, m: Any) -> "SyncStatus":
        return cls(m.running, m.operation, m.snapshot, m.files_done, m.bytes_done, m.files_total, m.bytes_total,
                   m.blobs_uploaded, m.started_ms, m.status, m.message)


@dataclass(frozen=True)
class ResetResult:
    """A reset done."""

    processes_killed: int     # trees, execs and processes together
    entries_removed: int      # files and directories removed
    snapshot: str             # with boxkited --sync-on-reset: the snapshot pushed before the wipe
