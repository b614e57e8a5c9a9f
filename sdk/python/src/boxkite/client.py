"""The client: one object per boxkited, a method per thing an orchestrator does with a sandbox."""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, overload

from . import _transfer
from ._sp import PathLike
from .errors import DataLossError, FailedPreconditionError, NotFoundError
from .process import ExecStream, Process
from .results import (ExecResult, FileInfo, Health, ProcessInfo, PullResult, PushResult, ResetResult, SnapshotInfo,
                      SyncStatus)
from .v1 import boxkite_pb2 as pb
from .watch import Watch
from .wire import Channel, Key, load_key_file

__all__ = ["Client", "DEFAULT_URL", "Sync"]

# libboxkite's BK_DEFAULT_URL: where a sidecar listens in its pod.
DEFAULT_URL = "ipc:///run/boxkite/boxkited.sock"
# How long a call for a command with the server's default timeout waits (BK_EXEC_WAIT_DEFAULT_MS),
# a push or pull (BK_SYNC_WAIT_DEFAULT_MS), and a reset, beyond the client's timeout.
EXEC_WAIT_DEFAULT = 3600.0
SYNC_WAIT_DEFAULT = 3600.0
RESET_WAIT = 600.0
# The lease of a command streamed by stream(): its process dies when no read for it came this
# long, so that a client that died leaves nothing running.
STREAM_LEASE = 60.0
PAGE_TOKEN_MAX = 4095

Command = Union[str, Sequence[str]]
Env = Optional[Mapping[str, str]]
AllowNet = Union[str, Sequence[str]]
Progress = Callable[[int, int], None]


def _command(cmd: Command) -> Tuple[List[str], str]:
    """(argv, shell): a str is a shell command line for /bin/sh -c, a sequence an argv."""
    if isinstance(cmd, str):
        if not cmd:
            raise ValueError("an empty command")
        return [], cmd
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("a command is a shell string, or an argv: a non-empty sequence of str")
    return argv, ""


def _env(env: Env) -> List[pb.EnvVar]:
    return [pb.EnvVar(name=k, value=v) for k, v in (env or {}).items()]


def _allow_net(allow_net: AllowNet) -> List[str]:
    """The grant's patterns: one str is one pattern (never its characters)."""
    grant = [allow_net] if isinstance(allow_net, str) else list(allow_net)
    if not all(isinstance(g, str) and g for g in grant):
        raise ValueError("allow_net: HOST:PORT patterns, each a non-empty str")
    return grant


def _seconds_ms(seconds: Optional[float], what: str) -> int:
    """Seconds as the server's milliseconds; None is 0 (the server's default)."""
    if seconds is None:
        return 0
    if not 0 < seconds <= 0xFFFFFFFF / 1000:
        raise ValueError("%s is a number of seconds above 0" % what)
    return max(1, int(round(seconds * 1000)))


def _bytes(data: Union[bytes, str, None]) -> bytes:
    if data is None:
        return b""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


class Client:
    """A client of one boxkited.

    ``url`` is ``ipc:///PATH`` (the default, the sidecar's socket in its pod), ``tcp://HOST:PORT``,
    or ``tls+tcp://HOST:PORT`` with ``tls_cert``, the server's certificate (a PEM file, as
    ``bkctl kube`` makes it) to pin: the only one accepted. The key comes from ``key_file`` (its
    first key, or the one named ``key_id``), or is given: ``key``, a :class:`boxkite.Key` or the
    raw secret (bytes, with ``key_id``). Without a key only :meth:`health` can be called.
    ``timeout``: seconds a call waits for its answer, beyond what it asks the server to wait.

    The constructor connects, so that a server that cannot be reached is an
    :class:`boxkite.UnavailableError` here. Use it as a context manager, or call :meth:`close`.

    Thread safety: a Client may be used by any number of threads at once (each call takes a
    connection of its own from a pool), except that :meth:`reset` with a new key must not race
    with other calls (they would be signed with the old key). ``channel`` is the
    :class:`boxkite.wire.Channel` underneath, to call any rpc directly.
    """

    def __init__(self, url: str = DEFAULT_URL, *, key_file: Optional[PathLike] = None,
                 key: Union[Key, bytes, None] = None, key_id: Optional[str] = None,
                 tls_cert: Optional[PathLike] = None, timeout: float = 30.0, connect: bool = True) -> None:
        if key_file is not None and key is not None:
            raise ValueError("give key_file or key, not both")
        the_key: Optional[Key]
        if key_file is not None:
            the_key = load_key_file(key_file, key_id)
        elif isinstance(key, Key):
            if key_id is not None and key_id != key.key_id:
                raise ValueError("key_id %r is not the key's (%r)" % (key_id, key.key_id))
            the_key = key
        elif key is not None:
            if key_id is None:
                raise ValueError("a raw key needs its key_id")
            the_key = Key(key_id, key)
        else:
            if key_id is not None:
                raise ValueError("key_id names a key of key_file, or the id of key: give one")
            the_key = None
        self.channel = Channel(url, key=the_key, tls_cert=tls_cert, timeout=timeout)
        self.sync = Sync(self.channel)
        if connect:
            self.channel.connect()

    @classmethod
    def from_env(cls, **kw: object) -> "Client":
        """A client configured as bkctl is from its environment: ``BOXKITE_URL`` (default
        DEFAULT_URL), ``BOXKITE_KEY_FILE``, ``BOXKITE_TLS_CERT``. Keywords override them."""
        settings: Dict[str, Any] = {"url": os.environ.get("BOXKITE_URL", DEFAULT_URL)}
        if os.environ.get("BOXKITE_KEY_FILE"):
            settings["key_file"] = os.environ["BOXKITE_KEY_FILE"]
        if os.environ.get("BOXKITE_TLS_CERT"):
            settings["tls_cert"] = os.environ["BOXKITE_TLS_CERT"]
        settings.update(kw)
        return cls(**settings)

    def close(self) -> None:
        """Close the connections. The client cannot be used afterwards."""
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        key = self.channel.key
        return "<boxkite.Client %s key %s>" % (self.channel.url, key.key_id if key else "(none)")

    # --- health ---------------------------------------------------------------------------

    def health(self) -> Health:
        """Whether the server is up and its sandbox ready. Answered without a key too; then
        ``authenticated`` is false and the answer is only an indication."""
        reply = self.channel.call("Health", pb.HealthRequest())
        return Health._from_pb(reply.message, reply.verified)

    # --- commands ---------------------------------------------------------------------------

    def exec(self, cmd: Command, *, cwd: Optional[str] = None, env: Env = None,
             stdin: Union[bytes, str, None] = None, timeout: Optional[float] = None, stdout_limit: int = 0,
             stderr_limit: int = 0, check: bool = False, allow_net: AllowNet = ()) -> ExecResult:
        """Run a command in the sandbox and wait for it: its exit status and whole output.

        cmd: a str runs with ``/bin/sh -c``; a sequence is an argv (argv[0] looked up in the
        sandbox's PATH). cwd: relative to /workspace, or absolute under a root. env: variables
        added to the server's base environment. stdin: written to the command's stdin, which is
        then closed (None: it reads EOF at once). timeout: seconds, after which the server kills
        the command's whole tree (``timed_out``); None: the server's default. stdout_limit,
        stderr_limit: bytes kept per stream (0: the server's default; the rest is counted in
        ``*_dropped``). check: raise :class:`boxkite.CommandError` unless it exited 0.
        allow_net: destinations the command may reach through the sidecar's egress proxy,
        ``HOST:PORT`` patterns (``"pypi.org:443"``, ``"*.example.com:443"``,
        ``"203.0.113.0/24:80"``; one str or a sequence), each within the server's ceiling
        (``boxkited --egress-allow``), else :class:`boxkite.PermissionDeniedError` before anything
        runs; the command's environment names the proxy (``HTTPS_PROXY`` and the rest). Without
        it the command has no network (docs/PROTOCOL.md, "Egress").

        A command that runs and fails is a result, not an error (exit 127 when it is not
        there, 126 when it is not executable, as a shell says).
        """
        argv, shell = _command(cmd)
        timeout_ms = _seconds_ms(timeout, "timeout")
        reply = self.channel.call("Exec", pb.ExecRequest(
            argv=argv, shell=shell, cwd=cwd or "", env=_env(env), stdin=_bytes(stdin), timeout_ms=timeout_ms,
            stdout_limit=stdout_limit, stderr_limit=stderr_limit, allow_net=_allow_net(allow_net)),
            wait=timeout_ms / 1000 if timeout_ms else EXEC_WAIT_DEFAULT)
        result = ExecResult._from_pb(reply.message)
        return result.check() if check else result

    def start(self, cmd: Command, *, cwd: Optional[str] = None, env: Env = None, stdin: bool = False,
              tty: bool = False, size: Optional[Tuple[int, int]] = None, tag: str = "",
              lease: Optional[float] = None, max_runtime: Optional[float] = None, expose_port: int = 0,
              ring_size: int = 0, lossless: bool = False, allow_net: AllowNet = ()) -> Process:
        """Start a background process and return it as soon as it runs.

        cmd, cwd, env: as :meth:`exec`. stdin: keep its stdin open for :meth:`Process.write`
        (else it reads EOF at once). tty: a terminal for stdin, stdout and stderr (everything
        comes on stdout), of ``size`` (rows, cols; default 24x80). tag: a label shown by
        :meth:`processes`. lease: seconds after which the process is killed (whole tree) when no
        call for it came (a read, wait, write, close-stdin, signal, resize or remove; a long-poll
        holds it for its whole wait): a client that went away leaves nothing running.
        max_runtime: seconds after which it is killed anyway. expose_port: run it in the
        sandbox's own network namespace so that previews reach this port (else a fresh, empty
        one). ring_size: bytes kept per stream (0: the server's default). lossless: a stream
        whose ring is full of unread bytes stops the process writing it instead of dropping
        the oldest (give a lease too, so that a reader that went away does not stall it for ever).
        allow_net: as :meth:`exec` (not with ``expose_port``: such a process shares the
        sandbox's network namespace with the other exposing ones).
        """
        argv, shell = _command(cmd)
        req = pb.ProcessStartRequest(
            argv=argv, shell=shell, cwd=cwd or "", env=_env(env), stdin_open=stdin, tty=tty, tag=tag,
            lease_ms=_seconds_ms(lease, "lease"), max_runtime_ms=_seconds_ms(max_runtime, "max_runtime"),
            expose_port=expose_port, ring_size=ring_size, lossless=lossless, allow_net=_allow_net(allow_net))
        if size is not None:
            req.size.rows, req.size.cols = size
        m = self.channel.call("ProcessStart", req).message
        if not m.process_id or not m.epoch:
            raise DataLossError("ProcessStart: the answer names no process, or no epoch", verified=True,
                                method="ProcessStart")
        return Process(self.channel, m.process_id, m.isolation_profile, m.epoch)

    def stream(self, cmd: Command, *, cwd: Optional[str] = None, env: Env = None,
               stdin: Union[bytes, str, None] = None, timeout: Optional[float] = None,
               lease: Optional[float] = STREAM_LEASE, allow_net: AllowNet = ()) -> ExecStream:
        """Run a command and yield its output as it comes, chunk by chunk (:class:`boxkite.Chunk`:
        ``stream`` "stdout" or "stderr", ``data``); once it is over, ``status`` on the returned
        :class:`boxkite.ExecStream` says how it ended::

            with client.stream(["make", "test"]) as out:
                for chunk in out:
                    sys.stdout.buffer.write(chunk.data)
            print(out.status.describe())

        Nothing is lost however much it writes: the command waits for this reader. cmd, cwd,
        env, allow_net: as :meth:`exec`. stdin: written to its stdin (then closed) from a thread of its own.
        timeout: seconds after which it is killed (its status says ``runtime_exceeded``).
        lease: seconds without a read after which the server kills it (None: never), so that
        nothing runs on after a client that died; iterate at least that often. Stopping early
        (``close()``, leaving the ``with`` block, an error) kills it.
        """
        p = self.start(cmd, cwd=cwd, env=env, stdin=stdin is not None, lease=lease, max_runtime=timeout,
                       lossless=True, allow_net=allow_net)
        return ExecStream(p, _bytes(stdin) if stdin is not None else None)

    def process(self, process_id: str, epoch: int = 0) -> Process:
        """A :class:`boxkite.Process` for a process started earlier (by this client or another),
        its cursors at offset 0. epoch: the one its id is of (:attr:`ProcessInfo.epoch`,
        :attr:`Process.epoch`), or 0 for whichever process has this id now (then the first answer's).
        Nothing is asked of the server until it is used."""
        return Process(self.channel, process_id, epoch=epoch)

    def processes(self) -> List[ProcessInfo]:
        """Every process record, running or ended, oldest first. Renews no lease."""
        m = self.channel.call("ProcessList", pb.ProcessListRequest()).message
        return [ProcessInfo._from_pb(p, m.epoch) for p in m.processes]

    # --- files ------------------------------------------------------------------------------
    #
    # Paths are sandbox paths: relative to /workspace, or absolute under one of the server's roots
    # (/workspace, /tmp, and any it was started with). Every operation runs as the sandbox user.

    def upload(self, source: _transfer.Source, path: str, *, mode: int = 0, overwrite: bool = False,
               make_parents: bool = False, sha256: bool = False, progress: Optional[Progress] = None) -> FileInfo:
        """Upload source to path: bytes (the content), a local file name (str or PathLike: never
        content), or a binary file object (from its current position; one that cannot seek is
        read whole first). The file appears whole or not at all: written unnamed, and put in
        place only once its content hash checked. mode: permission bits (0: 0644). overwrite:
        replace an existing file (else :class:`boxkite.AlreadyExistsError`). make_parents: make
        missing directories. sha256: also have the server check the plain SHA-256 (a pass more on
        each side). progress: called with (bytes done, total) after each chunk; an exception it
        raises stops the upload. Returns what landed, its ``content_hash`` set."""
        return _transfer.upload(self.channel, source, path, mode=mode, overwrite=overwrite, make_parents=make_parents,
                                sha256=sha256, progress=progress)

    @overload
    def download(self, path: str, dest: None = None, *, sha256: bool = False,
                 progress: Optional[Progress] = None) -> bytes: ...

    @overload
    def download(self, path: str, dest: Union[str, "os.PathLike[str]", BinaryIO], *, sha256: bool = False,
                 progress: Optional[Progress] = None) -> FileInfo: ...

    def download(self, path: str, dest: Union[str, "os.PathLike[str]", BinaryIO, None] = None, *,
                 sha256: bool = False, progress: Optional[Progress] = None) -> Union[bytes, FileInfo]:
        """Download the file at path: its content (dest None), or into dest, a local file name (it
        appears whole once every check passed, or not at all) or a binary file object. Checked as
        one version of one file (a file that changes meanwhile is :class:`boxkite.DataLossError`:
        ask again) against the server's content hash when it knows it; sha256: also the plain
        SHA-256, computed by both sides. With dest, returns the file's :class:`boxkite.FileInfo`
        (path as asked; uid and gid 0: a download does not carry them)."""
        if dest is None:
            parts: List[bytes] = []
            _transfer.download(self.channel, path, parts.append, sha256=sha256, progress=progress)
            return b"".join(parts)
        return _transfer.download_to(self.channel, path, dest, sha256=sha256, progress=progress)

    def stat(self, path: str) -> FileInfo:
        """What path is, not following a final symlink (:class:`boxkite.NotFoundError` when it is
        not there)."""
        m = self.channel.call("FileStat", pb.FileStatRequest(path=path)).message
        return FileInfo._from_pb(m.info)

    def exists(self, path: str) -> bool:
        """Whether path is there (a dangling symlink is)."""
        try:
            self.stat(path)
        except NotFoundError:
            return False
        return True

    def ls(self, path: str = ".", *, page_size: int = 0) -> List[FileInfo]:
        """The entries of a directory, sorted by name (bytewise), each ``path`` a bare name; every
        page asked for in turn (page_size entries each: 0, the server's default)."""
        entries: List[FileInfo] = []
        token = ""
        while True:
            m = self.channel.call("FileList", pb.FileListRequest(path=path, page_size=page_size,
                                                                 page_token=token)).message
            entries.extend(FileInfo._from_pb(e) for e in m.entries)
            if not m.next_page_token:
                return entries
            # A token that does not move would page for ever.
            if m.next_page_token == token or len(m.next_page_token) > PAGE_TOKEN_MAX:
                raise DataLossError("FileList: a page token that does not move on", verified=True, method="FileList")
            token = m.next_page_token

    def mkdir(self, path: str, *, parents: bool = False, mode: int = 0) -> None:
        """Make a directory (mode 0: 0755); with parents, its missing parents too, and an existing
        directory is no error."""
        self.channel.call("FileMkdir", pb.FileMkdirRequest(path=path, parents=parents, mode=mode))

    def rm(self, path: str, *, recursive: bool = False) -> int:
        """Remove a file, a symlink (not its target) or an empty directory; with recursive, a
        directory and everything in it. Returns the number of entries removed."""
        return int(self.channel.call("FileRemove", pb.FileRemoveRequest(path=path, recursive=recursive))
                   .message.removed)

    def mv(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Rename src to dst in one step; an existing dst is replaced only with overwrite. Both
        under writable roots on one filesystem."""
        req = pb.FileMoveRequest(to=dst, overwrite=overwrite)
        setattr(req, "from", src)  # a Python keyword: not a keyword argument
        self.channel.call("FileMove", req)

    def symlink(self, path: str, target: str) -> None:
        """Make a symlink at path to target, stored as given. A target leading out of the root
        holding path is :class:`boxkite.PermissionDeniedError`."""
        self.channel.call("FileSymlink", pb.FileSymlinkRequest(path=path, target=target))

    # --- reset ------------------------------------------------------------------------------

    def watch(self, path: Optional[str] = None, *, cursor: Optional[str] = None) -> Watch:
        """``FileWatch``: watch the sandbox directory ``path`` (relative to /workspace, or absolute
        under a root) and every directory beneath it, or go on with the watch ``cursor`` names
        (a :attr:`Watch.cursor` kept from before). Returns the :class:`boxkite.Watch`, started:
        list the directory after this, then iterate — nothing that changes after the start is
        missed. A sandbox has at most 16 watches (:class:`boxkite.ResourceExhaustedError`)."""
        if (path is None) == (cursor is None):
            raise ValueError("give a path to watch, or the cursor of a watch to go on with")
        if cursor is not None:
            return Watch(self.channel, cursor)
        m = self.channel.call("FileWatch", pb.FileWatchRequest(path=path)).message
        return Watch(self.channel, m.cursor, m.directories)

    def reset(self, new_key: Optional[Key] = None) -> ResetResult:
        """The warm-pool recycle: every command killed, the sandbox emptied and checked, the
        session forgotten (docs/PROTOCOL.md, "Reset"). With new_key (``boxkite.Key.generate(ID)``)
        the server takes it as its only key from then on, and so does this client. A new key
        only travels over ipc:// or tls+tcp:// (on tcp:// it would cross the network in clear:
        :class:`boxkite.FailedPreconditionError`). A reset that could not prove the sandbox
        clean raises, and the sidecar then serves only Health: discard it."""
        req = pb.ResetRequest()
        if new_key is not None:
            if not self.channel.private:
                raise FailedPreconditionError("a new key for reset would cross the network in clear on a tcp:// "
                                              "URL: use tls+tcp:// or ipc://", method="Reset")
            req.new_key_id, req.new_key_secret = new_key.key_id, new_key.secret
        # Once the reset is through the server holds only the new key: its answer is MAC'd with it.
        m = self.channel.call("Reset", req, wait=RESET_WAIT, answer_key=new_key).message
        if new_key is not None:
            self.channel.set_key(new_key)
        return ResetResult(m.processes_killed, m.entries_removed, m.snapshot)


class Sync:
    """Snapshots of a tree of the sandbox (``/workspace`` by default) in a store boxkited was
    started with (``--sync-store``): ``client.sync.push()``, ``.pull()``, ``.list()``,
    ``.status()`` (docs/PROTOCOL.md, "Sync"). One push or pull runs at a time on a server; a
    second is :class:`boxkite.FailedPreconditionError`. url: a ``--sync-store`` URL or a prefix
    under one (None: the first store), read as the same place under the client key's store
    prefix (:func:`boxkite.wire.store_prefix`): a key sees only its own snapshots."""

    def __init__(self, channel: Channel) -> None:
        self._ch = channel

    def push(self, url: Optional[str] = None, *, snapshot: Optional[str] = None, path: Optional[str] = None,
             exclude: Sequence[str] = (), default_excludes: bool = False,
             timeout: Optional[float] = None) -> PushResult:
        """Snapshot path (None: /workspace) as snapshot (None: an id made of the time; an
        existing one is :class:`boxkite.AlreadyExistsError`). exclude: fnmatch patterns (without
        "/", names anywhere; with "/", paths relative to the tree). default_excludes: also
        node_modules and the usual caches. Waits up to timeout seconds (None: an hour)."""
        m = self._ch.call("SyncPush", pb.SyncPushRequest(
            snapshot=snapshot or "", url=url or "", path=path or "", exclude=list(exclude),
            default_excludes=default_excludes), wait=SYNC_WAIT_DEFAULT if timeout is None else timeout).message
        return PushResult._from_pb(m)

    def pull(self, snapshot: Optional[str] = None, *, url: Optional[str] = None, path: Optional[str] = None,
             mirror: bool = False, exclude: Sequence[str] = (), timeout: Optional[float] = None) -> PullResult:
        """Restore snapshot (None: the latest under url) into path (None: /workspace). mirror:
        also remove what the snapshot lacks, except what matches exclude."""
        m = self._ch.call("SyncPull", pb.SyncPullRequest(
            snapshot=snapshot or "", url=url or "", path=path or "", mirror=mirror, exclude=list(exclude)),
            wait=SYNC_WAIT_DEFAULT if timeout is None else timeout).message
        return PullResult._from_pb(m)

    def list(self, url: Optional[str] = None) -> List[SnapshotInfo]:
        """The snapshots under url, oldest first."""
        m = self._ch.call("SyncList", pb.SyncListRequest(url=url or "")).message
        return [SnapshotInfo._from_pb(s) for s in m.snapshots]

    def status(self) -> SyncStatus:
        """The push or pull running now (from any client), or the last one to end."""
        return SyncStatus._from_pb(self._ch.call("SyncStatus", pb.SyncStatusRequest()).message)
