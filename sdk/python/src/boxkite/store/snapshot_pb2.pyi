from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Entry(_message.Message):
    __slots__ = ["blocks", "content_hash", "mode", "mtime_ns", "path", "size", "symlink_target", "type"]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedScalarFieldContainer[bytes]
    content_hash: bytes
    mode: int
    mtime_ns: int
    path: bytes
    size: int
    symlink_target: bytes
    type: int
    def __init__(self, path: _Optional[bytes] = ..., type: _Optional[int] = ..., mode: _Optional[int] = ..., size: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., content_hash: _Optional[bytes] = ..., blocks: _Optional[_Iterable[bytes]] = ..., symlink_target: _Optional[bytes] = ...) -> None: ...

class Manifest(_message.Message):
    __slots__ = ["bytes", "created_ms", "entries", "files", "id", "root", "version"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    created_ms: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    files: int
    id: str
    root: str
    version: int
    def __init__(self, version: _Optional[int] = ..., id: _Optional[str] = ..., created_ms: _Optional[int] = ..., root: _Optional[str] = ..., files: _Optional[int] = ..., bytes: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ...) -> None: ...
