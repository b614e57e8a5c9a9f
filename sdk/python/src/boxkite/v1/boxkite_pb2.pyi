from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

COMPRESSION_NONE: Compression
COMPRESSION_ZSTD: Compression
DESCRIPTOR: _descriptor.FileDescriptor
ENVELOPE_KIND_REQUEST: EnvelopeKind
ENVELOPE_KIND_RESPONSE: EnvelopeKind
ENVELOPE_KIND_UNSPECIFIED: EnvelopeKind
FILE_TYPE_DIRECTORY: FileType
FILE_TYPE_OTHER: FileType
FILE_TYPE_REGULAR: FileType
FILE_TYPE_SYMLINK: FileType
FILE_TYPE_UNSPECIFIED: FileType
STATUS_DETAIL_AUTH_NOT_CONFIGURED: StatusDetail
STATUS_DETAIL_BAD_BODY: StatusDetail
STATUS_DETAIL_BAD_MAC: StatusDetail
STATUS_DETAIL_BAD_VERSION: StatusDetail
STATUS_DETAIL_CLAIM_KEY: StatusDetail
STATUS_DETAIL_FUTURE: StatusDetail
STATUS_DETAIL_MALFORMED: StatusDetail
STATUS_DETAIL_NONE: StatusDetail
STATUS_DETAIL_OVERSIZED: StatusDetail
STATUS_DETAIL_REPLAYED: StatusDetail
STATUS_DETAIL_REPLAY_CACHE_FULL: StatusDetail
STATUS_DETAIL_STALE: StatusDetail
STATUS_DETAIL_UNKNOWN_KEY: StatusDetail
STATUS_DETAIL_UNKNOWN_METHOD: StatusDetail
WATCH_END_EXPIRED: WatchEnd
WATCH_END_LIMIT: WatchEnd
WATCH_END_NONE: WatchEnd
WATCH_END_REMOVED: WatchEnd
WATCH_END_RESET: WatchEnd
WATCH_END_STOPPED: WatchEnd
WATCH_EVENT_KIND_CLOSED: WatchEventKind
WATCH_EVENT_KIND_CREATED: WatchEventKind
WATCH_EVENT_KIND_MODIFIED: WatchEventKind
WATCH_EVENT_KIND_MOVED: WatchEventKind
WATCH_EVENT_KIND_OVERFLOW: WatchEventKind
WATCH_EVENT_KIND_REMOVED: WatchEventKind
WATCH_EVENT_KIND_UNSPECIFIED: WatchEventKind

class EnvVar(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ["body", "data", "detail", "key_id", "kind", "mac", "message", "method", "nonce", "status", "timestamp_ms", "version"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    data: bytes
    detail: StatusDetail
    key_id: str
    kind: EnvelopeKind
    mac: bytes
    message: str
    method: str
    nonce: bytes
    status: int
    timestamp_ms: int
    version: int
    def __init__(self, version: _Optional[int] = ..., kind: _Optional[_Union[EnvelopeKind, str]] = ..., key_id: _Optional[str] = ..., timestamp_ms: _Optional[int] = ..., nonce: _Optional[bytes] = ..., method: _Optional[str] = ..., status: _Optional[int] = ..., detail: _Optional[_Union[StatusDetail, str]] = ..., message: _Optional[str] = ..., body: _Optional[bytes] = ..., mac: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ["allow_net", "argv", "cwd", "env", "shell", "stderr_limit", "stdin", "stdout_limit", "timeout_ms"]
    ALLOW_NET_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    STDERR_LIMIT_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDOUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    allow_net: _containers.RepeatedScalarFieldContainer[str]
    argv: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    shell: str
    stderr_limit: int
    stdin: bytes
    stdout_limit: int
    timeout_ms: int
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., shell: _Optional[str] = ..., cwd: _Optional[str] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., stdin: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., stdout_limit: _Optional[int] = ..., stderr_limit: _Optional[int] = ..., allow_net: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ["duration_us", "exit_code", "isolation_profile", "oom_killed", "signal", "stderr", "stderr_dropped", "stderr_truncated", "stdout", "stdout_dropped", "stdout_truncated", "timed_out"]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_PROFILE_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STDERR_DROPPED_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_DROPPED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    duration_us: int
    exit_code: int
    isolation_profile: str
    oom_killed: bool
    signal: int
    stderr: bytes
    stderr_dropped: int
    stderr_truncated: bool
    stdout: bytes
    stdout_dropped: int
    stdout_truncated: bool
    timed_out: bool
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., timed_out: bool = ..., oom_killed: bool = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., stdout_truncated: bool = ..., stderr_truncated: bool = ..., stdout_dropped: _Optional[int] = ..., stderr_dropped: _Optional[int] = ..., duration_us: _Optional[int] = ..., isolation_profile: _Optional[str] = ...) -> None: ...

class FileDownloadRequest(_message.Message):
    __slots__ = ["compression", "length", "offset", "path", "sha256"]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    compression: Compression
    length: int
    offset: int
    path: str
    sha256: bool
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., compression: _Optional[_Union[Compression, str]] = ..., sha256: bool = ...) -> None: ...

class FileDownloadResponse(_message.Message):
    __slots__ = ["compression", "content_hash", "ctime_ns", "data_length", "eof", "mode", "mtime_ns", "offset", "sha256", "size"]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CTIME_NS_FIELD_NUMBER: _ClassVar[int]
    DATA_LENGTH_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    compression: Compression
    content_hash: bytes
    ctime_ns: int
    data_length: int
    eof: bool
    mode: int
    mtime_ns: int
    offset: int
    sha256: bytes
    size: int
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[bytes] = ..., offset: _Optional[int] = ..., compression: _Optional[_Union[Compression, str]] = ..., data_length: _Optional[int] = ..., eof: bool = ..., mode: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., ctime_ns: _Optional[int] = ..., content_hash: _Optional[bytes] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ["gid", "mode", "mtime_ns", "path", "raw_path", "raw_symlink_target", "size", "symlink_target", "type", "uid"]
    GID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    gid: int
    mode: int
    mtime_ns: int
    path: str
    raw_path: bytes
    raw_symlink_target: bytes
    size: int
    symlink_target: str
    type: FileType
    uid: int
    def __init__(self, path: _Optional[str] = ..., type: _Optional[_Union[FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., symlink_target: _Optional[str] = ..., raw_path: _Optional[bytes] = ..., raw_symlink_target: _Optional[bytes] = ...) -> None: ...

class FileListRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "path"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    path: str
    def __init__(self, path: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class FileListResponse(_message.Message):
    __slots__ = ["entries", "next_page_token"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileInfo]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class FileMkdirRequest(_message.Message):
    __slots__ = ["mode", "parents", "path"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    mode: int
    parents: bool
    path: str
    def __init__(self, path: _Optional[str] = ..., parents: bool = ..., mode: _Optional[int] = ...) -> None: ...

class FileMkdirResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FileMoveRequest(_message.Message):
    __slots__ = ["overwrite", "to"]
    FROM_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    overwrite: bool
    to: str
    def __init__(self, to: _Optional[str] = ..., overwrite: bool = ..., **kwargs) -> None: ...

class FileMoveResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FileRemoveRequest(_message.Message):
    __slots__ = ["path", "recursive"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    def __init__(self, path: _Optional[str] = ..., recursive: bool = ...) -> None: ...

class FileRemoveResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class FileStatRequest(_message.Message):
    __slots__ = ["path"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class FileStatResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class FileSymlinkRequest(_message.Message):
    __slots__ = ["path", "target"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    path: str
    target: str
    def __init__(self, path: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class FileSymlinkResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FileUploadAbortRequest(_message.Message):
    __slots__ = ["upload_id"]
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    upload_id: str
    def __init__(self, upload_id: _Optional[str] = ...) -> None: ...

class FileUploadAbortResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FileUploadBeginRequest(_message.Message):
    __slots__ = ["compression", "content_hash", "make_parents", "mode", "overwrite", "path", "sha256", "size", "upload_id"]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    MAKE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    compression: Compression
    content_hash: bytes
    make_parents: bool
    mode: int
    overwrite: bool
    path: str
    sha256: bytes
    size: int
    upload_id: str
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[bytes] = ..., mode: _Optional[int] = ..., overwrite: bool = ..., make_parents: bool = ..., upload_id: _Optional[str] = ..., content_hash: _Optional[bytes] = ..., compression: _Optional[_Union[Compression, str]] = ...) -> None: ...

class FileUploadBeginResponse(_message.Message):
    __slots__ = ["confirmed_offset", "info", "max_chunk", "upload_id"]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    confirmed_offset: int
    info: FileInfo
    max_chunk: int
    upload_id: str
    def __init__(self, upload_id: _Optional[str] = ..., confirmed_offset: _Optional[int] = ..., max_chunk: _Optional[int] = ..., info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class FileUploadChunkRequest(_message.Message):
    __slots__ = ["compression", "offset", "upload_id"]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    compression: Compression
    offset: int
    upload_id: str
    def __init__(self, upload_id: _Optional[str] = ..., offset: _Optional[int] = ..., compression: _Optional[_Union[Compression, str]] = ...) -> None: ...

class FileUploadChunkResponse(_message.Message):
    __slots__ = ["confirmed_offset"]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    confirmed_offset: int
    def __init__(self, confirmed_offset: _Optional[int] = ...) -> None: ...

class FileUploadCommitRequest(_message.Message):
    __slots__ = ["content_hash", "upload_id"]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    content_hash: bytes
    upload_id: str
    def __init__(self, upload_id: _Optional[str] = ..., content_hash: _Optional[bytes] = ...) -> None: ...

class FileUploadCommitResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class FileWatchRequest(_message.Message):
    __slots__ = ["cursor", "max_events", "path", "stop", "wait_ms"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    max_events: int
    path: str
    stop: bool
    wait_ms: int
    def __init__(self, path: _Optional[str] = ..., cursor: _Optional[str] = ..., wait_ms: _Optional[int] = ..., max_events: _Optional[int] = ..., stop: bool = ...) -> None: ...

class FileWatchResponse(_message.Message):
    __slots__ = ["cursor", "directories", "end", "events"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    directories: int
    end: WatchEnd
    events: _containers.RepeatedCompositeFieldContainer[WatchEvent]
    def __init__(self, cursor: _Optional[str] = ..., events: _Optional[_Iterable[_Union[WatchEvent, _Mapping]]] = ..., end: _Optional[_Union[WatchEnd, str]] = ..., directories: _Optional[int] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ["auth_configured", "egress_ceiling", "mode", "not_ready_reason", "sandbox_ready", "uptime_ms", "version"]
    AUTH_CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    EGRESS_CEILING_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_REASON_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_READY_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    auth_configured: bool
    egress_ceiling: _containers.RepeatedScalarFieldContainer[str]
    mode: str
    not_ready_reason: str
    sandbox_ready: bool
    uptime_ms: int
    version: str
    def __init__(self, version: _Optional[str] = ..., mode: _Optional[str] = ..., sandbox_ready: bool = ..., auth_configured: bool = ..., uptime_ms: _Optional[int] = ..., not_ready_reason: _Optional[str] = ..., egress_ceiling: _Optional[_Iterable[str]] = ...) -> None: ...

class OutputMark(_message.Message):
    __slots__ = ["offset", "seq", "time_ms"]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    seq: int
    time_ms: int
    def __init__(self, offset: _Optional[int] = ..., seq: _Optional[int] = ..., time_ms: _Optional[int] = ...) -> None: ...

class ProcessCloseStdinRequest(_message.Message):
    __slots__ = ["epoch", "process_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    process_id: str
    def __init__(self, process_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessCloseStdinResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ["argv", "expose_port", "process_id", "started_ms", "status", "stderr_end", "stdout_end", "tag", "tty"]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    EXPOSE_PORT_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STDERR_END_FIELD_NUMBER: _ClassVar[int]
    STDOUT_END_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    expose_port: int
    process_id: str
    started_ms: int
    status: ProcessStatus
    stderr_end: int
    stdout_end: int
    tag: str
    tty: bool
    def __init__(self, process_id: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., tag: _Optional[str] = ..., status: _Optional[_Union[ProcessStatus, _Mapping]] = ..., expose_port: _Optional[int] = ..., started_ms: _Optional[int] = ..., tty: bool = ..., stdout_end: _Optional[int] = ..., stderr_end: _Optional[int] = ...) -> None: ...

class ProcessListRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessListResponse(_message.Message):
    __slots__ = ["epoch", "processes"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessReadRequest(_message.Message):
    __slots__ = ["epoch", "marks", "max_bytes", "process_id", "stderr_offset", "stdout_offset", "wait_ms"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MARKS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    STDERR_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STDOUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    marks: bool
    max_bytes: int
    process_id: str
    stderr_offset: int
    stdout_offset: int
    wait_ms: int
    def __init__(self, process_id: _Optional[str] = ..., stdout_offset: _Optional[int] = ..., stderr_offset: _Optional[int] = ..., max_bytes: _Optional[int] = ..., wait_ms: _Optional[int] = ..., marks: bool = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessReadResponse(_message.Message):
    __slots__ = ["epoch", "retry_after_ms", "status", "stderr", "stdout"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    retry_after_ms: int
    status: ProcessStatus
    stderr: StreamChunk
    stdout: StreamChunk
    def __init__(self, stdout: _Optional[_Union[StreamChunk, _Mapping]] = ..., stderr: _Optional[_Union[StreamChunk, _Mapping]] = ..., status: _Optional[_Union[ProcessStatus, _Mapping]] = ..., retry_after_ms: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessRemoveRequest(_message.Message):
    __slots__ = ["epoch", "process_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    process_id: str
    def __init__(self, process_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessRemoveResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessResizeRequest(_message.Message):
    __slots__ = ["epoch", "process_id", "size"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    process_id: str
    size: TerminalSize
    def __init__(self, process_id: _Optional[str] = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessResizeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessSignalRequest(_message.Message):
    __slots__ = ["epoch", "kill_after_ms", "process_id", "signal"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KILL_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    kill_after_ms: int
    process_id: str
    signal: int
    def __init__(self, process_id: _Optional[str] = ..., signal: _Optional[int] = ..., kill_after_ms: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessSignalResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessStartRequest(_message.Message):
    __slots__ = ["allow_net", "argv", "cwd", "env", "expose_port", "lease_ms", "lossless", "max_runtime_ms", "ring_size", "shell", "size", "stdin_open", "tag", "tty"]
    ALLOW_NET_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXPOSE_PORT_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    LOSSLESS_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_MS_FIELD_NUMBER: _ClassVar[int]
    RING_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STDIN_OPEN_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    allow_net: _containers.RepeatedScalarFieldContainer[str]
    argv: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    expose_port: int
    lease_ms: int
    lossless: bool
    max_runtime_ms: int
    ring_size: int
    shell: str
    size: TerminalSize
    stdin_open: bool
    tag: str
    tty: bool
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., shell: _Optional[str] = ..., cwd: _Optional[str] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., expose_port: _Optional[int] = ..., max_runtime_ms: _Optional[int] = ..., ring_size: _Optional[int] = ..., stdin_open: bool = ..., tty: bool = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ..., tag: _Optional[str] = ..., lease_ms: _Optional[int] = ..., lossless: bool = ..., allow_net: _Optional[_Iterable[str]] = ...) -> None: ...

class ProcessStartResponse(_message.Message):
    __slots__ = ["epoch", "isolation_profile", "process_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    isolation_profile: str
    process_id: str
    def __init__(self, process_id: _Optional[str] = ..., isolation_profile: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessStatus(_message.Message):
    __slots__ = ["duration_us", "exit_code", "lease_expired", "oom_killed", "running", "runtime_exceeded", "signal"]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    duration_us: int
    exit_code: int
    lease_expired: bool
    oom_killed: bool
    running: bool
    runtime_exceeded: bool
    signal: int
    def __init__(self, running: bool = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., runtime_exceeded: bool = ..., lease_expired: bool = ..., oom_killed: bool = ..., duration_us: _Optional[int] = ...) -> None: ...

class ProcessWaitRequest(_message.Message):
    __slots__ = ["epoch", "process_id", "wait_ms"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    process_id: str
    wait_ms: int
    def __init__(self, process_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessWaitResponse(_message.Message):
    __slots__ = ["epoch", "retry_after_ms", "status"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    retry_after_ms: int
    status: ProcessStatus
    def __init__(self, status: _Optional[_Union[ProcessStatus, _Mapping]] = ..., retry_after_ms: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessWriteRequest(_message.Message):
    __slots__ = ["close", "data", "epoch", "process_id"]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    close: bool
    data: bytes
    epoch: int
    process_id: str
    def __init__(self, process_id: _Optional[str] = ..., data: _Optional[bytes] = ..., close: bool = ..., epoch: _Optional[int] = ...) -> None: ...

class ProcessWriteResponse(_message.Message):
    __slots__ = ["retry_after_ms", "written"]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    retry_after_ms: int
    written: int
    def __init__(self, written: _Optional[int] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ["new_key_id", "new_key_secret"]
    NEW_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_KEY_SECRET_FIELD_NUMBER: _ClassVar[int]
    new_key_id: str
    new_key_secret: bytes
    def __init__(self, new_key_id: _Optional[str] = ..., new_key_secret: _Optional[bytes] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ["entries_removed", "processes_killed", "snapshot"]
    ENTRIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_KILLED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    entries_removed: int
    processes_killed: int
    snapshot: str
    def __init__(self, processes_killed: _Optional[int] = ..., entries_removed: _Optional[int] = ..., snapshot: _Optional[str] = ...) -> None: ...

class SnapshotInfo(_message.Message):
    __slots__ = ["bytes", "created_ms", "files", "name", "path"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    created_ms: int
    files: int
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., files: _Optional[int] = ..., bytes: _Optional[int] = ..., created_ms: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...

class StreamChunk(_message.Message):
    __slots__ = ["end", "eof", "length", "lost", "marks", "offset"]
    END_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    MARKS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    end: int
    eof: bool
    length: int
    lost: int
    marks: _containers.RepeatedCompositeFieldContainer[OutputMark]
    offset: int
    def __init__(self, length: _Optional[int] = ..., offset: _Optional[int] = ..., lost: _Optional[int] = ..., end: _Optional[int] = ..., eof: bool = ..., marks: _Optional[_Iterable[_Union[OutputMark, _Mapping]]] = ...) -> None: ...

class SyncListRequest(_message.Message):
    __slots__ = ["url"]
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class SyncListResponse(_message.Message):
    __slots__ = ["snapshots"]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[SnapshotInfo]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[SnapshotInfo, _Mapping]]] = ...) -> None: ...

class SyncPullRequest(_message.Message):
    __slots__ = ["exclude", "mirror", "path", "snapshot", "url"]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    MIRROR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    exclude: _containers.RepeatedScalarFieldContainer[str]
    mirror: bool
    path: str
    snapshot: str
    url: str
    def __init__(self, snapshot: _Optional[str] = ..., url: _Optional[str] = ..., path: _Optional[str] = ..., mirror: bool = ..., exclude: _Optional[_Iterable[str]] = ...) -> None: ...

class SyncPullResponse(_message.Message):
    __slots__ = ["blobs_fetched", "bytes", "directories", "files", "removed", "skipped", "snapshot", "symlinks"]
    BLOBS_FETCHED_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    blobs_fetched: int
    bytes: int
    directories: int
    files: int
    removed: int
    skipped: int
    snapshot: str
    symlinks: int
    def __init__(self, files: _Optional[int] = ..., bytes: _Optional[int] = ..., snapshot: _Optional[str] = ..., directories: _Optional[int] = ..., symlinks: _Optional[int] = ..., removed: _Optional[int] = ..., blobs_fetched: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class SyncPushRequest(_message.Message):
    __slots__ = ["default_excludes", "exclude", "path", "snapshot", "url"]
    DEFAULT_EXCLUDES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    default_excludes: bool
    exclude: _containers.RepeatedScalarFieldContainer[str]
    path: str
    snapshot: str
    url: str
    def __init__(self, snapshot: _Optional[str] = ..., url: _Optional[str] = ..., path: _Optional[str] = ..., exclude: _Optional[_Iterable[str]] = ..., default_excludes: bool = ...) -> None: ...

class SyncPushResponse(_message.Message):
    __slots__ = ["blobs", "blobs_uploaded", "bytes", "bytes_uploaded", "directories", "files", "files_read", "skipped", "snapshot", "symlinks", "url"]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    BLOBS_UPLOADED_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    BYTES_UPLOADED_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    FILES_READ_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    blobs: int
    blobs_uploaded: int
    bytes: int
    bytes_uploaded: int
    directories: int
    files: int
    files_read: int
    skipped: int
    snapshot: str
    symlinks: int
    url: str
    def __init__(self, snapshot: _Optional[str] = ..., files: _Optional[int] = ..., bytes: _Optional[int] = ..., blobs_uploaded: _Optional[int] = ..., blobs: _Optional[int] = ..., bytes_uploaded: _Optional[int] = ..., files_read: _Optional[int] = ..., directories: _Optional[int] = ..., symlinks: _Optional[int] = ..., skipped: _Optional[int] = ..., url: _Optional[str] = ...) -> None: ...

class SyncStatusRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SyncStatusResponse(_message.Message):
    __slots__ = ["blobs_uploaded", "bytes_done", "bytes_total", "bytes_uploaded", "files_done", "files_read", "files_total", "message", "operation", "running", "snapshot", "started_ms", "status"]
    BLOBS_UPLOADED_FIELD_NUMBER: _ClassVar[int]
    BYTES_DONE_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BYTES_UPLOADED_FIELD_NUMBER: _ClassVar[int]
    FILES_DONE_FIELD_NUMBER: _ClassVar[int]
    FILES_READ_FIELD_NUMBER: _ClassVar[int]
    FILES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    blobs_uploaded: int
    bytes_done: int
    bytes_total: int
    bytes_uploaded: int
    files_done: int
    files_read: int
    files_total: int
    message: str
    operation: str
    running: bool
    snapshot: str
    started_ms: int
    status: int
    def __init__(self, running: bool = ..., operation: _Optional[str] = ..., snapshot: _Optional[str] = ..., files_done: _Optional[int] = ..., bytes_done: _Optional[int] = ..., files_total: _Optional[int] = ..., bytes_total: _Optional[int] = ..., blobs_uploaded: _Optional[int] = ..., started_ms: _Optional[int] = ..., status: _Optional[int] = ..., message: _Optional[str] = ..., files_read: _Optional[int] = ..., bytes_uploaded: _Optional[int] = ...) -> None: ...

class TerminalSize(_message.Message):
    __slots__ = ["cols", "rows"]
    COLS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    cols: int
    rows: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ["directory", "kind", "lost", "path", "raw_path", "raw_to", "to"]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_TO_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    directory: bool
    kind: WatchEventKind
    lost: int
    path: str
    raw_path: bytes
    raw_to: bytes
    to: str
    def __init__(self, kind: _Optional[_Union[WatchEventKind, str]] = ..., path: _Optional[str] = ..., to: _Optional[str] = ..., directory: bool = ..., raw_path: _Optional[bytes] = ..., raw_to: _Optional[bytes] = ..., lost: _Optional[int] = ...) -> None: ...

class EnvelopeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StatusDetail(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WatchEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WatchEnd(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
