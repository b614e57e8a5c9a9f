"""boxkite: the Python client of boxkited, the sandbox sidecar that runs an AI agent's commands.

    import boxkite

    with boxkite.Client("tcp://127.0.0.1:7700", key_file="key") as box:
        r = box.exec("echo hello; exit 3")
        r.exit_code, r.stdout          # 3, b"hello\\n"
        box.upload(b"print(6 * 7)\\n", "calc.py")
        box.exec(["python3", "calc.py"], check=True).stdout_text

The client speaks the wire protocol of docs/PROTOCOL.md itself (nng's SP framing over TCP, TLS
or a Unix socket, the MAC'd Envelope), with the standard library and the protobuf runtime only.
:mod:`boxkite.wire` is the layer underneath, and :mod:`boxkite.v1.boxkite_pb2` the generated
messages.
"""

from .client import DEFAULT_URL, Client, Sync
from .errors import (AbortedError, AlreadyExistsError, BoxkiteError, CancelledError, CommandError, DataLossError,
                     DeadlineExceededError, Detail, FailedPreconditionError, InternalError, InvalidArgumentError,
                     NotFoundError, OutOfRangeError, PermissionDeniedError, ResourceExhaustedError, Status,
                     UnauthenticatedError, UnavailableError, UnimplementedError, UnknownError)
from .process import ExecStream, Process
from .results import (Chunk, ExecResult, FileInfo, FileType, Health, ProcessInfo, ProcessStatus, PullResult,
                      PushResult, ReadResult, ResetResult, SnapshotInfo, StreamRead, SyncStatus)
from .watch import Watch, WatchEnd, WatchEvent, WatchEventKind
from .wire import Key, load_key_file

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL", "AbortedError", "AlreadyExistsError", "BoxkiteError", "CancelledError", "Chunk", "Client",
    "CommandError", "DataLossError", "DeadlineExceededError", "Detail", "ExecResult", "ExecStream",
    "FailedPreconditionError", "FileInfo", "FileType", "Health", "InternalError", "InvalidArgumentError", "Key",
    "NotFoundError", "OutOfRangeError", "PermissionDeniedError", "Process", "ProcessInfo", "ProcessStatus",
    "PullResult", "PushResult", "ReadResult", "ResetResult", "ResourceExhaustedError", "SnapshotInfo", "Status",
    "StreamRead", "Sync", "SyncStatus", "UnauthenticatedError", "UnavailableError", "UnimplementedError",
    "UnknownError", "Watch", "WatchEnd", "WatchEvent", "WatchEventKind", "load_key_file",
]
