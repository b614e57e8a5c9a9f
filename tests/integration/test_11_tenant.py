"""11. Reset as the tenant boundary (issue 17; DESIGN.md section 6a): after a Reset that installs
the next tenant's key, the next tenant observes nothing of the last one.

A first tenant (the daemon's key file) leaves what it can wherever it can reach; a Reset with a new
key; a second tenant, holding only the new key, then looks for each trace through every rpc and
from inside its sandbox. The same again with boxkited restarted between the two tenants, and on
the pod emulation (bkit.Pod). Calls go through the Python client (tests/python/boxkite_client.py),
as a client other than libboxkite would send them, over ipc:// unless a test is about tcp://.
"""
import json
import os
import secrets
import sys
import unittest

import bkit

sys.path.insert(0, str(bkit.REPO / "tests" / "python"))
import boxkite_client as bc  # noqa: E402
from boxkite_client import pb  # noqa: E402

FAILED_PRECONDITION = 9
GUARD = 60  # hang guard for any one wait, never a timing assertion


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def key_of(d):
    return bc.load_key_file(str(d.key))


def new_key(name="tenant-2"):
    return (name, secrets.token_bytes(32))


def client(d, key, tcp=False, timeout=GUARD):
    """A client of d holding key, over its ipc:// socket (or tcp://)."""
    where = d.tcp if tcp else (str(d.sock), None)
    return bc.Client(*where, *key, timeout=timeout)


def reset(d, key, next_key=None, tcp=False, refused=False):
    """Reset signed with key, installing next_key; the Reply, opened with the key that MACs it:
    the new one, or (refused) the signer's."""
    rq = pb.ResetRequest()
    if next_key:
        rq.new_key_id, rq.new_key_secret = next_key
    opener = key if refused or not next_key else next_key
    with client(d, key, tcp=tcp, timeout=GUARD * 2) as signer, client(d, opener, tcp=tcp) as reader:
        env = signer.seal("Reset", rq)
        return reader.open_answer(signer.exchange(env.SerializeToString()), env, pb.ResetResponse)


def shell(d, key, script):
    with client(d, key) as c:
        return c.call("Exec", pb.ExecRequest(shell=script, timeout_ms=30000), pb.ExecResponse).message


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
        with self.assertRaises(bc.CallError) as cm:
            reset(self.d, self.k1, k2, tcp=True, refused=True)
        e = cm.exception
        self.assertEqual(e.code, FAILED_PRECONDITION, e)
        self.assertTrue(e.verified, "refused under the key that signed it")
        self.assertIn("tcp://", e.message)
        # Refused before anything happened: the files are there, the old key is the key.
        self.assertEqual(os.listdir(self.d.workspace), ["kept"])
        self.assertEqual(shell(self.d, self.k1, "echo still").stdout, b"still\n")
        with self.assertRaises(bc.CallError) as cm:
            shell(self.d, k2, "true")
        self.assertEqual(cm.exception.code, bc.UNAUTHENTICATED, cm.exception)
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


if __name__ == "__main__":
    unittest.main()
