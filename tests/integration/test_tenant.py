"""Reset as the tenant boundary (issue 17; DESIGN.md section 6a): after a Reset that installs
the next tenant's key, the next tenant observes nothing of the last one.

A first tenant (the daemon's key file) leaves what it can wherever it can reach; a Reset with a new
key; a second tenant, holding only the new key, then looks for each trace through every rpc and
from inside its sandbox. The same again with boxkited restarted between the two tenants, and on
the pod emulation (bkit.Pod). Calls go through the boxkite package's wire layer, as a client other
than libboxkite would send them, over ipc:// unless a test is about tcp://.
"""
import json
import os
import secrets
import socket
import threading
import time
import unittest

import bkit
import boxkite
from boxkite import Status, wire
from boxkite.v1 import boxkite_pb2 as pb

GUARD = 60  # hang guard for any one wait, never a timing assertion
# The writable places of a sandbox (those a sandbox has: the pod emulation has no home nor /dev/shm).
ROOTS = ("/workspace", "/tmp", "/home/sandbox", "/dev/shm")


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def key_of(d):
    return wire.load_key_file(d.key)


def new_key(name="tenant-2"):
    return wire.Key(name, secrets.token_bytes(32))


def client(d, key, tcp=False, timeout=GUARD):
    """A client of d holding key, over its ipc:// socket (or tcp://)."""
    return wire.Channel(d.tcp_url if tcp else d.url, key=key, timeout=timeout)


def reset(d, key, next_key=None, tcp=False, refused=False):
    """Reset signed with key, installing next_key; the Reply, opened with the key that MACs it:
    the new one, or (refused) the signer's."""
    rq = pb.ResetRequest()
    if next_key:
        rq.new_key_id, rq.new_key_secret = next_key.key_id, next_key.secret
    opener = key if refused or not next_key else next_key
    with client(d, key, tcp=tcp, timeout=GUARD * 2) as signer, client(d, opener, tcp=tcp) as reader:
        env = signer.seal("Reset", rq)
        return reader.open_answer(signer.exchange(env.SerializeToString()), env, pb.ResetResponse)


def shell(d, key, script):
    with client(d, key) as c:
        return c.call("Exec", pb.ExecRequest(shell=script, timeout_ms=30000), pb.ExecResponse).message


def run(d, key, argv):
    with client(d, key) as c:
        return c.call("Exec", pb.ExecRequest(argv=[str(a) for a in argv], timeout_ms=30000), pb.ExecResponse).message


def audit_lines(d, method):
    """The audit lines (one JSON object per call) of method in d's log."""
    out = []
    for line in d.log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("method") == method:
                out.append(obj)
    return out


class KeyInstallation(unittest.TestCase):
    """Items 5 and 6: which key a Reset's audit line names, and where a new key may come from."""

    def setUp(self):
        self.scope = bkit.scope()
        self.scope.__enter__()
        self.addCleanup(self.scope.__exit__, None, None, None)
        self.d = bkit.Daemon("tenant-key", tcp=("127.0.0.1", bkit.free_tcp_port())).start()
        self.k1 = key_of(self.d)

    def test_a_new_key_over_plain_tcp_is_refused_whoever_sends_it(self):
        shell(self.d, self.k1, "echo kept > /workspace/kept")
        k2 = new_key()
        # Not libboxkite (which refuses to send it): a client that does send the key in clear.
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            reset(self.d, self.k1, k2, tcp=True, refused=True)
        e = cm.exception
        self.assertEqual(e.code, Status.FAILED_PRECONDITION, e)
        self.assertTrue(e.verified, "refused under the key that signed it")
        self.assertIn("tcp://", e.message)
        # Refused before anything happened: the files are there, the old key is the key.
        self.assertEqual(os.listdir(self.d.workspace), ["kept"])
        self.assertEqual(shell(self.d, self.k1, "echo still").stdout, b"still\n")
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            shell(self.d, k2, "true")
        self.assertEqual(cm.exception.code, Status.UNAUTHENTICATED, cm.exception)
        self.assertFalse(os.path.exists(self.d.dir / "state" / "tenant-key") and
                         (self.d.dir / "state" / "tenant-key").stat().st_size)
        # Over ipc:// the same request is taken.
        r = reset(self.d, self.k1, k2)
        self.assertEqual(r.envelope.key_id, "tenant-2")
        self.assertEqual(os.listdir(self.d.workspace), [])

    def test_a_new_key_over_tls_is_taken(self):
        cert, tls_key = bkit.tls_files(bkit.temp_dir("tls"), "bk-tenant")
        api = f"tls+tcp://127.0.0.1:{bkit.free_tcp_port()}"
        d = bkit.Daemon("tenant-tls", args=["--listen", api, "--tls-cert", cert, "--tls-key", tls_key]).start()
        key_file = bkit.temp_dir("k2") / "key"
        bkit.run([bkit.BKCTL, "keygen", "--id", "tls-tenant", key_file], check=True)
        r = d.bkctl("--url", api, "--tls-cert", cert, "-o", "json", "reset", "--new-key", key_file)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(audit_lines(d, "Reset")[-1].get("key_installed"), "tls-tenant")

    def test_the_audit_line_names_the_signer_and_the_key_installed(self):
        k2 = new_key()
        reset(self.d, self.k1, k2)
        line = audit_lines(self.d, "Reset")[-1]
        self.assertEqual((line["key"], line.get("key_installed"), line["status"]), ("k1", "tenant-2", "OK"), line)
        # The next tenant's calls are its own; a Reset without a key installs none.
        reset(self.d, k2)
        line = audit_lines(self.d, "Reset")[-1]
        self.assertEqual((line["key"], line.get("key_installed")), ("tenant-2", None), line)


# --- what a tenant leaves, and how the next one looks ----------------------------------------

# Inside the sandbox: each root's mode, owner and extended attributes as the sandbox user lists
# them, and the modes of a file and a directory made there (a default ACL would decide those).
ROOTS_PROBE = r"""
import json, os, stat, sys
out = {}
for root in sys.argv[1:]:
    if not os.path.isdir(root):
        out[root] = "absent"
        continue
    st = os.stat(root)
    xattrs = {n: os.getxattr(root, n).hex() for n in sorted(os.listxattr(root))}
    f = os.path.join(root, ".probe-file")
    os.close(os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    new_file = oct(stat.S_IMODE(os.stat(f).st_mode))
    os.unlink(f)
    d = os.path.join(root, ".probe-dir")
    os.mkdir(d, 0o777)
    new_dir = oct(stat.S_IMODE(os.stat(d).st_mode))
    os.rmdir(d)
    out[root] = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "xattrs": xattrs,
                 "new_file": new_file, "new_dir": new_dir}
print(json.dumps(out, sort_keys=True))
"""

# What a tenant can leave on the roots themselves: a user.* attribute, ACLs (a default one decides
# the modes of what the next tenant makes), another mode. One line per attempt.
ROOTS_LITTER = r"""
import os, struct, sys
# POSIX ACL xattr: version 2, then (tag, perm, id): user::rwx user:root:rwx group::r-x mask::rwx other::---
ACL = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in
    ((1, 7, 0xffffffff), (2, 7, 0), (4, 5, 0xffffffff), (0x10, 7, 0xffffffff), (0x20, 0, 0xffffffff)))
for root in sys.argv[1:]:
    if not os.path.isdir(root):
        continue
    for name, value in (("user.last-tenant", b"a secret of the last tenant"),
                        ("system.posix_acl_default", ACL), ("system.posix_acl_access", ACL)):
        try:
            os.setxattr(root, name, value)
            print(root, name, "set")
        except OSError as e:
            print(root, name, "refused", e.errno)
    try:
        os.chmod(root, 0o700)
        print(root, "mode set")
    except OSError as e:
        print(root, "mode refused", e.errno)
"""

# An exposed-port server that answers one request per connection and, before it says it is
# listening, connects to itself a few times: connections the server closes first, left in
# TIME_WAIT in its network namespace (what a tenant's dev server leaves behind).
CONNECTIONS = r"""
import socket, sys, threading, time
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
def serve():
    while True:
        c, _ = srv.accept()
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        c.close()
threading.Thread(target=serve, daemon=True).start()
for _ in range(5):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    while s.recv(4096):
        pass
    s.close()
print("listening", flush=True)
time.sleep(600)
"""

# What an exposed-port process of the next tenant reads of its network namespace.
NET_PROBE = r"""
for f in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6", "/proc/net/unix"):
    with open(f) as fh:
        for line in fh.read().splitlines()[1:]:
            print(f, line.strip())
print("done", flush=True)
"""

# A WebSocket-like server: 101 to every upgrade, then each connection echoed, upper-cased.
TUNNELS = r"""
import socket, sys, threading
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(256)
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        b = c.recv(4096)
        if not b:
            return
        head += b
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
    while True:
        b = c.recv(4096)
        if not b:
            return
        c.sendall(b.upper())
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# A keep-alive HTTP/1.1 server that prints each request's path as it serves it.
KEEPALIVE = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        print("served", self.path, flush=True)
        body = b"path " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("listening", flush=True)
s.serve_forever()
"""


def python(script, *args):
    return ["python3", "-c", script] + [str(a) for a in args]


def start(d, key, argv, expose_port=0):
    with client(d, key) as c:
        return c.call("ProcessStart", pb.ProcessStartRequest(argv=argv, expose_port=expose_port),
                      pb.ProcessStartResponse).message.process_id


def read_until(d, key, pid, needle, ended=False):
    """The process's stdout once it holds needle (and, with ended, once the process ended)."""
    got, deadline = b"", time.monotonic() + GUARD
    with client(d, key) as c:
        while time.monotonic() < deadline:
            r = c.call("ProcessRead", pb.ProcessReadRequest(process_id=pid, stdout_offset=len(got), wait_ms=2000),
                       pb.ProcessReadResponse)
            got += r.data[:r.message.stdout.length]
            if needle in got and (not ended or not r.message.status.running):
                return got
    raise AssertionError(f"{pid} did not print {needle!r} in {GUARD} s: {got!r}")


def request(port, head, timeout=GUARD):
    """Send head on a new connection to the preview listener; (the socket, its first answer bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(head)
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    return s, answer


def closed_by_peer(s, timeout=GUARD):
    """Whether the peer ends the connection (EOF or reset) within timeout; bytes it sends meanwhile
    are read and dropped."""
    s.settimeout(timeout)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


class Boundary:
    """The tests, on any sidecar: a subclass starts one (start_sidecar) and says what happens
    between the two tenants (between). The first tenant holds the sidecar's key file (k1); a
    Reset signed with it installs k2, the second tenant's."""

    def setUp(self):
        self.scope = bkit.scope()
        self.scope.__enter__()
        self.addCleanup(self.scope.__exit__, None, None, None)
        self.store = bkit.temp_dir("store")
        self.store_url = f"file://{self.store}"
        self.preview = bkit.free_tcp_port()
        self.d = self.start_sidecar(["--sync-store", self.store_url, "--sync-on-reset", self.store_url + "/final",
                                     "--preview-listen", f"http://127.0.0.1:{self.preview}",
                                     "--preview-ttl-max", "3600"])
        self.k1, self.k2 = key_of(self.d), new_key()

    def between(self):
        pass

    def next_tenant(self):
        """The Reset that hands the sandbox to the second tenant, then what comes between them."""
        r = reset(self.d, self.k1, self.k2)
        self.assertEqual(r.envelope.key_id, self.k2.key_id)
        self.between()
        return r

    def restart(self, key):
        """Stop the sidecar and start it again; from then on its clients (bkctl too) hold key."""
        key_file = self.d.dir / f"key-{key.key_id}"
        key_file.write_text(f"{key.key_id} {key.secret.hex()}\n")
        os.chmod(key_file, 0o600)
        self.d.key = key_file
        self.d.stop()
        self.d._front = None
        self.d.start()

    def preview_url(self, key, port, path="", ttl=600):
        return f"/preview/{port}/{wire.preview_token(key, port, int(time.time()) + ttl)}/{path}"

    # --- item 1: the store -----------------------------------------------------------------

    def test_the_last_tenants_snapshots_cannot_be_named(self):
        d, k1, k2 = self.d, self.k1, self.k2
        # What an operator computes to find a tenant's snapshots: bkctl and a second language agree.
        r = d.bkctl("sync", "prefix")
        self.assertEqual((r.returncode, r.stdout), (0, wire.store_prefix(k1) + "\n"), r.stderr)
        self.assertEqual(shell(d, k1, "echo the last tenant > /workspace/secret.txt").exit_code, 0)
        with client(d, k1) as c:
            c.call("SyncPush", pb.SyncPushRequest(snapshot="t1-secret"), pb.SyncPushResponse)
            c.call("SyncPush", pb.SyncPushRequest(snapshot="t1-sub", url=self.store_url + "/sub"), pb.SyncPushResponse)
        final = self.next_tenant().message.snapshot
        self.assertTrue(final, "--sync-on-reset pushed a last snapshot")
        p1, p2 = wire.store_prefix(k1), wire.store_prefix(k2)
        with client(d, k2) as c:
            st = c.call("SyncStatus", pb.SyncStatusRequest(), pb.SyncStatusResponse).message
            self.assertEqual((st.running, st.operation, st.snapshot, st.files_done, st.bytes_done, st.blobs_uploaded,
                              st.started_ms, st.status, st.message), (False, "", "", 0, 0, 0, 0, 0, ""), st)
            for url in ("", self.store_url, self.store_url + "/sub", self.store_url + "/final",
                        f"{self.store_url}/{p1}", f"{self.store_url}/{p1}/final", f"{self.store_url}/{p1}/sub"):
                with self.subTest(url=url):
                    listed = c.call("SyncList", pb.SyncListRequest(url=url), pb.SyncListResponse).message
                    self.assertEqual(list(listed.snapshots), [])
                    for snap in ("t1-secret", "t1-sub", final):
                        with self.assertRaises(boxkite.BoxkiteError) as cm:
                            c.call("SyncPull", pb.SyncPullRequest(snapshot=snap, url=url), pb.SyncPullResponse)
                        self.assertEqual(cm.exception.code, Status.NOT_FOUND, cm.exception)
            # Where they are: under the first tenant's prefix, the final one too.
            for rel in (f"{p1}/snapshots/t1-secret", f"{p1}/sub/snapshots/t1-sub", f"{p1}/final/snapshots/{final}"):
                self.assertTrue((self.store / rel).is_file(), rel)
            t1_manifest = (self.store / p1 / "snapshots" / "t1-secret").read_bytes()
            # Its own snapshot of the same name is its own: the first tenant's stays as it was.
            c.call("SyncPush", pb.SyncPushRequest(snapshot="t1-secret"), pb.SyncPushResponse)
        self.assertEqual((self.store / p1 / "snapshots" / "t1-secret").read_bytes(), t1_manifest)
        self.assertTrue((self.store / p2 / "snapshots" / "t1-secret").is_file())
        # The operator hands the first tenant its snapshots back by installing its key again.
        reset(d, k2, k1)
        with client(d, k1) as c:
            names = [s.name for s in c.call("SyncList", pb.SyncListRequest(), pb.SyncListResponse).message.snapshots]
            self.assertEqual(sorted(names), ["t1-secret"])
            c.call("SyncPull", pb.SyncPullRequest(snapshot=final, url=self.store_url + "/final"), pb.SyncPullResponse)
        self.assertEqual(shell(d, k1, "cat /workspace/secret.txt").stdout, b"the last tenant\n")

    # --- item 2: the roots ---------------------------------------------------------------

    def roots(self, key):
        r = run(self.d, key, python(ROOTS_PROBE, *ROOTS))
        self.assertEqual(r.exit_code, 0, r.stderr)
        return json.loads(r.stdout)

    def test_the_roots_are_as_new(self):
        fresh = self.roots(self.k1)
        r = run(self.d, self.k1, python(ROOTS_LITTER, *ROOTS))
        self.assertEqual(r.exit_code, 0, r.stderr)
        done = r.stdout.decode()
        # Controls: what the first tenant could leave, it did leave.
        for what in ("/workspace user.last-tenant set", "/workspace system.posix_acl_default set",
                     "/workspace mode set", "/tmp user.last-tenant"):
            self.assertIn(what, done)
        self.assertNotEqual(self.roots(self.k1), fresh)
        self.next_tenant()
        self.assertEqual(self.roots(self.k2), fresh, done)

    # --- item 3: the network namespace ---------------------------------------------------

    def test_the_network_namespace_is_new(self):
        port = bkit.free_tcp_port()
        pid = start(self.d, self.k1, python(CONNECTIONS, port), expose_port=port)
        read_until(self.d, self.k1, pid, b"listening")
        # And through the preview relay: the executor's connections into the namespace.
        for _ in range(3):
            s, answer = request(self.preview, f"GET {self.preview_url(self.k1, port)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            s.close()
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
        hexport = ":%04X" % port
        seen = read_until(self.d, self.k1, start(self.d, self.k1, python(NET_PROBE), expose_port=port + 1),
                          b"done", ended=True).decode()
        self.assertIn(hexport, seen, "control: the first tenant's connections are in its namespace")
        self.next_tenant()
        seen = read_until(self.d, self.k2, start(self.d, self.k2, python(NET_PROBE), expose_port=port + 1),
                          b"done", ended=True).decode()
        self.assertNotIn(hexport, seen, "the last tenant's sockets, seen by the next one")

    # --- item 4: what counts, and open connections ---------------------------------------

    def test_counters_start_over(self):
        d, k1, k2 = self.d, self.k1, self.k2
        for _ in range(5):
            start(d, k1, ["sleep", "600"])
        with client(d, k1) as c:
            names = [p.process_id for p in c.call("ProcessList", pb.ProcessListRequest(), pb.ProcessListResponse)
                     .message.processes]
        self.assertEqual(sorted(names), ["p1", "p2", "p3", "p4", "p5"])
        cgroups = shell(d, k1, "cat /proc/self/cgroup").stdout
        sent = time.monotonic()
        self.next_tenant()
        with client(d, k2) as c:
            health = c.call("Health", pb.HealthRequest(), pb.HealthResponse).message
            elapsed_ms = (time.monotonic() - sent) * 1000
            self.assertLessEqual(health.uptime_ms, elapsed_ms + 2, "uptime counts the last tenant's time")
            self.assertEqual((health.sandbox_ready, health.not_ready_reason), (True, ""))
            self.assertEqual(list(c.call("ProcessList", pb.ProcessListRequest(), pb.ProcessListResponse)
                                  .message.processes), [])
        self.assertEqual(start(d, k2, ["true"]), "p1")
        # An exec's cgroup names no counter of the last tenant's (its cgroup namespace shows /).
        self.assertEqual(shell(d, k2, "cat /proc/self/cgroup").stdout, cgroups)
        for line in cgroups.decode().splitlines():
            self.assertTrue(line.endswith(":/"), cgroups)

    def test_no_preview_connection_outlives_the_tenant(self):
        port = bkit.free_tcp_port()
        pid = start(self.d, self.k1, python(TUNNELS, port), expose_port=port)
        read_until(self.d, self.k1, pid, b"listening")
        url = self.preview_url(self.k1, port, "ws")
        upgrade = f"GET {url} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".encode()
        tunnels, refused = [], None
        self.addCleanup(lambda: [s.close() for s in tunnels])
        # The first tenant holds every preview slot there is: tunnels until one is refused.
        while refused is None and len(tunnels) < 512:
            s, answer = request(self.preview, upgrade)
            if answer.startswith(b"HTTP/1.1 101"):
                tunnels.append(s)
            else:
                refused = answer
                s.close()
        self.assertTrue(refused and refused.startswith(b"HTTP/1.1 503"), refused)
        tunnels[0].sendall(b"ping")
        self.assertEqual(tunnels[0].recv(4), b"PING")
        self.next_tenant()
        # Every one of them was ended by the reset...
        for s in tunnels:
            self.assertTrue(closed_by_peer(s), "a preview connection of the last tenant is still open")
        # ...and the next tenant's preview is served, not refused for want of a slot.
        port2 = bkit.free_tcp_port()
        pid = start(self.d, self.k2, python(KEEPALIVE, port2), expose_port=port2)
        read_until(self.d, self.k2, pid, b"listening")
        s, answer = request(self.preview, f"GET {self.preview_url(self.k2, port2, 'mine')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.close()
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
        # The last tenant's token names a key that is gone.
        s, answer = request(self.preview, f"GET {self.preview_url(self.k1, port2)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.close()
        self.assertTrue(answer.startswith(b"HTTP/1.1 403"), answer)


class Local(Boundary, unittest.TestCase):
    """Local mode: the next tenant right after the Reset."""

    def start_sidecar(self, args):
        return bkit.Daemon("tenant", args=args).start()


class LocalRestarted(Boundary, unittest.TestCase):
    """Local mode, boxkited restarted between the two tenants."""

    def start_sidecar(self, args):
        return bkit.Daemon("tenant-restart", args=args).start()

    def between(self):
        self.restart(self.k2)


class Pod(Boundary, unittest.TestCase):
    """The pod emulation (bkit.Pod): the sandbox container found by the sidecar, not made."""

    def start_sidecar(self, args):
        bkit.require_tools("unshare", "nsenter", "setpriv")
        self.pod = bkit.Pod(tag="tenant-pod", daemon_args=args)
        self.pod.daemon.start()
        self.pod.start_container()
        self.wait_ready(self.pod.daemon)
        return self.pod.daemon

    @staticmethod
    def wait_ready(d):
        bkit.wait_for(lambda: d.health().get("sandbox_ready") is True, GUARD, what="the sandbox container")


class PodRestarted(Pod):
    """The pod emulation, the sidecar restarted between the two tenants (the container lives on)."""

    def between(self):
        self.restart(self.k2)
        self.wait_ready(self.d)


class PreviewRequests(unittest.TestCase):
    """Item 4: a preview's token is checked for every request — a kept-alive connection carries
    one — and a connection ends when its token expires."""

    @classmethod
    def setUpClass(cls):
        cls.scope = bkit.scope()
        cls.scope.__enter__()
        cls.addClassCleanup(cls.scope.__exit__, None, None, None)
        cls.preview = bkit.free_tcp_port()
        cls.d = bkit.Daemon("tenant-preview", args=["--preview-listen", f"http://127.0.0.1:{cls.preview}"]).start()
        cls.key = key_of(cls.d)

    def url(self, port, path="", ttl=600):
        return f"/preview/{port}/{wire.preview_token(self.key, port, int(time.time()) + ttl)}/{path}"

    def test_a_kept_alive_connection_carries_one_request(self):
        port = bkit.free_tcp_port()
        pid = start(self.d, self.key, python(KEEPALIVE, port), expose_port=port)
        read_until(self.d, self.key, pid, b"listening")
        s, answer = request(self.preview, f"GET {self.url(port, 'one')} HTTP/1.1\r\nHost: x\r\n"
                                          "Connection: keep-alive\r\n\r\n".encode())
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
        # A second request on the same connection, and one sent along with the first on another:
        # neither reaches the sandbox without a check of its own.
        try:
            s.sendall(f"GET {self.url(port, 'two')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        except OSError:
            pass
        self.assertTrue(closed_by_peer(s))
        s.close()
        both = (f"GET {self.url(port, 'three')} HTTP/1.1\r\nHost: x\r\n\r\n"
                f"GET {self.url(port, 'four')} HTTP/1.1\r\nHost: x\r\n\r\n").encode()
        s, answer = request(self.preview, both)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
        self.assertTrue(closed_by_peer(s))
        s.close()
        served = read_until(self.d, self.key, pid, b"served /three").decode()
        self.assertEqual([line for line in served.splitlines() if line.startswith("served")],
                         ["served /one", "served /three"])

    def test_a_connection_ends_at_its_tokens_expiry(self):
        port = bkit.free_tcp_port()
        pid = start(self.d, self.key, python(TUNNELS, port), expose_port=port)
        read_until(self.d, self.key, pid, b"listening")
        s, answer = request(self.preview, f"GET {self.url(port, 'ws', ttl=2)} HTTP/1.1\r\nHost: x\r\n"
                                          "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n".encode())
        self.assertTrue(answer.startswith(b"HTTP/1.1 101"), answer)
        s.sendall(b"ping")
        self.assertEqual(s.recv(4), b"PING")
        # Nothing more is sent: the relay ends it when the token expires (1-2 s from now).
        self.assertTrue(closed_by_peer(s), "the tunnel outlived its token")
        s.close()


if __name__ == "__main__":
    unittest.main()
