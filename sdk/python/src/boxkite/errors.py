"""Status codes, and the exceptions a call raises when it does not succeed.

Every error of a call is a :class:`BoxkiteError`, of the subclass named after its status
(``NotFoundError`` for NOT_FOUND, ...), so that callers catch what they can handle::

    try:
        client.stat("notes.txt")
    except boxkite.NotFoundError:
        ...

A command that runs and fails is not an error: its exit code is data in the result
(:class:`boxkite.ExecResult`); ``exec(..., check=True)`` turns it into a :class:`CommandError`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Optional, Tuple, Type

if TYPE_CHECKING:
    from .results import ExecResult


class Status(enum.IntEnum):
    """gRPC's canonical status codes, as ``Envelope.status`` carries them
    (include/boxkite/status.h; docs/PROTOCOL.md, "Status codes")."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Detail(enum.IntEnum):
    """Which check of the server refused an envelope (``Envelope.detail``, the proto's
    ``StatusDetail`` without its prefix); NONE for a success or a handler's own error."""

    NONE = 0
    MALFORMED = 1
    BAD_VERSION = 2
    UNKNOWN_KEY = 3
    BAD_MAC = 4
    STALE = 5
    FUTURE = 6
    REPLAYED = 7
    OVERSIZED = 8
    UNKNOWN_METHOD = 9
    AUTH_NOT_CONFIGURED = 10
    REPLAY_CACHE_FULL = 11
    BAD_BODY = 12
    CLAIM_KEY = 13


def status_name(code: int) -> str:
    """``"NOT_FOUND"`` for 5, as bk_status_name() spells it; ``"UNKNOWN"`` outside the set."""
    try:
        return Status(code).name
    except ValueError:
        return "UNKNOWN"


def detail_name(detail: int) -> str:
    """``"BAD_MAC"`` for 4, as bk_detail_name() spells it; ``"UNKNOWN"`` outside the set."""
    try:
        return Detail(detail).name
    except ValueError:
        return "UNKNOWN"


class BoxkiteError(Exception):
    """A call that did not succeed.

    Attributes:
        code: the status, a :class:`Status` (or the plain int of a code this client does not
            know); each subclass is one status.
        detail: which envelope check refused the request (:class:`Detail`), ``Detail.NONE``
            for a handler's own error or one found on this side.
        message: the server's text, or this client's for what it found itself (an answer
            that fails its checks is DATA_LOSS, no answer in time DEADLINE_EXCEEDED, a server
            that cannot be reached UNAVAILABLE).
        verified: the answer that said so carried a valid MAC under the client's key. An
            unverified refusal (one sent before the server checked the key, or found on this
            side) may have been forged on the path: take it as a failed call, not as the
            server's word.
        method: the rpc (``"FileStat"``), or ``""`` when the error is not an rpc's.
    """

    STATUS: ClassVar[int] = Status.UNKNOWN

    code: int
    detail: int
    message: str
    verified: bool
    method: str

    def __init__(self, message: str, *, code: Optional[int] = None, detail: int = 0, verified: bool = False,
                 method: str = "") -> None:
        self.code = _status(self.STATUS if code is None else code)
        self.detail = _detail(detail)
        self.message = message
        self.verified = verified
        self.method = method
        super().__init__(self._text())

    def _text(self) -> str:
        what = status_name(self.code)
        if self.detail:
            what += "/" + detail_name(self.detail)
        return "%s: %s%s" % (what, "" if self.verified else "(unverified answer) ", self.message)

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt through error(), which takes keywords: pickling (multiprocessing) works.
        return (_rebuild, (self.code, self.message, self.detail, self.verified, self.method))


def _rebuild(code: int, message: str, detail: int, verified: bool, method: str) -> BoxkiteError:
    return error(code, message, detail=detail, verified=verified, method=method)


def _status(code: int) -> int:
    try:
        return Status(code)
    except ValueError:
        return int(code)


def _detail(detail: int) -> int:
    try:
        return Detail(detail)
    except ValueError:
        return int(detail)


class CancelledError(BoxkiteError):
    """CANCELLED: stopped on this side (a transfer or stream the caller stopped)."""

    STATUS = Status.CANCELLED


class UnknownError(BoxkiteError):
    """UNKNOWN."""

    STATUS = Status.UNKNOWN


class InvalidArgumentError(BoxkiteError):
    """INVALID_ARGUMENT: a malformed request, a path outside the roots or with ``..``, a limit
    above the server's largest."""

    STATUS = Status.INVALID_ARGUMENT


class DeadlineExceededError(BoxkiteError, TimeoutError):
    """DEADLINE_EXCEEDED: no answer in time (this client's timeout). Also a ``TimeoutError``."""

    STATUS = Status.DEADLINE_EXCEEDED


class NotFoundError(BoxkiteError):
    """NOT_FOUND: no such file, upload, process or snapshot."""

    STATUS = Status.NOT_FOUND


class AlreadyExistsError(BoxkiteError):
    """ALREADY_EXISTS: the name is taken (and ``overwrite`` was not asked)."""

    STATUS = Status.ALREADY_EXISTS


class PermissionDeniedError(BoxkiteError):
    """PERMISSION_DENIED: the sandbox user may not, a read-only root, a path leaving its root; a
    warm pool's claim key used for anything but Health and the claiming Reset (detail
    CLAIM_KEY)."""

    STATUS = Status.PERMISSION_DENIED


class ResourceExhaustedError(BoxkiteError):
    """RESOURCE_EXHAUSTED: a limit of the server (sizes, quotas, open uploads, processes)."""

    STATUS = Status.RESOURCE_EXHAUSTED


class FailedPreconditionError(BoxkiteError):
    """FAILED_PRECONDITION: the wrong kind of thing (a directory for a file...), a process that
    has ended, a sync already running, a sidecar whose reset failed."""

    STATUS = Status.FAILED_PRECONDITION


class AbortedError(BoxkiteError):
    """ABORTED: another request uses it right now, or a file kept changing: ask again."""

    STATUS = Status.ABORTED


class OutOfRangeError(BoxkiteError):
    """OUT_OF_RANGE: an offset past the end."""

    STATUS = Status.OUT_OF_RANGE


class UnimplementedError(BoxkiteError):
    """UNIMPLEMENTED: an rpc this server does not serve."""

    STATUS = Status.UNIMPLEMENTED


class InternalError(BoxkiteError):
    """INTERNAL: a failure on the server that should not happen."""

    STATUS = Status.INTERNAL


class UnavailableError(BoxkiteError):
    """UNAVAILABLE: the server cannot be reached, has no key, its sandbox is not ready, a reset
    runs, or it is shutting down: retry later."""

    STATUS = Status.UNAVAILABLE


class DataLossError(BoxkiteError):
    """DATA_LOSS: an answer that is not for this request, fails its MAC or contradicts itself; or
    the server found content that is not the one announced (nothing was written)."""

    STATUS = Status.DATA_LOSS


class UnauthenticatedError(BoxkiteError):
    """UNAUTHENTICATED: no or unknown key, a bad MAC, a clock out of the server's window, a
    replayed request."""

    STATUS = Status.UNAUTHENTICATED


_BY_STATUS: Dict[int, Type[BoxkiteError]] = {cls.STATUS: cls for cls in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError, AlreadyExistsError,
    PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError, AbortedError, OutOfRangeError,
    UnimplementedError, InternalError, UnavailableError, DataLossError, UnauthenticatedError)}


def error(code: int, message: str, *, detail: int = 0, verified: bool = False, method: str = "") -> BoxkiteError:
    """The exception for status ``code``: its subclass, or :class:`BoxkiteError` itself for a code
    outside the set (OK is not an error, and is refused here)."""
    if code == Status.OK:
        raise ValueError("status OK is not an error")
    cls = _BY_STATUS.get(code, BoxkiteError)
    return cls(message, code=code, detail=detail, verified=verified, method=method)


class CommandError(Exception):
    """A command that ran and did not succeed (an exit code other than 0, a signal, a timeout),
    raised by ``exec(..., check=True)``. Not a :class:`BoxkiteError`: the call itself worked.

    Attributes:
        result: the :class:`boxkite.ExecResult`, with the command's output.
    """

    result: "ExecResult"

    def __init__(self, result: "ExecResult") -> None:
        self.result = result
        super().__init__("the command %s" % result.describe())
