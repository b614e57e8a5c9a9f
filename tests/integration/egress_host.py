"""The egress tests' far side (tests/integration/test_egress_proxy.py): run with
/usr/bin/python3 inside a network namespace the test made, it serves what a granted command may
reach and records everything that reaches it, so that a test can assert that a refused attempt
reached nothing.

    egress_host.py CONFIG.json

CONFIG names a log file (JSON lines, one per event, flushed at once) and:
  web     HTTP or HTTPS (cert, key) servers on ADDR:PORT: a pip "simple" index (/simple/...), its
          files (/files/...), git repositories over smart HTTP (/git/..., through
          git-http-backend), /bytes/N (N zero bytes), /echo/MARKER; every connection
          and every request logged ("accept", "request" with method, path, Host and the
          Authorization and X-Api-Key values it came with);
  record  plain TCP listeners that log each connection ("accept"), read what comes until the
          peer closes, and log it ("close", bytes and the first 64 of them in hex): the places a
          refused attempt must never reach;
  dns     a UDP DNS server answering A and AAAA from a table; a name whose table entry is a list
          answers its entries in turn (rebinding), and every query is logged ("query").
It prints "ready" on stdout once every listener is up.
"""
import http.server
import json
import os
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote

CFG = json.loads(Path(sys.argv[1]).read_text())
LOG = open(CFG["log"], "a", buffering=1)
LOG_LOCK = threading.Lock()
COUNTER = iter(range(1, 1 << 62))


def log(**event):
    with LOG_LOCK:
        LOG.write(json.dumps(event) + "\n")


# --- web ----------------------------------------------------------------------------------------

class Web(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "egress-host"

    def log_message(self, *a):
        pass

    def _log(self):
        log(ev="request", l=self.server.name, conn=self.conn_id, method=self.command, path=self.path,
            host=self.headers.get("Host"), auth=self.headers.get_all("Authorization"),
            api_key=self.headers.get_all("X-Api-Key"), headers=[k.lower() for k in self.headers.keys()])

    def setup(self):
        self.conn_id = self.server.conn_ids[id(self.request)]
        super().setup()

    def _send(self, code, body, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _git(self):
        # git's smart HTTP through its own CGI program, as a web server would run it.
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path[len("/git"):].partition("?")
        env = {"GIT_PROJECT_ROOT": CFG["git_root"], "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": unquote(path),
               "QUERY_STRING": query, "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get(
                   "Content-Type", ""), "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "192.0.2.1",
               "PATH": "/usr/bin:/bin"}
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        r = subprocess.run(["/usr/lib/git-core/git-http-backend"], input=body, env=env, capture_output=True)
        head, _, out = r.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(": ")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _serve(self):
        self._log()
        p = self.path.split("?")[0]
        if p.startswith("/git/"):
            return self._git()
        if p.startswith("/bytes/"):
            n = int(p.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"\0" * (1 << 20)
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        if p.startswith("/simple"):
            names = sorted(f.name for f in Path(CFG["files"]).iterdir())
            links = "".join(f'<a href="/files/{n}">{n}</a>\n' for n in names)
            return self._send(200, f"<html><body>\n{links}</body></html>\n".encode(), "text/html")
        if p.startswith("/files/"):
            f = Path(CFG["files"], Path(p).name)
            if f.is_file():
                return self._send(200, f.read_bytes(), "application/octet-stream")
            return self._send(404, b"no such file\n")
        # /echo/MARKER and anything else: who answered, never a header's value.
        self._send(200, f"{self.server.name} ok {p}\n".encode())

    def do_GET(self):
        self._serve()

    do_HEAD = do_GET

    def do_POST(self):
        if self.path.startswith("/git/"):
            self._log()
            return self._git()
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._serve()


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, name, addr, handler, tls=None):
        self.name = name
        self.tls = tls
        self.conn_ids = {}
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = family
        super().__init__(addr, handler)

    def get_request(self):
        sock, peer = self.socket.accept()
        conn = next(COUNTER)
        self.conn_ids[id(sock)] = conn
        log(ev="accept", l=self.name, conn=conn)
        return sock, peer

    def finish_request(self, request, client_address):
        # The handshake on the connection's own thread: one that never completes holds only it.
        if self.tls:
            conn = self.conn_ids.pop(id(request))
            request.settimeout(10)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as e:
                log(ev="tls-failed", l=self.name, conn=conn, why=str(e)[:200])
                return
            self.conn_ids[id(request)] = conn
        try:
            super().finish_request(request, client_address)
        finally:
            self.conn_ids.pop(id(request), None)


# --- record -------------------------------------------------------------------------------------

def record(name, addr):
    family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
    s = socket.socket(family)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    s.listen(64)

    def one(c, conn):
        got = b""
        c.settimeout(10)
        try:
            while len(got) < 65536:
                d = c.recv(65536)
                if not d:
                    break
                got += d
        except OSError:
            pass
        log(ev="close", l=name, conn=conn, bytes=len(got), first=got[:64].hex())
        c.close()

    def loop():
        while True:
            c, _ = s.accept()
            conn = next(COUNTER)
            log(ev="accept", l=name, conn=conn)
            threading.Thread(target=one, args=(c, conn), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


# --- dns ----------------------------------------------------------------------------------------

def dns(addr, table):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(addr)
    turns = {}

    def answer(q):
        tid, flags, qd = struct.unpack("!HHH", q[:6])
        i, labels = 12, []
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
            i += 1 + q[i]
        qtype, qclass = struct.unpack("!HH", q[i + 1:i + 5])
        question = q[12:i + 5]
        name = ".".join(labels).lower()
        log(ev="query", name=name, type=qtype)
        entry = table.get(name)
        if isinstance(entry, list):
            # In turn for each question (A and AAAA counted apart: a lookup asks both).
            n = turns.get((name, qtype), 0)
            turns[(name, qtype)] = n + 1
            entry = entry[n % len(entry)]
        rrs = b""
        count = 0
        if entry:
            fam = socket.AF_INET6 if ":" in entry else socket.AF_INET
            if (qtype == 1 and fam == socket.AF_INET) or (qtype == 28 and fam == socket.AF_INET6):
                data = socket.inet_pton(fam, entry)
                rrs = struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(data)) + data
                count = 1
        rcode = 0 if entry else 3
        head = struct.pack("!HHHHHH", tid, 0x8180 | rcode, 1, count, 0, 0)
        return head + question + rrs

    def loop():
        while True:
            q, peer = s.recvfrom(512)
            try:
                s.sendto(answer(q), peer)
            except (IndexError, struct.error):
                pass
    threading.Thread(target=loop, daemon=True).start()


def main():
    for w in CFG.get("web", []):
        tls = None
        if w.get("cert"):
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(w["cert"], w["key"])
        srv = Server(w["name"], (w["addr"], w["port"]), Web, tls)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    for r in CFG.get("record", []):
        record(r["name"], (r["addr"], r["port"]))
    if CFG.get("dns"):
        dns((CFG["dns"]["addr"], 53), CFG["dns"]["table"])
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
