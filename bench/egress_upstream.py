"""The egress benchmark's upstream (bench/egress.sh): GET /bytes/N answers N bytes (at most the
MiB given on the command line) from memory, with a Content-Length, over HTTP/1.1 keep-alive.
Listens on a free port of 127.0.0.1 and prints it. Threaded: each connection its own thread."""
import http.server
import socketserver
import sys

BODY = memoryview(b"\x5a" * (int(sys.argv[1]) << 20))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) != 3 or parts[1] != "bytes" or not parts[2].isdigit() or int(parts[2]) > len(BODY):
            self.send_error(404)
            return
        n = int(parts[2])
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self.wfile.write(BODY[:n])

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


s = Server(("127.0.0.1", 0), Handler)
print(s.server_address[1], flush=True)
s.serve_forever()
