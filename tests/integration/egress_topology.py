"""The egress tests' topology (tests/integration/test_egress_proxy.py), made from
nothing on the machine but two network namespaces joined by a veth pair, on documentation
ranges:

  sidecar ns  lo (+ 127.0.0.1:80 and [::1]:80 recorders), vsc 192.0.2.1/24 and 2001:db8::1/64
              (+ a 192.0.2.1:80 recorder: the sidecar's own address), routes to the far side's
              special addresses; boxkited runs here, in a mount namespace of its own that shows
              the test's /etc/hosts, /etc/resolv.conf and trust store (the system's roots and the
              test CA);
  far ns      vfar 192.0.2.10-.14 and .53, 2001:db8::10/64, and on lo 169.254.169.254 (a
              metadata stand-in), 10.9.9.9 (private, opened by the ceiling), 10.8.8.8 (private,
              not): the web servers, the recorders that a refused attempt must never reach, and a
              DNS server for names not in the hosts file (rebind.example answers in turn a public
              and the loopback address).

Nothing touches the machine's own interfaces or routes, and nothing dials outside the two
namespaces.
"""
import json
import os
import secrets
import subprocess
import zipfile
from pathlib import Path

import bkit

HOSTS = """\
127.0.0.1 localhost
::1 localhost
192.0.2.10 pkg.example git.example
192.0.2.11 other.example evilgranted.example granted.example.other.example granted.example
192.0.2.12 api.example
192.0.2.14 a.granted.example
192.0.2.13 hold.example
127.0.0.1 loop.example
::1 loop6.example
169.254.169.254 meta.example
10.8.8.8 priv.example
10.9.9.9 opened.example
192.0.2.1 self.example
0.0.0.0 zero.example
224.0.0.1 mc.example
2001:db8::10 v6.example
"""

# The operator's ceiling for the tests' daemon.
CEILING = ["pkg.example:80", "pkg.example:443", "git.example:80", "git.example:443", "*.granted.example:80",
           "api.example:443", "*:80", "10.9.9.0/24:80", "[2001:db8::10]:80", "rebind.example:8000"]

# Listeners a refused attempt must never reach: (netns side, name, address, port).
FORBIDDEN = [
    ("far", "other80", "192.0.2.11", 80),
    ("far", "other443", "192.0.2.11", 443),
    ("far", "pkg8080", "192.0.2.10", 8080),
    ("far", "meta", "169.254.169.254", 80),
    ("far", "priv", "10.8.8.8", 80),
    ("far", "api80", "192.0.2.12", 80),
    ("sidecar", "loop", "127.0.0.1", 80),
    ("sidecar", "loop6", "::1", 80),
    ("sidecar", "self", "192.0.2.1", 80),
    ("sidecar", "loop8000", "127.0.0.1", 8000),
]

# Recorders a granted command may reach (to watch a tunnel end): (name, address, port).
GRANTED_RECORDERS = [("hold", "192.0.2.13", 80)]

# Web servers a granted command may reach: (name, address, port, TLS names or None).
WEB = [
    ("pkg", "192.0.2.10", 80, None),
    ("pkgs", "192.0.2.10", 443, ["pkg.example", "git.example"]),
    ("api", "192.0.2.12", 443, ["api.example"]),
    ("granted", "192.0.2.14", 80, None),
    ("opened", "10.9.9.9", 80, None),
    ("v6", "2001:db8::10", 80, None),
    ("rebind", "192.0.2.10", 8000, None),
]


def openssl(*args, cwd):
    bkit.run(["openssl", *args], check=True, cwd=cwd)


def make_ca(d):
    """A test CA and a certificate per TLS web server, written to d."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=boxkite egress test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, _, _, names in WEB:
        if not names:
            continue
        san = ",".join(f"DNS:{n}" for n in names)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={names[0]}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        Path(d, f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


def make_wheel(d):
    """A pure-Python wheel for the index: egressdemo 1.0."""
    files = {
        "egressdemo/__init__.py": "VALUE = 'egress'\n",
        "egressdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: egressdemo\nVersion: 1.0\n",
        "egressdemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: boxkite-tests\nRoot-Is-Purelib: true\n"
                                          "Tag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + "egressdemo-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(Path(d, "egressdemo-1.0-py3-none-any.whl"), "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr("egressdemo-1.0.dist-info/RECORD", record)


def make_repo(root):
    """A bare git repository served by git-http-backend: demo.git, one commit."""
    work = Path(root, "work")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example", HOME=str(root))
    bkit.run(["git", "init", "-q", "-b", "main", work], check=True, env=env)
    Path(work, "README").write_text("served through the egress proxy\n")
    bkit.run(["git", "-C", work, "add", "README"], check=True, env=env)
    bkit.run(["git", "-C", work, "commit", "-q", "-m", "one"], check=True, env=env)
    bkit.run(["git", "clone", "-q", "--bare", work, Path(root, "demo.git")], check=True, env=env)
    bkit.run(["git", "-C", Path(root, "demo.git"), "config", "http.receivepack", "false"], check=True, env=env)


class Recorded:
    """One egress_host.py instance's log: its events, and barriers that prove that everything a
    listener accepted before now is in it."""

    def __init__(self, log, netns, forbidden):
        self.log = Path(log)
        self.netns = netns
        self.forbidden = forbidden  # [(name, addr, port)]

    def events(self):
        try:
            text = self.log.read_text()
        except FileNotFoundError:
            return []
        # A line is whole once its newline is there: a long one is written in pieces, and the
        # recorder may be midway through the last (the piece after the last newline is left).
        return [json.loads(line) for line in text.split("\n")[:-1] if line]

    def barrier(self):
        """A connection to each forbidden listener carrying a marker, waited for: a listener
        accepts in order, so whatever it accepted before is logged by then. Returns the
        connection ids of the barriers."""
        marker = f"barrier-{secrets.token_hex(4)}"
        script = ("import socket,sys\n"
                  "for a,p in zip(sys.argv[2::2],sys.argv[3::2]):\n"
                  "    s=socket.create_connection((a,int(p)),3); s.sendall(sys.argv[1].encode()); s.close()\n")
        argv = [bkit.PYTHON, "-c", script, marker]
        for _, addr, port in self.forbidden:
            argv += [addr, str(port)]
        bkit.run(argv, netns=self.netns, check=True)
        want = len(self.forbidden)

        def done():
            closes = [e for e in self.events() if e["ev"] == "close" and bytes.fromhex(e["first"]) == marker.encode()]
            return closes if len(closes) == want else None
        return {e["conn"] for e in bkit.wait_for(done, 10, what="the recorders' barrier")}


class Topology:
    def __init__(self, tag="egress", daemon_args=(), credential=None):
        bkit.require_tools("ip", "unshare", "openssl", "git")
        self.dir = bkit.temp_dir(tag)
        os.chmod(self.dir, 0o755)
        self.sc = f"bkit{os.getpid()}{tag[:3]}s"
        self.far = f"bkit{os.getpid()}{tag[:3]}f"
        bkit.netns_add(self.sc)
        bkit.netns_add(self.far)
        ip = lambda ns, *a: bkit.run(["ip", "-n", ns, *a], check=True)
        ip(self.sc, "link", "add", "vsc", "type", "veth", "peer", "name", "vfar", "netns", self.far)
        ip(self.sc, "addr", "add", "192.0.2.1/24", "dev", "vsc")
        ip(self.sc, "addr", "add", "2001:db8::1/64", "dev", "vsc", "nodad")
        ip(self.sc, "link", "set", "vsc", "up")
        for a in ("10", "11", "12", "13", "14", "53"):
            ip(self.far, "addr", "add", f"192.0.2.{a}/24", "dev", "vfar")
        ip(self.far, "addr", "add", "2001:db8::10/64", "dev", "vfar", "nodad")
        ip(self.far, "link", "set", "vfar", "up")
        for special in ("169.254.169.254", "10.9.9.9", "10.8.8.8"):
            ip(self.far, "addr", "add", f"{special}/32", "dev", "lo")
            ip(self.sc, "route", "add", f"{special}/32", "via", "192.0.2.10")
        # What the far side serves and what the daemon's namespace shows.
        d = self.dir
        make_ca(d)
        files = d / "files"
        files.mkdir()
        make_wheel(files)
        git_root = d / "git"
        git_root.mkdir()
        make_repo(git_root)
        for p in (d, files, git_root):
            os.chmod(p, 0o755)
        self.ca = d / "ca.crt"
        (d / "hosts").write_text(HOSTS)
        (d / "resolv.conf").write_text("nameserver 192.0.2.53\noptions timeout:1 attempts:2\n")
        (d / "trust.pem").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text() + self.ca.read_text())
        for f in ("hosts", "resolv.conf", "trust.pem", "ca.crt"):
            os.chmod(d / f, 0o644)
        far_cfg = {
            "log": str(d / "far.log"), "files": str(files), "git_root": str(git_root),
            "web": [{"name": n, "addr": a, "port": p, "cert": str(d / f"{n}.crt") if names else None,
                     "key": str(d / f"{n}.key") if names else None} for n, a, p, names in WEB],
            "record": [{"name": n, "addr": a, "port": p} for side, n, a, p in FORBIDDEN if side == "far"] +
                      [{"name": n, "addr": a, "port": p} for n, a, p in GRANTED_RECORDERS],
            "dns": {"addr": "192.0.2.53",
                    "table": {"rebind.example": ["192.0.2.10", "127.0.0.1"], "dns-only.example": "192.0.2.10"}},
        }
        sc_cfg = {"log": str(d / "sidecar.log"),
                  "record": [{"name": n, "addr": a, "port": p} for side, n, a, p in FORBIDDEN if side == "sidecar"]}
        for name, cfg, ns in (("far", far_cfg, self.far), ("sidecar", sc_cfg, self.sc)):
            (d / f"{name}.json").write_text(json.dumps(cfg))
            p = bkit.popen([bkit.PYTHON, "-u", bkit.HERE / "egress_host.py", d / f"{name}.json"], netns=ns,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = p.stdout.readline().strip()
            if line != "ready":
                raise AssertionError(f"egress_host.py ({name}) did not start: {line} {p.stderr.read()[:2000]}")
        self.far_log = Recorded(d / "far.log", self.far, [(n, a, p) for s, n, a, p in FORBIDDEN if s == "far"])
        self.sc_log = Recorded(d / "sidecar.log", self.sc, [(n, a, p) for s, n, a, p in FORBIDDEN if s == "sidecar"])
        # The credential the operator brokers, mode 0600.
        self.secret = f"s3cr3t-{secrets.token_hex(12)}"
        self.cred = d / "api.cred"
        self.cred.write_text(f"# the API's token\nAuthorization: Bearer {self.secret}\n")
        os.chmod(self.cred, 0o600)
        # boxkited in the sidecar namespace, in a mount namespace of its own showing the test's
        # files where the resolver and OpenSSL look.
        binds = " && ".join(f"mount --bind {d / src} {dst}" for src, dst in (
            ("hosts", "/etc/hosts"), ("resolv.conf", "/etc/resolv.conf"),
            ("trust.pem", "/etc/ssl/certs/ca-certificates.crt")))
        args = [*(f"--egress-allow={c}" for c in CEILING),
                f"--egress-credential=api.example:443={self.cred}" if credential is None else credential,
                "--egress-connect-timeout", "3", "--egress-idle", "4", "--egress-connections", "4",
                "--egress-header-max", "8K", *daemon_args]
        self.daemon = bkit.Daemon(tag, args=[a for a in args if a], netns=self.sc,
                                  prefix=["unshare", "--fork", "--kill-child", "--mount", "--propagation", "private",
                                          "--", "/bin/sh", "-c", binds + ' && exec "$@"', "sh"])

    def start(self):
        self.daemon.start()
        shutil_copy(bkit.HERE / "egress_client.py", self.daemon.workspace / "egress_client.py")
        return self

    def egress_pid(self):
        ex = self.daemon.executor_pid()
        kids = [p for p in bkit.proc_children(ex) if bkit.proc_comm(p) == "boxkite-egress"]
        if len(kids) != 1:
            raise AssertionError(f"expected one boxkite-egress child of the executor, found {kids}")
        return kids[0]

    def log_offset(self):
        return self.daemon.log.stat().st_size

    def audit(self, since, n=1, timeout=10):
        """The daemon's egress audit lines written after `since` (a log offset): waits for n."""
        def lines():
            with open(self.daemon.log, "rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
            out = []
            for line in text.splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if "egress" in e:
                    out.append(e)
            return out if len(out) >= n else None
        return bkit.wait_for(lines, timeout, what=f"{n} egress audit line(s)")


def shutil_copy(src, dst):
    Path(dst).write_bytes(Path(src).read_bytes())
    os.chmod(dst, 0o644)
