"""A reverse proxy in front of s3rver that checks what s3rver 3.7.1 does not: each request's AWS
Signature Version 4 (the canonical request rebuilt from what arrived, the signing key derived
from the one secret it knows) and that the body is the one x-amz-content-sha256 names. A request
that fails either is answered as S3 answers it (403 SignatureDoesNotMatch, 400
XAmzContentSHA256Mismatch) and never reaches s3rver.

It can also answer the first try of some requests 503 SlowDown, for the client's retries.

Runs in the test's process, on a thread: Proxy(upstream_port, key, secret).start() -> port."""

import hashlib
import hmac
import http.client
import http.server
import re
import threading

AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def expected_signature(secret, method, raw_path, headers, signed, payload_hash, date, region):
    path, _, query = raw_path.partition("?")
    pairs = sorted((p.partition("=")[0], p.partition("=")[2]) for p in query.split("&") if p)
    canonical_query = "&".join("%s=%s" % kv for kv in pairs)
    canonical_headers = "".join("%s:%s\n" % (h, " ".join(headers.get(h, "").split())) for h in signed.split(";"))
    canonical = "\n".join([method, path, canonical_query, canonical_headers, signed, payload_hash])
    scope = "%s/%s/s3/aws4_request" % (date, region)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    k = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _hmac(k, part)
    return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()


class Proxy:
    def __init__(self, upstream_port, key, secret):
        self.upstream_port, self.key, self.secret = upstream_port, key, secret
        self.lock = threading.Lock()
        self.verified = 0
        self.refused = []           # (method, path, why)
        self.fail_first = set()     # substrings of paths whose first try answers 503
        self.failed_once = set()
        self.server = None

    def start(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, body=b"", headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status, code, why):
                with proxy.lock:
                    proxy.refused.append((self.command, self.path, why))
                self._answer(status, ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
                                      "<Message>%s</Message></Error>" % (code, why)).encode(),
                             [("Content-Type", "application/xml")])

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                m = AUTH_RE.match(headers.get("authorization", ""))
                if not m:
                    return self._error(403, "AccessDenied", "no SigV4 Authorization header")
                key, date, region, signed, signature = m.groups()
                payload = headers.get("x-amz-content-sha256", "")
                if "x-amz-content-sha256" not in signed.split(";") or "host" not in signed.split(";"):
                    return self._error(403, "AccessDenied", "host and x-amz-content-sha256 must be signed")
                if payload != hashlib.sha256(body).hexdigest():
                    return self._error(400, "XAmzContentSHA256Mismatch", "the body is not what was signed")
                if key != proxy.key or not hmac.compare_digest(
                        signature, expected_signature(proxy.secret, self.command, self.path, headers, signed,
                                                      payload, date, region)):
                    return self._error(403, "SignatureDoesNotMatch", "the signature does not verify")
                with proxy.lock:
                    proxy.verified += 1
                    flaky = [s for s in proxy.fail_first if s in self.path]
                    first = flaky and self.path not in proxy.failed_once
                    if first:
                        proxy.failed_once.add(self.path)
                if first:
                    return self._answer(503, b"<Error><Code>SlowDown</Code></Error>",
                                        [("Content-Type", "application/xml")])
                up = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    fwd = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "expect")}
                    up.request(self.command, self.path, body=body if self.command == "PUT" else None, headers=fwd)
                    r = up.getresponse()
                    data = r.read()
                    hdrs = [(k, v) for k, v in r.getheaders()
                            if k.lower() not in ("content-length", "connection", "transfer-encoding", "keep-alive")]
                    if self.command == "HEAD":
                        self.send_response(r.status)
                        for k, v in hdrs:
                            self.send_header(k, v)
                        self.send_header("Content-Length", r.getheader("Content-Length") or "0")
                        self.end_headers()
                    else:
                        self._answer(r.status, data, hdrs)
                finally:
                    up.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
