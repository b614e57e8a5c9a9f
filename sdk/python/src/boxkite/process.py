"""Background processes: :class:`Process` drives one (read, follow, write, signal, wait, resize),
and :class:`ExecStream` runs a command as one, its output streamed as it comes
(docs/PROTOCOL.md, "Processes")."""

from __future__ import annotations

import signal as _signal
import threading
import time
from typing import Generator, Iterator, Optional, Tuple, Union

from .errors import DataLossError, FailedPreconditionError, NotFoundError
from .results import Chunk, ProcessStatus, ReadResult, StreamRead
from .v1 import boxkite_pb2 as pb
from .wire import Channel

__all__ = ["ExecStream", "Process"]

LONG_POLL_MAX = 60.0        # the longest wait the server grants a read or wait (seconds)
WRITE_MAX = 1 << 20         # the most one ProcessWrite carries
READ_MAX = 4 << 20          # the most one read returns per stream
# Each read of follow() long-polls this long. A call that waits keeps the process's lease for
# its whole wait, also when its client died meanwhile: short, so that a dead follower's lease
# runs out soon after (as libboxkite's bk_process_follow()).
FOLLOW_WAIT = 10.0
# A process that ended while a stream is still open (a descendant holds it, and the server has
# not seen it close yet) answers reads at once: between two such reads, this pause.
FOLLOW_DRAIN_PAUSE = 0.05
# What a cleanup waits, after a SIGKILL, for the tree to be gone before removing its record.
KILL_WAIT = 10.0


def _ms(seconds: float, what: str) -> int:
    if seconds < 0:
        raise ValueError("%s is a number of seconds, at least 0" % what)
    return int(round(seconds * 1000))


def _stream(m: object, name: str, asked: int, data: memoryview, at: int) -> Tuple[StreamRead, int]:
    """One stream of a read's answer, its bytes the next ``length`` of the answer's data. The answer
    must be about the offset asked: bytes from it, or from later with what was lost between."""
    c = getattr(m, name)
    if c.length > len(data) - at:
        raise DataLossError("ProcessRead: %s says %d bytes, the answer carries %d" % (name, c.length, len(data) - at),
                            verified=True, method="ProcessRead")
    if c.offset < asked or c.offset - asked != c.lost or c.offset + c.length > c.end:
        raise DataLossError("ProcessRead: %s from offset %d (lost %d, end %d) does not answer offset %d"
                            % (name, c.offset, c.lost, c.end, asked), verified=True, method="ProcessRead")
    return StreamRead(bytes(data[at:at + c.length]), c.offset, c.lost, c.end, c.eof), at + c.length


class Process:
    """A background process of the sandbox, from :meth:`boxkite.Client.start` (or attached to
    by id with :meth:`boxkite.Client.process`).

    It is named by its id in its ``epoch``: ids start from p1 again in a restarted boxkited and
    after a Reset, each time in a new epoch, and every call this object makes names both, so
    that it never acts on another epoch's process of the same id (that is
    :class:`boxkite.NotFoundError`, as an unknown id is). Attached by id alone (``epoch`` 0), it
    takes the epoch of the first answer about it.

    A call that would wait (a read or wait that long-polls, a write the process does not take
    yet) and that the server cannot keep waiting is answered early with when to ask again: this
    object waits that long and asks again, within the wait asked for.

    Its output is two rings, stdout and stderr, addressed by absolute byte offsets. The object
    keeps one cursor per stream (``stdout_offset``, ``stderr_offset``): :meth:`read` and
    :meth:`follow` read from them and move them on. ``status`` is the last status an answer
    reported (None before the first).

    Thread safety: write, close_stdin, signal, kill, resize and wait may be called from other
    threads while one thread reads or follows (each call has a connection of its own); the
    cursors are for one reader at a time.

    As a context manager, it ends the process on exit: a SIGKILL to its whole tree if it still
    runs, then its record removed.
    """

    def __init__(self, channel: Channel, process_id: str, isolation_profile: str = "", epoch: int = 0) -> None:
        self._ch = channel
        self.id = process_id
        self.epoch = epoch
        self.isolation_profile = isolation_profile
        self.stdout_offset = 0
        self.stderr_offset = 0
        self.status: Optional[ProcessStatus] = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "<boxkite.Process %s>" % self.id

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._end()
        except Exception:
            if exc_type is None:
                raise
            # The error that ended the block is the one to see; a process left behind here
            # ends with its lease, when it has one.

    def _end(self) -> None:
        """Kill the tree if it runs, wait for it to go, remove the record."""
        try:
            self.kill()
            self.wait(KILL_WAIT)
        except FailedPreconditionError:
            pass  # it had ended
        except NotFoundError:
            return  # gone: removed, or its epoch is over (boxkited restarted, or a Reset)
        try:
            self.remove()
        except NotFoundError:
            pass

    def _seen(self, status: ProcessStatus) -> ProcessStatus:
        self.status = status
        return status

    def _epoch_of(self, answered: int, method: str) -> None:
        """An answer's epoch: the one this object names (the server refuses another), or learned."""
        with self._lock:
            if self.epoch and answered != self.epoch:
                raise DataLossError("%s: the answer is about another epoch's process" % method, verified=True,
                                    method=method)
            self.epoch = answered

    def read(self, *, wait: float = 0.0, max_bytes: int = 0, stdout_offset: Optional[int] = None,
             stderr_offset: Optional[int] = None) -> ReadResult:
        """Read both streams from the cursors (or the offsets given), up to max_bytes each (0: 1
        MiB; at most 4 MiB), and move the cursors past what came. When neither stream has bytes
        there and the process runs, the server waits up to ``wait`` seconds (at most 60) for
        bytes or the end, and answers as soon as either comes. An offset past a stream's end is
        :class:`boxkite.OutOfRangeError`. Nothing more will come once ``result.ended``."""
        if not 0 <= max_bytes <= READ_MAX:
            raise ValueError("max_bytes is 0 (1 MiB) to %d" % READ_MAX)
        wait_ms = min(_ms(wait, "wait"), int(LONG_POLL_MAX * 1000))
        deadline = time.monotonic() + wait_ms / 1000
        with self._lock:
            out = self.stdout_offset if stdout_offset is None else stdout_offset
            err = self.stderr_offset if stderr_offset is None else stderr_offset
        while True:
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            reply = self._ch.call("ProcessRead", pb.ProcessReadRequest(
                process_id=self.id, epoch=self.epoch, stdout_offset=out, stderr_offset=err, max_bytes=max_bytes,
                wait_ms=left_ms), wait=left_ms / 1000)
            m = reply.message
            if not (m.HasField("stdout") and m.HasField("stderr") and m.HasField("status")):
                raise DataLossError("ProcessRead: the answer lacks a stream or the status", verified=True,
                                    method="ProcessRead")
            data = memoryview(reply.data)
            o, at = _stream(m, "stdout", out, data, 0)
            e, at = _stream(m, "stderr", err, data, at)
            if at != len(data):
                raise DataLossError("ProcessRead: %d bytes of the answer's data belong to no stream"
                                    % (len(data) - at), verified=True, method="ProcessRead")
            self._epoch_of(m.epoch, "ProcessRead")
            status = ProcessStatus._from_pb(m.status)
            # Answered early (no room for its bytes yet, or no place to wait): what came goes to
            # the caller; else again after the pause the server asked for, within the wait.
            nothing = not (o.data or e.data or o.lost or e.lost)
            more = o.offset < o.end or e.offset < e.end
            left = deadline - time.monotonic()
            if not m.retry_after_ms or not nothing or (not status.running and not more) or (not more and left <= 0):
                break
            pause = m.retry_after_ms / 1000
            time.sleep(pause if more else min(pause, max(left, 0.0)))
        with self._lock:
            self.stdout_offset = o.offset + len(o.data)
            self.stderr_offset = e.offset + len(e.data)
        return ReadResult(o, e, self._seen(status))

    def follow(self) -> Iterator[Chunk]:
        """Chunks of output as they come, from the cursors on, until the process has ended and
        both streams are at their end (then ``status`` is final). Each read long-polls up to 10
        s; a lease is renewed by each. Stopping early (breaking out of the loop) leaves the
        process as it is."""
        while True:
            r = self.read(wait=FOLLOW_WAIT)
            for name, s in (("stdout", r.stdout), ("stderr", r.stderr)):
                if s.data or s.lost:
                    yield Chunk(name, s.data, s.offset, s.lost)
            if r.ended:
                return
            if not r.status.running and not r.stdout.data and not r.stderr.data:
                time.sleep(FOLLOW_DRAIN_PAUSE)

    def write(self, data: Union[bytes, str], *, close: bool = False) -> int:
        """Write data (a str as UTF-8) to the process's stdin (its terminal, with tty), then
        close it when ``close``. Returns once all of it went in (in pieces of at most 1 MiB,
        each answered when the pipe took it; what a process that does not read left out is sent
        again). A process started without ``stdin=True``, whose stdin was closed, or that has
        ended is :class:`boxkite.FailedPreconditionError`. One write at a time per process."""
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        done = 0
        while True:
            n = min(len(payload) - done, WRITE_MAX)
            last = done + n == len(payload)
            reply = self._ch.call("ProcessWrite", pb.ProcessWriteRequest(
                process_id=self.id, epoch=self.epoch, data=payload[done:done + n], close=close and last),
                wait=LONG_POLL_MAX)
            written = reply.message.written
            if written > n:
                raise DataLossError("ProcessWrite: %d bytes written of %d sent" % (written, n), verified=True,
                                    method="ProcessWrite")
            done += written
            if done == len(payload) and (written == n or not close):
                return done
            if reply.message.retry_after_ms:
                # The server could not wait for the process to take the rest: not before it said.
                time.sleep(reply.message.retry_after_ms / 1000)

    def close_stdin(self) -> None:
        """Close stdin: the command reads EOF (a terminal gets ^D). Closing twice is no error."""
        self._ch.call("ProcessCloseStdin", pb.ProcessCloseStdinRequest(process_id=self.id, epoch=self.epoch))

    def signal(self, sig: Union[int, _signal.Signals], *, kill_after: Optional[float] = None) -> None:
        """Send sig (1-64) to every process of the tree. kill_after: seconds after which the
        server sends SIGKILL if it still runs (its own timer: it holds though this client goes
        away). An ended process is :class:`boxkite.FailedPreconditionError`."""
        kill_after_ms = 0 if kill_after is None else _ms(kill_after, "kill_after")
        self._ch.call("ProcessSignal", pb.ProcessSignalRequest(process_id=self.id, epoch=self.epoch, signal=int(sig),
                                                               kill_after_ms=kill_after_ms))

    def kill(self) -> None:
        """SIGKILL to the whole tree."""
        self.signal(_signal.SIGKILL)

    def wait(self, timeout: Optional[float] = None) -> ProcessStatus:
        """Wait for the process to end, at most timeout seconds (None: as long as it takes), and
        return its status: ``running`` when it did not end in time (not an error)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LONG_POLL_MAX if deadline is None else min(max(deadline - time.monotonic(), 0.0), LONG_POLL_MAX)
            wait_ms = _ms(left, "timeout")
            reply = self._ch.call("ProcessWait", pb.ProcessWaitRequest(process_id=self.id, epoch=self.epoch,
                                                                       wait_ms=wait_ms), wait=wait_ms / 1000)
            if not reply.message.HasField("status"):
                raise DataLossError("ProcessWait: the answer carries no process status", verified=True,
                                    method="ProcessWait")
            self._epoch_of(reply.message.epoch, "ProcessWait")
            status = self._seen(ProcessStatus._from_pb(reply.message.status))
            if not status.running or (deadline is not None and time.monotonic() >= deadline):
                return status
            if reply.message.retry_after_ms:
                # Answered before its wait (no place to wait at the server): again after the pause.
                pause = reply.message.retry_after_ms / 1000
                time.sleep(pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0.0)))

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's size (1-65535 rows and columns): the process gets SIGWINCH. A
        process without a terminal is :class:`boxkite.FailedPreconditionError`."""
        self._ch.call("ProcessResize", pb.ProcessResizeRequest(process_id=self.id, epoch=self.epoch,
                                                               size=pb.TerminalSize(rows=rows, cols=cols)))

    def remove(self) -> None:
        """Remove the ended process's record and rings; a running one is
        :class:`boxkite.FailedPreconditionError` (signal it first)."""
        self._ch.call("ProcessRemove", pb.ProcessRemoveRequest(process_id=self.id, epoch=self.epoch))


class ExecStream:
    """A command's output as it comes: iterate over it for :class:`boxkite.Chunk` s, from
    :meth:`boxkite.Client.stream`. Once the iteration is over, ``status`` says how it ended and
    the process's record is removed. ``close()`` (or leaving its ``with`` block, or an error
    while following) stops early: the process is killed, whole tree, and removed.

    One consumer at a time; ``process`` is the :class:`Process`, for writing, signalling or
    resizing from other threads meanwhile.
    """

    def __init__(self, process: Process, stdin: Optional[bytes] = None) -> None:
        self.process = process
        self.status: Optional[ProcessStatus] = None
        self._finished = False
        self._stdin_error: Optional[BaseException] = None
        self._writer: Optional[threading.Thread] = None
        if stdin is not None:
            # In a thread of its own: a command that writes before it reads stdin would otherwise
            # wait for this reader while this writer waits for it.
            self._writer = threading.Thread(target=self._write_stdin, args=(stdin,), daemon=True,
                                            name="boxkite-stdin-%s" % process.id)
            self._writer.start()
        self._chunks = self._run()

    def _write_stdin(self, data: bytes) -> None:
        try:
            self.process.write(data, close=True)
        except BaseException as e:  # reported once the output ends (see _run)
            self._stdin_error = e

    def _run(self) -> Generator[Chunk, None, None]:
        try:
            yield from self.process.follow()
        except GeneratorExit:  # close(): stopped by the caller
            self._finished = True
            self.process._end()
            raise
        except BaseException:
            self._finished = True
            try:
                self.process._end()
            except Exception:
                pass  # the error that stopped the stream is the one to see
            raise
        self._finished = True
        self.status = self.process.status
        self.process.remove()
        if self._writer is not None:
            self._writer.join()
            # A command that ended without reading all of its stdin refuses the rest: that is
            # how it ended, not an error of the stream.
            if self._stdin_error is not None and not isinstance(self._stdin_error, FailedPreconditionError):
                raise self._stdin_error

    def __iter__(self) -> "ExecStream":
        return self

    def __next__(self) -> Chunk:
        return next(self._chunks)

    def close(self) -> None:
        """Stop following: the process is killed (its whole tree) and removed, unless it ended."""
        self._chunks.close()
        if not self._finished:  # closed before the first chunk was asked for
            self._finished = True
            self.process._end()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
