"""The wire layer: keys, the authenticated Envelope, and one call of any rpc.

:class:`boxkite.Client` is built on this module; use it directly for what the client does not
wrap, or to look at the envelope itself (tests and tools do)::

    from boxkite import wire
    from boxkite.v1 import boxkite_pb2 as pb

    with wire.Channel("tcp://127.0.0.1:7700", key=wire.load_key_file("key")) as ch:
        reply = ch.call("Health", pb.HealthRequest())
        reply.message.version, reply.verified

Everything here follows docs/PROTOCOL.md: the Envelope and its MAC ("The MAC"; bk_envelope_mac()
in common/envelope.c), what a client checks of an answer ("Responses: what a client must check";
bk_request_call() in client/lib/client.c), the key file ("Key file"; bk_keyring_parse() in
common/keys.c) and the content hash ("Content hash").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import socket
import stat
import struct
import threading
import time
from typing import Any, Iterable, List, Optional, Tuple, Type

from google.protobuf.message import DecodeError, Message

from . import _sp
from ._sp import Address, PathLike, PinnedCertificate, parse_url
from .errors import DataLossError, DeadlineExceededError, Detail, Status, UnavailableError, error
from .v1 import boxkite_pb2 as pb

__all__ = [
    "BLOCK_SIZE", "ENVELOPE_VERSION", "MAC_LEN", "NONCE_LEN", "Channel", "ContentHasher", "Key", "Reply",
    "block_hashes", "content_hash", "envelope_mac", "is_canonical", "load_key_file", "mac_input",
    "parse_key_file", "preview_token", "store_prefix",
]

ENVELOPE_VERSION = 2
NONCE_LEN = 16
MAC_LEN = 32
MAC_DOMAIN = b"boxkite.v1.Envelope\x00"  # BK_MAC_DOMAIN, its NUL included: 20 bytes
BLOCK_SIZE = 4 << 20  # the content hash's block, and the largest chunk either way (BK_BLOCK_SIZE)
SERVICE = pb.DESCRIPTOR.services_by_name["Sandbox"]
# The rpcs whose answers carry a data field (docs/PROTOCOL.md, "Responses"): a file's chunk, a
# process's output. Any other answer that carries one is refused.
ANSWERS_WITH_DATA = frozenset(("FileDownload", "ProcessRead"))
_EMPTY_SHA256 = hashlib.sha256(b"").digest()


# --- keys (common/keys.c) ---------------------------------------------------------------------

KEY_ID_MAX = 64
KEY_MIN = 32
KEY_MAX = 64
KEY_FILE_MAX = 65536
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,%d}\Z" % KEY_ID_MAX)


class Key:
    """A shared key: its id and its secret (32 to 64 bytes). ``repr()`` never shows the secret.

    ``Key.generate("tenant-2")`` makes a fresh 256-bit key, e.g. the next tenant's for
    :meth:`boxkite.Client.reset`; ``key.write_key_file(path)`` saves it as ``bkctl keygen`` does.
    """

    __slots__ = ("key_id", "secret")
    key_id: str
    secret: bytes

    def __init__(self, key_id: str, secret: bytes) -> None:
        if not isinstance(key_id, str) or not _KEY_ID.match(key_id):
            raise ValueError("a key id is 1..%d characters of [A-Za-z0-9._-]" % KEY_ID_MAX)
        secret = bytes(secret)
        if not KEY_MIN <= len(secret) <= KEY_MAX:
            raise ValueError("a key is %d..%d bytes, not %d" % (KEY_MIN, KEY_MAX, len(secret)))
        self.key_id = key_id
        self.secret = secret

    @classmethod
    def generate(cls, key_id: str = "k1") -> "Key":
        """A fresh key of 32 random bytes (os.urandom)."""
        return cls(key_id, os.urandom(KEY_MIN))

    def key_file_text(self) -> str:
        """The key in key-file format, as ``bkctl keygen`` writes it."""
        return "# boxkite key file: <key-id> <hex secret>; keep it mode 0600\n%s %s\n" % (
            self.key_id, self.secret.hex())

    def write_key_file(self, path: PathLike) -> None:
        """Write a new key file (mode 0600) holding this key; an existing file is not replaced
        (FileExistsError)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(self.key_file_text())
            f.flush()
            os.fsync(f.fileno())

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Key) and self.key_id == other.key_id
                and hmac.compare_digest(self.secret, other.secret))

    def __hash__(self) -> int:
        return hash(self.key_id)

    def __repr__(self) -> str:
        return "Key(%r, <%d-byte secret>)" % (self.key_id, len(self.secret))


def parse_key_file(text: str, origin: str = "key file") -> List[Key]:
    """Every key of a key file's text, in order (docs/PROTOCOL.md, "Key file"): ``<key-id>
    <hex secret>`` per line, blank and ``#`` lines ignored, no id twice. ValueError names the
    line of what is refused."""
    keys: List[Key] = []
    seen = set()
    if "\0" in text:
        raise ValueError("%s: NUL byte" % origin)
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        line = line.lstrip(" \t")
        if not line or line.startswith("#"):
            continue
        fields = re.split(r"[ \t]+", line.rstrip(" \t"))
        if not _KEY_ID.match(fields[0]):
            raise ValueError("%s line %d: key id is not 1..%d of [A-Za-z0-9._-]" % (origin, lineno, KEY_ID_MAX))
        if len(fields) != 2:
            raise ValueError("%s line %d: expected '<key-id> <hex secret>'" % (origin, lineno))
        key_id, hexed = fields
        if not re.fullmatch(r"[0-9A-Fa-f]*", hexed):
            raise ValueError("%s line %d: key '%s' has a non-hex character" % (origin, lineno, key_id))
        if len(hexed) % 2 or not 2 * KEY_MIN <= len(hexed) <= 2 * KEY_MAX:
            raise ValueError("%s line %d: key '%s' has %d hex digits; a key is %d..%d hex digits (%d..%d bytes)"
                             % (origin, lineno, key_id, len(hexed), 2 * KEY_MIN, 2 * KEY_MAX, KEY_MIN, KEY_MAX))
        if key_id in seen:
            raise ValueError("%s line %d: duplicate key id '%s'" % (origin, lineno, key_id))
        seen.add(key_id)
        keys.append(Key(key_id, bytes.fromhex(hexed)))
    if not keys:
        raise ValueError("%s: no keys" % origin)
    return keys


def load_key_file(path: PathLike, key_id: Optional[str] = None) -> Key:
    """The first key of a key file, or the one named key_id. Like bk_keyring_load(), it refuses a
    file that is not regular, that group or others may access (ValueError: ``chmod 600``), or
    larger than 64 KiB."""
    name = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("key file %s is not a regular file" % name)
        if st.st_mode & 0o077:
            raise ValueError("key file %s has mode %04o: group or others may access it (chmod 600 %s)"
                             % (name, stat.S_IMODE(st.st_mode), name))
        raw = f.read(KEY_FILE_MAX + 1)
    if len(raw) > KEY_FILE_MAX:
        raise ValueError("key file %s is larger than %d bytes" % (name, KEY_FILE_MAX))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("key file %s is not UTF-8 text" % name) from None
    keys = parse_key_file(text, name)
    if key_id is None:
        return keys[0]
    for k in keys:
        if k.key_id == key_id:
            return k
    raise ValueError("key file %s has no key '%s'" % (name, key_id))


def store_prefix(key: Key) -> str:
    """Where a key's snapshots are under every store (docs/PROTOCOL.md, "Sync: whose snapshots"):
    ``t-`` and the first 16 bytes of HMAC-SHA256(secret, "boxkite-store-prefix-v1" NUL key id), in
    lowercase hex."""
    mac = hmac.new(key.secret, b"boxkite-store-prefix-v1\0" + key.key_id.encode(), hashlib.sha256).digest()
    return "t-" + mac[:16].hex()


def preview_token(key: Key, port: int, expires: int) -> str:
    """A token granting one exposed port until expires (Unix seconds), minted with no call to the
    server (docs/PROTOCOL.md, "Preview tokens"): base64url, unpadded, of 0x01 | port (u16) |
    expiry (i64) | len(key id) (u8) | key id | HMAC-SHA256(secret, "boxkite-preview-v1" NUL |
    what precedes it). Served at ``/preview/PORT/TOKEN/`` of boxkited's --preview-listen."""
    if not 1 <= port <= 65535:
        raise ValueError("a port is 1-65535")
    signed = struct.pack(">BHqB", 1, port, expires, len(key.key_id)) + key.key_id.encode()
    mac = hmac.new(key.secret, b"boxkite-preview-v1\0" + signed, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(signed + mac).rstrip(b"=").decode("ascii")


# --- the MAC (common/envelope.c, bk_envelope_mac) ---------------------------------------------

def _lp(data: bytes) -> bytes:
    """A u32 big-endian length, then the bytes: every variable field is length-prefixed."""
    return struct.pack(">I", len(data)) + data


def mac_input(env: Any, data: Optional[bytes] = None, data_digest: Optional[bytes] = None) -> bytes:
    """The exact bytes HMAC-SHA256 covers: every field of env (a ``pb.Envelope``) but ``mac``, in
    a fixed order; the body whole, the data as its length and SHA-256. data: the data field when
    it is not in env (an answer's, kept apart), else env.data; data_digest: its SHA-256, when the
    caller has it, else computed here."""
    if data is None:
        data = env.data
    digest = data_digest if data_digest is not None else hashlib.sha256(data).digest()
    return b"".join((
        MAC_DOMAIN,
        struct.pack(">II", env.version, env.kind),
        _lp(env.key_id.encode("utf-8")),
        struct.pack(">Q", env.timestamp_ms & 0xFFFFFFFFFFFFFFFF),
        _lp(env.nonce),
        _lp(env.method.encode("utf-8")),
        struct.pack(">II", env.status & 0xFFFFFFFF, env.detail),
        _lp(env.message.encode("utf-8")),
        struct.pack(">Q", len(env.body)),
        env.body,
        struct.pack(">Q", len(data)),
        digest,
    ))


def envelope_mac(secret: bytes, env: Any, data: Optional[bytes] = None, data_digest: Optional[bytes] = None) -> bytes:
    """HMAC-SHA256 of :func:`mac_input` under secret."""
    return hmac.new(secret, mac_input(env, data, data_digest), hashlib.sha256).digest()


def is_canonical(env: Any, raw: bytes) -> bool:
    """True when raw, decoded as env, is the canonical encoding boxkited and libboxkite require:
    encoded again without unknown fields it is the bytes received (no unknown, repeated,
    reordered or overlong field; the data field last), and no string holds a NUL byte (C would
    MAC it only up to the NUL)."""
    bare = pb.Envelope()
    bare.CopyFrom(env)
    bare.DiscardUnknownFields()
    return bare.SerializeToString() == raw and "\0" not in env.key_id + env.method + env.message


_DATA_TAG = b"\x62"  # field 12, length-delimited


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _split_answer(raw: bytes) -> Optional[Tuple[Any, bytes]]:
    """(the Envelope without its data, the data) of a canonical answer, or None. The data field
    is checked where it lies, last, and not encoded again: only the small fields before it are."""
    try:
        env = pb.Envelope.FromString(raw)
    except DecodeError:
        return None
    data = env.data
    env.ClearField("data")
    head = len(raw) - len(data)
    if data:
        field = _DATA_TAG + _varint(len(data))
        head -= len(field)
        if head < 0 or raw[head:head + len(field)] != field:
            return None
    bare = pb.Envelope()
    bare.CopyFrom(env)
    bare.DiscardUnknownFields()
    if bare.SerializeToString() != raw[:head] or "\0" in env.key_id + env.method + env.message:
        return None
    return env, data


# --- the content hash (docs/PROTOCOL.md, "Content hash") ---------------------------------------

def block_hashes(data: bytes) -> List[bytes]:
    """The SHA-256 of each BLOCK_SIZE block of data, in order (none for empty data)."""
    return [hashlib.sha256(data[i:i + BLOCK_SIZE]).digest() for i in range(0, len(data), BLOCK_SIZE)]


def content_hash(data: Optional[bytes] = None, blocks: Optional[Iterable[bytes]] = None) -> bytes:
    """SHA-256 over the concatenated block hashes: of data, or of the block hashes given."""
    return hashlib.sha256(b"".join(block_hashes(data or b"") if blocks is None else blocks)).digest()


class ContentHasher:
    """The content hash of bytes fed in order, in pieces of any size. A piece that starts a block
    and is the whole block, or the last bytes of the content, may come with its SHA-256 (the
    digest its MAC was checked with) so that it is not hashed again; after a short piece given
    so, the content has ended."""

    def __init__(self) -> None:
        self._blocks: List[bytes] = []
        self._partial = hashlib.sha256()
        self._in_block = 0
        self._ended = False
        self.size = 0

    def update(self, data: bytes, digest: Optional[bytes] = None) -> None:
        if self._ended:
            raise ValueError("the content ended with a short block")
        if digest is not None and self._in_block == 0 and 0 < len(data) <= BLOCK_SIZE:
            self._blocks.append(digest)
            self._ended = len(data) < BLOCK_SIZE
            self.size += len(data)
            return
        view = memoryview(data)
        while view:
            n = min(len(view), BLOCK_SIZE - self._in_block)
            self._partial.update(view[:n])
            self._in_block += n
            self.size += n
            view = view[n:]
            if self._in_block == BLOCK_SIZE:
                self._blocks.append(self._partial.digest())
                self._partial = hashlib.sha256()
                self._in_block = 0

    def digest(self) -> bytes:
        blocks = list(self._blocks)
        if self._in_block:
            blocks.append(self._partial.digest())
        return hashlib.sha256(b"".join(blocks)).digest()


# --- one call ---------------------------------------------------------------------------------

class Reply:
    """A successful call.

    Attributes:
        message: the decoded response message (``pb.HealthResponse``, ...).
        verified: its answer's MAC verified under the caller's key (always, for a keyed call).
        envelope: the answer's Envelope, without its data field.
        data: the answer's data field (FileDownload's chunk, ProcessRead's bytes), b"" for none.
        data_digest: the SHA-256 of data, computed once to check the MAC.
    """

    __slots__ = ("message", "verified", "envelope", "data", "data_digest")

    def __init__(self, message: Any, verified: bool, envelope: Any, data: bytes, data_digest: bytes) -> None:
        self.message = message
        self.verified = verified
        self.envelope = envelope
        self.data = data
        self.data_digest = data_digest


def response_type(method: str) -> Type[Message]:
    """The response message class of an rpc of service Sandbox."""
    try:
        desc = SERVICE.methods_by_name[method]
    except KeyError:
        raise ValueError("no rpc named %r in boxkite.v1.Sandbox: give its response type" % method) from None
    cls: Type[Message] = getattr(pb, desc.output_type.name)
    return cls


class Channel:
    """Calls to one boxkited: each request sealed (MAC'd when a key is given), each answer
    checked as docs/PROTOCOL.md says a client must.

    url: ``tcp://HOST:PORT``, ``tls+tcp://HOST:PORT`` (with tls_cert, the server's certificate
    to pin: a PEM file) or ``ipc:///PATH``. key: a :class:`Key`; without one only Health can be
    called. timeout: seconds a call waits for its answer, beyond the wait it asks the server for.

    Thread-safe: every call takes a connection of its own from a pool (it opens one when none is
    idle, and keeps up to ``max_idle`` idle ones), so a call that waits long (a long-poll) holds
    up no other. Like nng's REQ, a request whose connection closes before its answer came is
    sent again, the identical bytes, once, on a new connection: the server's replay cache never
    runs it twice (docs/PROTOCOL.md, "Replay and resend"). There are no timed re-sends.
    """

    def __init__(self, url: str, *, key: Optional[Key] = None, tls_cert: Optional[PathLike] = None,
                 timeout: float = 30.0, max_idle: int = 4) -> None:
        self.address: Address = parse_url(url)
        if self.address.scheme == "tls+tcp" and tls_cert is None:
            raise ValueError("%s: a tls+tcp:// URL needs the server's certificate to pin (tls_cert)" % url)
        if self.address.scheme != "tls+tcp" and tls_cert is not None:
            raise ValueError("%s: tls_cert is for tls+tcp:// URLs" % url)
        if timeout <= 0:
            raise ValueError("timeout is a number of seconds above 0")
        self.url = url
        self._tls = PinnedCertificate(tls_cert) if tls_cert is not None else None
        self._key = key
        self.timeout = float(timeout)
        self._max_idle = max_idle
        self._idle: List[_sp.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    # --- the key --------------------------------------------------------------------------

    @property
    def key(self) -> Optional[Key]:
        return self._key

    def set_key(self, key: Optional[Key]) -> None:
        """Use another key from the next call on (after a Reset that installed it)."""
        self._key = key

    @property
    def private(self) -> bool:
        """Nobody on the network can read the requests: ipc://, or tls+tcp://."""
        return self.address.private

    # --- connections ----------------------------------------------------------------------

    def connect(self) -> None:
        """Open a connection now (and keep it for the next call): an unreachable server is an
        :class:`UnavailableError` here rather than at the first call."""
        conn = self._dial("connect")
        self._give_back(conn)

    def close(self) -> None:
        """Close the idle connections; one in use closes when its call ends. Calls after close()
        raise UnavailableError."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dial(self, what: str) -> _sp.Connection:
        if self._closed:
            raise UnavailableError("%s: the client is closed" % what)
        try:
            return _sp.Connection(self.address, self.timeout, self._tls)
        except (OSError, _sp.ProtocolError) as e:
            raise UnavailableError("%s: cannot connect to %s: %s" % (what, self.url, _why(e))) from e

    def _take(self, what: str) -> _sp.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._dial(what)

    def _give_back(self, conn: _sp.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def exchange(self, raw: bytes, timeout: Optional[float] = None, what: str = "exchange") -> bytes:
        """Send one serialized Envelope and return the answer's bytes, unchecked. timeout:
        seconds (None: the channel's). DeadlineExceededError when no answer came in time,
        UnavailableError when the server cannot be reached."""
        limit = self.timeout if timeout is None else timeout
        conn = self._take(what)
        resent = False
        while True:
            try:
                answer = conn.request(raw, limit)
            except (OSError, _sp.ProtocolError) as e:
                conn.close()
                if isinstance(e, (TimeoutError, socket.timeout)):
                    raise DeadlineExceededError("%s: no answer in time" % what) from e
                # The connection closed under the request (a pooled one the server had closed,
                # or the server restarting): nng's REQ sends it again on a new one.
                if not resent and isinstance(e, ConnectionError):
                    resent = True
                    conn = self._dial(what)
                    continue
                raise UnavailableError("%s: %s" % (what, _why(e))) from e
            self._give_back(conn)
            return answer

    # --- sealing and checking ---------------------------------------------------------------

    def seal(self, method: str, request: Message, data: bytes = b"", *, data_digest: Optional[bytes] = None) -> Any:
        """A REQUEST Envelope for method carrying request (and data, the Envelope's data field),
        MAC'd when the channel has a key. data_digest: the SHA-256 of data, when the caller
        has it already."""
        key = self._key
        env = pb.Envelope(
            version=ENVELOPE_VERSION,
            kind=pb.ENVELOPE_KIND_REQUEST,
            key_id=key.key_id if key else "",
            timestamp_ms=time.time_ns() // 1000000,
            nonce=os.urandom(NONCE_LEN),
            method=method,
            body=request.SerializeToString(),
            data=data,
        )
        if key:
            env.mac = envelope_mac(key.secret, env, data_digest=data_digest)
        return env

    def open_answer(self, answer: bytes, request: Any, response_type_: Optional[Type[Message]] = None, *,
                    answer_data: Optional[bool] = None, answer_key: Optional[Key] = None) -> Reply:
        """Check an answer to the request Envelope as bk_request_call() does, and decode it; or
        raise the :class:`BoxkiteError` it amounts to. answer_data: whether the answer may carry
        a data field (by default: for the rpcs whose answers do, ANSWERS_WITH_DATA); one that
        carries it when it may not is DATA_LOSS. answer_key: the key the answer is MAC'd with,
        when it is not the channel's (a Reset installing a new one)."""
        method = request.method
        if answer_data is None:
            answer_data = method in ANSWERS_WITH_DATA
        split = _split_answer(answer)
        if split is None:
            raise DataLossError("%s: the answer is not a canonical Envelope" % method, method=method)
        env, data = split
        if env.version != ENVELOPE_VERSION:
            # A server of another version refusing ours says so in its own version, unMAC'd.
            if (env.kind == pb.ENVELOPE_KIND_RESPONSE and env.nonce == request.nonce and env.method == method
                    and env.status != Status.OK and env.detail == Detail.BAD_VERSION and not env.mac):
                raise error(env.status, "%s: the server speaks envelope version %d, this client %d: %s"
                            % (method, env.version, ENVELOPE_VERSION, env.message), detail=env.detail,
                            method=method)
            raise DataLossError("%s: the answer is an Envelope of version %d, not %d"
                                % (method, env.version, ENVELOPE_VERSION), method=method)
        # The answer must be to this request: its kind, nonce and method, and - when keyed - a
        # MAC under our key, which covers all of them.
        if (env.kind != pb.ENVELOPE_KIND_RESPONSE or len(env.nonce) != NONCE_LEN
                or not hmac.compare_digest(env.nonce, request.nonce) or env.method != method):
            raise DataLossError("%s: the answer is not for this request" % method, method=method)
        key = answer_key or (self._key if request.key_id else None)
        digest = hashlib.sha256(data).digest() if data else _EMPTY_SHA256
        verified = False
        if env.mac:
            verified = bool(key and env.key_id == key.key_id
                            and hmac.compare_digest(env.mac, envelope_mac(key.secret, env, data, digest)))
            if not verified:
                raise DataLossError("%s: the answer's MAC does not verify" % method, method=method)
        if env.status != Status.OK:
            raise error(env.status, env.message, detail=env.detail, verified=verified, method=method)
        # A keyed caller accepts success only with a MAC: anyone on the path could forge an
        # unauthenticated "OK".
        if key and not verified:
            raise DataLossError("%s: success answer without a MAC" % method, method=method)
        if data and not answer_data:
            raise DataLossError("%s: an answer with data this call does not take" % method,
                                verified=verified, method=method)
        cls = response_type_ or response_type(method)
        try:
            message = cls.FromString(env.body)
        except DecodeError:
            raise DataLossError("%s: cannot decode the answer" % method,
                                verified=verified, method=method) from None
        return Reply(message, verified, env, data, digest)

    def call(self, method: str, request: Message, response_type_: Optional[Type[Message]] = None, *,
             data: bytes = b"", data_digest: Optional[bytes] = None, wait: float = 0.0,
             answer_data: Optional[bool] = None, answer_key: Optional[Key] = None) -> Reply:
        """Call one rpc of service Sandbox: a :class:`Reply`, or the :class:`BoxkiteError` of its
        status. response_type_: the answer's message class (by default the rpc's, from the
        service). data: the request's data field (FileUploadChunk). wait: seconds the server
        may hold the call (a long-poll's wait, a command's timeout), added to the timeout."""
        env = self.seal(method, request, data, data_digest=data_digest)
        answer = self.exchange(env.SerializeToString(), self.timeout + wait, method)
        return self.open_answer(answer, env, response_type_, answer_data=answer_data, answer_key=answer_key)


def _why(e: BaseException) -> str:
    return str(e) or type(e).__name__
