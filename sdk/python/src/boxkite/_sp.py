"""nng's SP protocol, REQ side, over TCP, TLS and Unix-domain sockets, spoken directly: there is no
nng binding in the standard library (docs/PROTOCOL.md, "Transport", gives every byte):

  connection  each side sends 8 bytes: 00 'S' 'P' 00, its u16 protocol id (REQ 0x0030, REP
              0x0031), 00 00; each checks the other's.
  message     TCP and TLS: a u64 length, then that many bytes. IPC: the byte 0x01 first.
  REQ payload a u32 request id with its high bit set, then the Envelope; the REP answer starts
              with the same id.

All integers big-endian. One :class:`Connection` carries one request at a time.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from typing import NamedTuple, Optional, Union
from urllib.parse import urlsplit

SP_HEADER = b"\x00SP\x00"
SP_PROTO_REQ = 0x0030
SP_PROTO_REP = 0x0031
REQUEST_ID_BIT = 0x80000000
IPC_MESSAGE_TYPE = b"\x01"
# The largest answer taken, as libboxkite's (CLIENT_RECV_MAX, client/lib/client.c): an Exec answer
# carries both streams at the limits asked, up to 2 x --exec-output-max.
RECV_MAX = 1 << 30

PathLike = Union[str, "os.PathLike[str]"]


class ProtocolError(Exception):
    """The peer does not speak SP REP the way nng does."""


class Address(NamedTuple):
    """A parsed URL: its scheme (``tcp``, ``tls+tcp``, ``ipc``), host and port (TCP), or path
    (IPC)."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def private(self) -> bool:
        """Nobody on the network can read what travels: IPC, or TCP inside TLS."""
        return self.scheme != "tcp"


def parse_url(url: str) -> Address:
    """``tcp://HOST:PORT``, ``tls+tcp://HOST:PORT`` (``[v6]:PORT``), or ``ipc:///PATH``."""
    if "://" not in url:
        raise ValueError("%s is not a URL: write ipc://%s for a Unix socket, or tcp://HOST:PORT" % (url, url))
    parts = urlsplit(url)
    if parts.scheme == "ipc":
        path = url[len("ipc://"):]
        if not path.startswith("/"):
            raise ValueError("%s: an ipc:// URL names an absolute path, ipc:///PATH" % url)
        return Address("ipc", "", 0, path)
    if parts.scheme in ("tcp", "tls+tcp"):
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("%s: a %s URL is %s://HOST:PORT" % (url, parts.scheme, parts.scheme))
        return Address(parts.scheme, parts.hostname, port, "")
    raise ValueError("%s: the schemes are tcp://, tls+tcp:// and ipc://" % url)


class PinnedCertificate:
    """A server certificate pinned: it is the only CA the handshake trusts, and the certificate the
    server presents must be it, byte for byte. libboxkite pins the same way with nng's TLS (the
    certificate as its only CA, the name its CN); comparing the certificate itself is the
    stricter of the two and needs no name."""

    def __init__(self, cert_file: PathLike) -> None:
        with open(cert_file, "r", encoding="ascii") as f:
            pem = f.read()
        if "-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("%s: not a PEM certificate" % os.fspath(cert_file))
        self.der = ssl.PEM_cert_to_DER_cert(pem[pem.index("-----BEGIN CERTIFICATE-----"):])
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        # The name is not what is checked: the certificate is (after the handshake, below).
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.load_verify_locations(cadata=pem)

    def wrap(self, sock: socket.socket, host: str) -> ssl.SSLSocket:
        tls = self.context.wrap_socket(sock, server_hostname=host or None)
        try:
            if tls.getpeercert(binary_form=True) != self.der:
                raise ssl.SSLCertVerificationError("the server's certificate is not the one pinned")
        except BaseException:
            tls.close()
            raise
        return tls


def _recv_exact(sock: socket.socket, n: int, deadline: Optional[float]) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        _set_deadline(sock, deadline)
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("connection closed by the peer after %d of %d bytes" % (got, n))
        got += k
    return buf


def _set_deadline(sock: socket.socket, deadline: Optional[float]) -> None:
    if deadline is None:
        sock.settimeout(None)
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    sock.settimeout(left)


class Connection:
    """One SP REQ stream to a REP peer (boxkited), one request at a time.

    Raises OSError (ConnectionError, a timeout, ssl.SSLError) when the stream fails, and
    ProtocolError when the peer is not an SP REP peer. After any error the connection is
    unusable: close it."""

    def __init__(self, address: Address, timeout: Optional[float], tls: Optional[PinnedCertificate] = None) -> None:
        if (address.scheme == "tls+tcp") != (tls is not None):
            raise ValueError("a tls+tcp:// URL needs the server's certificate to pin, and only it takes one")
        self.address = address
        self._ipc = address.scheme == "ipc"
        deadline = None if timeout is None else time.monotonic() + timeout
        sock: socket.socket
        if self._ipc:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(address.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((address.host, address.port), timeout=timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls is not None:
                    sock = tls.wrap(sock, address.host)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        try:
            _set_deadline(sock, deadline)
            sock.sendall(SP_HEADER + struct.pack(">HH", SP_PROTO_REQ, 0))
            head = _recv_exact(sock, 8, deadline)
            if head[:4] != SP_HEADER or head[6:] != b"\x00\x00":
                raise ProtocolError("not an SP peer: header %s" % head.hex())
            peer = struct.unpack(">H", head[4:6])[0]
            if peer != SP_PROTO_REP:
                raise ProtocolError("SP peer protocol 0x%04x, expected REP 0x%04x" % (peer, SP_PROTO_REP))
        except BaseException:
            sock.close()
            raise
        # A random start, as nng's id map does, so that ids of different connections differ.
        self._next_id = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF

    def close(self) -> None:
        self._sock.close()

    def request(self, payload: bytes, timeout: Optional[float]) -> bytes:
        """Send payload under a fresh request id and return the payload of the answer to it,
        waiting at most timeout seconds (None: for ever). Answers to other ids (to a request
        given up on earlier) are dropped, as nng's req0 drops them."""
        deadline = None if timeout is None else time.monotonic() + timeout
        req_id = REQUEST_ID_BIT | self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        head = struct.pack(">QI", 4 + len(payload), req_id)
        _set_deadline(self._sock, deadline)
        self._sock.sendall((IPC_MESSAGE_TYPE if self._ipc else b"") + head + payload)
        while True:
            if self._ipc and _recv_exact(self._sock, 1, deadline) != IPC_MESSAGE_TYPE:
                raise ProtocolError("an IPC message of another type than 1")
            length = struct.unpack(">Q", _recv_exact(self._sock, 8, deadline))[0]
            if length < 4 or length > RECV_MAX:
                raise ProtocolError("answer of %d bytes: not a REP message" % length)
            message = _recv_exact(self._sock, length, deadline)
            if struct.unpack(">I", message[:4])[0] == req_id:
                return bytes(memoryview(message)[4:])
