"""Watching a sandbox directory (docs/PROTOCOL.md, "FileWatch"): :meth:`boxkite.Client.watch`."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

from .v1 import boxkite_pb2 as pb
from .wire import Channel

__all__ = ["Watch", "WatchEnd", "WatchEvent", "WatchEventKind"]

# The longest a read waits on the server (BK_WATCH_WAIT_MAX_MS), and what an iteration asks: a
# watch that no read reaches for a minute expires.
WAIT_MAX = 60.0
ITER_WAIT = 10.0
READ_MAX = 1000


class WatchEventKind(enum.IntEnum):
    """What happened (the proto's WatchEventKind)."""

    UNKNOWN = 0
    CREATED = 1     # a name appeared: a file, directory, symlink, ...
    MODIFIED = 2    # a file was written (writes in a row to one file: one event)
    CLOSED = 3      # a file open for writing was closed: written, for now
    REMOVED = 4
    MOVED = 5       # renamed from path to to; either is "" when it lies outside the watch
    OVERFLOW = 6    # events were lost here (a queue was full): list again; what follows is reported


class WatchEnd(enum.IntEnum):
    """Why a watch is over (the proto's WatchEnd); NONE while it goes on."""

    NONE = 0
    EXPIRED = 1     # no such watch any more: unread for a minute, stopped, the server restarted,
                    # or a cursor older than what the watch keeps
    RESET = 2       # a Reset ended it
    REMOVED = 3     # the watched directory was removed or moved away
    LIMIT = 4       # its tree grew past the directories a sandbox's watches may hold
    STOPPED = 5     # stop() ended it


def _kind(value: int) -> WatchEventKind:
    try:
        return WatchEventKind(value)
    except ValueError:
        return WatchEventKind.UNKNOWN


def _end(value: int) -> WatchEnd:
    try:
        return WatchEnd(value)
    except ValueError:
        return WatchEnd.EXPIRED  # an end this client does not know: over all the same


@dataclass(frozen=True)
class WatchEvent:
    """One change under a watched directory. ``path`` is relative to it ("a/b.txt"); for MOVED it
    is where the entry was and ``to`` where it is now, and either is "" when it lies outside the
    watch. A name that is not UTF-8 shows each invalid byte as ``\\xNN``; ``raw_path`` and
    ``raw_to`` always hold the exact bytes. ``lost``: for OVERFLOW, the events lost when known
    (0: unknown)."""

    kind: WatchEventKind
    path: str
    to: str = ""
    directory: bool = False
    lost: int = 0
    raw_path: bytes = b""
    raw_to: bytes = b""

    @classmethod
    def _from_pb(cls, m: Any) -> "WatchEvent":
        return cls(_kind(m.kind), m.path, m.to, m.directory, m.lost, m.raw_path or m.path.encode("utf-8"),
                   m.raw_to or m.to.encode("utf-8"))


class Watch:
    """A watch of a sandbox directory and every directory beneath it, from
    :meth:`boxkite.Client.watch`. Iterate over it for :class:`WatchEvent` s as they happen (each
    step a long-poll of up to 10 s); the iteration ends when the watch does, and ``end`` says why.
    Or call :meth:`read` for one batch. ``cursor`` is where the next read goes on from: keep it,
    and ``Client.watch(cursor=...)`` goes on from there, from another client or process too.

    Start the watch, then list the directory, then read: nothing that changes after the start is
    missed. An OVERFLOW event means events were lost: list again. A watch that no read reaches for
    a minute expires (``end`` EXPIRED), so consume it steadily. ``stop()`` (or leaving its ``with``
    block) ends it on the server; it may be called from another thread, and the read waiting there
    returns at once. One consumer at a time.
    """

    def __init__(self, channel: Channel, cursor: str, directories: int = 0) -> None:
        self._channel = channel
        self.cursor = cursor
        self.directories = directories     # the directories watched at the start (0 when resumed)
        self.end = WatchEnd.NONE

    def read(self, wait: float = 0.0, max_events: int = 0) -> List[WatchEvent]:
        """The events after ``cursor`` (at most ``max_events``, 0: 1000), waiting up to ``wait``
        seconds (at most 60) for one; ``cursor`` moves past them. Empty when the watch is over:
        ``end`` says why."""
        if self.end != WatchEnd.NONE:
            return []
        if not 0 <= wait <= WAIT_MAX:
            raise ValueError("wait is 0 to %g seconds" % WAIT_MAX)
        if not 0 <= max_events <= READ_MAX:
            raise ValueError("max_events is 0 to %d" % READ_MAX)
        m = self._channel.call("FileWatch", pb.FileWatchRequest(cursor=self.cursor, wait_ms=int(wait * 1000),
                                                                max_events=max_events), wait=wait).message
        self.cursor = m.cursor
        if self.end == WatchEnd.NONE:  # stop() from another thread meanwhile says STOPPED already
            self.end = _end(m.end)
        return [WatchEvent._from_pb(e) for e in m.events]

    def __iter__(self) -> Iterator[WatchEvent]:
        while self.end == WatchEnd.NONE:
            yield from self.read(ITER_WAIT)

    def stop(self) -> None:
        """End the watch on the server now (its slot and descriptors back), rather than at its
        expiry. Harmless when it is over already."""
        if self.end != WatchEnd.NONE:
            return
        self._channel.call("FileWatch", pb.FileWatchRequest(cursor=self.cursor, stop=True))
        self.end = WatchEnd.STOPPED

    close = stop

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return "Watch(cursor=%r, end=%s)" % (self.cursor, self.end.name)

