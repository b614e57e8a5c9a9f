"""Run inside a sandboxed exec by tests/integration/test_egress_proxy.py: attempts through (and
around) the egress proxy, each described by a JSON object, each answered by one JSON line.

    python3 egress_client.py 'JSON-LIST-OF-ATTEMPTS'

An attempt:
  {"kind": "raw", "send": "...", "then": "...", "pace_ms": N, "timeout": S}
        connect to the proxy, send `send` (latin-1; pace_ms: one byte at a time, that far apart),
        read its answer to the end (or `timeout`); `then`: sent after the first answer's head
  {"kind": "tunnel-tls", "connect": "HOST:PORT", "sni": NAME, "request": "...", "cafile": PATH}
        CONNECT, then TLS inside the tunnel with that server name (verified against cafile, or
        not at all when it is absent), then `request`; the inner answer
  {"kind": "direct", "host": ADDR, "port": N, "udp": false}
        a socket straight to the address, past the proxy (there is no route: the errno)
  {"kind": "connect-only", "port": N}
        whether anything listens on 127.0.0.1:N in this exec's network namespace
Each answer: {"status": first answer's status code or null, "body": what followed (cut),
"errno": name or null, "inner_status": (tunnel-tls) the inner status}.
"""
import errno
import json
import select
import socket
import ssl
import sys
import time

PROXY = ("127.0.0.1", 3128)


def read_all(s, timeout):
    s.settimeout(timeout)
    got = b""
    try:
        while len(got) < 1 << 20:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except (socket.timeout, OSError):
        pass
    return got


def status_of(data):
    line = data.split(b"\r\n", 1)[0].split(b" ")
    try:
        return int(line[1]) if line[0].startswith(b"HTTP/") else None
    except (IndexError, ValueError):
        return None


def read_head(s, timeout):
    s.settimeout(timeout)
    got = b""
    while b"\r\n\r\n" not in got and len(got) < 65536:
        d = s.recv(4096)
        if not d:
            break
        got += d
    return got


def raw(a):
    s = socket.create_connection(PROXY, 5)
    data = a["send"].encode("latin-1")
    if a.get("pace_ms"):
        # A byte at a time, until the proxy answers (then what it says is read).
        for b in data:
            if select.select([s], [], [], 0)[0]:
                break
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
            time.sleep(a["pace_ms"] / 1000)
    else:
        s.sendall(data)
    if "then" in a:
        head = read_head(s, a.get("timeout", 5))
        try:
            s.sendall(a["then"].encode("latin-1"))
        except OSError:
            pass
        got = head + read_all(s, a.get("timeout", 5))
    else:
        got = read_all(s, a.get("timeout", 5))
    s.close()
    return {"status": status_of(got), "body": got[:4096].decode("latin-1")}


def tunnel_tls(a):
    s = socket.create_connection(PROXY, 5)
    s.sendall(f"CONNECT {a['connect']} HTTP/1.1\r\nHost: {a['connect']}\r\n\r\n".encode())
    head = read_head(s, 5)
    out = {"status": status_of(head), "body": head.decode("latin-1")}
    if out["status"] != 200:
        out["body"] += read_all(s, 2).decode("latin-1")
        return out
    ctx = ssl.create_default_context(cafile=a["cafile"]) if a.get("cafile") else ssl._create_unverified_context()
    if not a.get("cafile"):
        ctx.check_hostname = False
    try:
        t = ctx.wrap_socket(s, server_hostname=a["sni"])
        t.sendall(a["request"].encode("latin-1"))
        inner = read_all(t, a.get("timeout", 5))
        out["inner_status"] = status_of(inner)
        out["inner"] = inner[:4096].decode("latin-1")
    except (OSError, ssl.SSLError) as e:
        out["inner_error"] = type(e).__name__ + ": " + str(e)[:200]
    return out


def direct(a):
    kind = socket.SOCK_DGRAM if a.get("udp") else socket.SOCK_STREAM
    fam = socket.AF_INET6 if ":" in a["host"] else socket.AF_INET
    s = socket.socket(fam, kind)
    s.settimeout(3)
    try:
        if a.get("udp"):
            s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05exfil\x07example\x00\x00\x01\x00\x01",
                     (a["host"], a["port"]))
            s.recvfrom(512)
        else:
            s.connect((a["host"], a["port"]))
        return {"status": None, "errno": None}
    except OSError as e:
        return {"status": None, "errno": errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__}
    finally:
        s.close()


def connect_only(a):
    try:
        socket.create_connection(("127.0.0.1", a["port"]), 3).close()
        return {"status": None, "errno": None}
    except OSError as e:
        return {"status": None, "errno": errno.errorcode.get(e.errno, str(e))}


KINDS = {"raw": raw, "tunnel-tls": tunnel_tls, "direct": direct, "connect-only": connect_only}

for attempt in json.loads(sys.argv[1]):
    try:
        r = KINDS[attempt["kind"]](attempt)
    except OSError as e:
        r = {"status": None, "errno": errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)}
    print(json.dumps(r), flush=True)
