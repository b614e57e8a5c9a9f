"""A warm pool's claim key (boxkited --claim-key-file / --claim-key-env, docs/DEPLOY.md): with
it boxkited serves Health and a Reset that installs the tenant's key, nothing else; after that
Reset the claim key is refused for good -- after SIGHUP, after a restart -- and the tenant's key
serves everything. The claim key is as secret as any key: gone from boxkited's environment and
from every command's. On a local boxkited and on the pod emulation (bkit.Pod), as a warm pod of
deploy/agent-sandbox runs it.

The calls go through the boxkite package's wire layer, which speaks the wire contract from
docs/PROTOCOL.md, so that every rpc of the service can be tried with the claim key.
"""
import json
import os
import secrets
import signal
import unittest

import bkit
import boxkite
from boxkite import Detail, Status, wire
from boxkite.errors import detail_name, status_name
from boxkite.v1 import boxkite_pb2 as pb
GUARD = 60  # hang guard for a call, never a timing assertion
CLAIM_ENV = "BOXKITE_CLAIM_KEY"


def setUpModule():
    bkit.require_root()
    bkit.require_build()


def client(d, key, timeout=GUARD):
    """Over the daemon's ipc:// socket: a claim's new key is refused over plain tcp://."""
    return wire.Channel(d.url, key=key, timeout=timeout)


def tenant_key():
    return wire.Key("tenant", secrets.token_bytes(32))


def claim(d, claim_key, new_key):
    """Reset with the claim key, installing new_key (None: none); the answer is opened with
    new_key when there is one (it is MAC'd with it)."""
    rq = pb.ResetRequest()
    if new_key:
        rq.new_key_id, rq.new_key_secret = new_key.key_id, new_key.secret
    old = client(d, claim_key, timeout=GUARD * 2)
    env = old.seal("Reset", rq)
    try:
        answer = old.exchange(env.SerializeToString())
    finally:
        old.close()
    # A claim that succeeded is answered under the new key, a refused one under the claim key
    # (both may have the same id): each reader checks the MAC, the other's refuses it.
    for reader in ([client(d, new_key)] if new_key else []) + [client(d, claim_key)]:
        try:
            return reader.open_answer(answer, env, pb.ResetResponse), env
        except boxkite.BoxkiteError as e:
            if not (e.code == Status.DATA_LOSS and "MAC does not verify" in e.message):
                raise
            last = e
    raise last


def exec_shell(d, key, script):
    with client(d, key) as c:
        return c.call("Exec", pb.ExecRequest(shell=script, timeout_ms=30000), pb.ExecResponse).message


def use_tenant_key_for_the_harness(d, key):
    """From here the harness's Health (bkctl) holds the tenant's key; boxkited keeps being started
    with the claim key, which it must no longer serve."""
    argv = d.argv()
    d.argv = lambda: argv
    d.key = d.dir / "tenant-key"
    d.key.write_text("%s %s\n" % (key.key_id, key.secret.hex()))
    os.chmod(d.key, 0o600)


def restart(d):
    d.stop()
    d._front = None
    d.start()


class ClaimAssertions:
    def assertRefused(self, fn, code, detail, verified=None):
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            fn()
        e = cm.exception
        self.assertEqual((status_name(e.code), detail_name(e.detail)), (status_name(code), detail_name(detail)), e)
        if verified is not None:
            self.assertEqual(e.verified, verified, e)
        return e

    def assertClaimKeyRetired(self, d, claim_key):
        """The claim key opens nothing any more: not Exec, not Health with it, not a second claim."""
        self.assertRefused(lambda: exec_shell(d, claim_key, "true"), Status.UNAUTHENTICATED, Detail.UNKNOWN_KEY)
        with client(d, claim_key) as c:
            self.assertRefused(lambda: c.call("Health", pb.HealthRequest(), pb.HealthResponse), Status.UNAUTHENTICATED,
                               Detail.UNKNOWN_KEY)
        self.assertRefused(lambda: claim(d, claim_key, tenant_key()), Status.UNAUTHENTICATED, Detail.UNKNOWN_KEY)


class ClaimLocal(ClaimAssertions, unittest.TestCase):
    def setUp(self):
        self.scope = bkit.scope()
        self.scope.__enter__()
        self.addCleanup(self.scope.__exit__, None, None, None)
        self.d = bkit.Daemon("claim", tcp=("127.0.0.1", bkit.free_tcp_port()), claim=True).start()
        self.claim_key = wire.load_key_file(self.d.key)

    def test_the_claim_key_serves_health_and_nothing_else(self):
        d = self.d
        with client(d, self.claim_key) as c:
            r = c.call("Health", pb.HealthRequest(), pb.HealthResponse)
        self.assertTrue(r.verified)
        self.assertTrue(r.message.auth_configured)
        self.assertIn("a warm pool's claim key: Health and Reset only", d.log_text())
        service = pb.DESCRIPTOR.services_by_name["Sandbox"]
        tried = []
        for m in service.methods:
            if m.name in ("Health", "Reset"):
                continue
            request = m.input_type._concrete_class()
            response = m.output_type._concrete_class
            with self.subTest(m.name), client(d, self.claim_key) as c:
                e = self.assertRefused(lambda: c.call(m.name, request, response), Status.PERMISSION_DENIED,
                                       Detail.CLAIM_KEY, verified=True)
                self.assertIn("claim key serves Health and Reset only", e.message)
            tried.append(m.name)
        self.assertGreaterEqual(len(tried), 20, tried)
        # And nothing ran: the command that would have left a file did not.
        self.assertRefused(lambda: exec_shell(d, self.claim_key, "touch /workspace/ran"), Status.PERMISSION_DENIED,
                           Detail.CLAIM_KEY)
        self.assertEqual(os.listdir(d.workspace), [])
        # bkctl says what to do, and exits 4 (authentication) for it.
        r = d.bkctl("--url", f"tcp://{d.tcp[0]}:{d.tcp[1]}", "ls")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("claim the sandbox with bkctl reset --new-key", r.stderr)

    def test_a_claim_installs_a_key_of_the_tenants_own(self):
        d = self.d
        (d.workspace / "keep").write_text("left by the image\n")
        e = self.assertRefused(lambda: claim(d, self.claim_key, None), Status.PERMISSION_DENIED, Detail.CLAIM_KEY,
                               verified=True)
        self.assertIn("installs the tenant's key", e.message)
        for key_id in (self.claim_key.key_id, "tenant"):
            with self.subTest(key_id):
                e = self.assertRefused(lambda: claim(d, self.claim_key, wire.Key(key_id, self.claim_key.secret)),
                                       Status.INVALID_ARGUMENT, Detail.CLAIM_KEY, verified=True)
                self.assertIn("the new key is the pool's claim key", e.message)
        # Nothing happened: no wipe, the claim key still the only key.
        self.assertEqual(os.listdir(d.workspace), ["keep"])
        self.assertEqual(os.path.getsize(d.dir / "state" / "tenant-key"), 0)

    def write_claim_key(self, d):
        """A fresh claim key in the file boxkited was started with (as a Secret volume's update
        would put it there); the Key."""
        key = wire.Key("k1", secrets.token_bytes(32))
        path = d.dir / "key"
        path.write_text("k1 %s\n" % key.secret.hex())
        os.chmod(path, 0o600)
        return key

    def test_the_claim_retires_the_claim_key_for_good(self):
        d, key = self.d, tenant_key()
        # Control: before the claim, the claim key file is read again when it changes.
        claim_key = self.write_claim_key(d)
        os.kill(d.front_pid(), signal.SIGHUP)
        bkit.wait_for(lambda: "key file reloaded" in d.log.read_text(), GUARD, what="the claim key file's reload")
        self.assertRefused(lambda: exec_shell(d, claim_key, "true"), Status.PERMISSION_DENIED, Detail.CLAIM_KEY)

        r, claim_env = claim(d, claim_key, key)
        self.assertTrue(r.verified)
        self.assertEqual(r.envelope.key_id, "tenant")
        self.assertEqual(exec_shell(d, key, "id -u").stdout, b"%d\n" % bkit.SANDBOX_UID)
        self.assertClaimKeyRetired(d, claim_key)
        # The claim Reset, recorded and re-sent word for word, resets nothing.
        (d.workspace / "tenant-file").write_text("the tenant's\n")
        with client(d, claim_key) as c:
            answer = c.exchange(claim_env.SerializeToString())
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            client(d, claim_key).open_answer(answer, claim_env, pb.ResetResponse)
        self.assertEqual(cm.exception.code, Status.UNAUTHENTICATED, cm.exception)
        self.assertEqual(os.listdir(d.workspace), ["tenant-file"])

        # A new claim key in the file, and SIGHUP: not read. SIGHUP is handled before the SIGTERM
        # of the stop that follows (the lower signal first), so the log is complete by then.
        use_tenant_key_for_the_harness(d, key)
        claimed_at = len(d.log.read_bytes())
        later_claim_key = self.write_claim_key(d)
        os.kill(d.front_pid(), signal.SIGHUP)
        restart(d)
        self.assertNotIn(b"key file reloaded", d.log.read_bytes()[claimed_at:])
        self.assertIn("installed by a Reset, is the only key", d.log_text())
        self.assertNotIn("a warm pool's claim key: Health and Reset only", d.log_text())
        for k in (claim_key, later_claim_key):
            self.assertClaimKeyRetired(d, k)
        self.assertEqual(exec_shell(d, key, "cat /workspace/tenant-file").stdout, b"the tenant's\n")
        # The tenant's own key is no claim key: its Resets need no new key.
        with client(d, key, timeout=GUARD * 2) as c:
            self.assertTrue(c.call("Reset", pb.ResetRequest(), pb.ResetResponse).verified)

    def test_one_source_of_keys(self):
        for extra in (["--key-file", str(self.d.key)], ["--claim-key-env", CLAIM_ENV], ["--key-env", CLAIM_ENV]):
            with self.subTest(extra[0]):
                argv = self.d.argv() + extra
                r = bkit.run(argv, timeout=30, capture_output=True, text=True, env=dict(os.environ, **{CLAIM_ENV: "x"}))
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("one source of keys", r.stderr)


class ClaimKeyFromTheEnvironment(ClaimAssertions, unittest.TestCase):
    def test_the_variable_is_gone_from_boxkited_and_every_command(self):
        with bkit.scope():
            d = bkit.Daemon("claim-env", tcp=("127.0.0.1", bkit.free_tcp_port()), key_env=CLAIM_ENV,
                            claim=True).start()
            claim_key = wire.load_key_file(d.key)
            hexed = claim_key.secret.hex().encode()
            for pid in (d.front_pid(), d.executor_pid()):
                with self.subTest(pid=pid):
                    environ = open(f"/proc/{pid}/environ", "rb").read()
                    self.assertNotIn(CLAIM_ENV.encode(), environ)
                    self.assertNotIn(hexed, environ)
            self.assertRefused(lambda: exec_shell(d, claim_key, "env"), Status.PERMISSION_DENIED, Detail.CLAIM_KEY)
            key = tenant_key()
            claim(d, claim_key, key)
            out = exec_shell(d, key, "env; cat /proc/self/environ").stdout
            self.assertNotIn(CLAIM_ENV.encode(), out)
            self.assertNotIn(hexed, out)
            self.assertClaimKeyRetired(d, claim_key)


class ClaimInAPod(ClaimAssertions, unittest.TestCase):
    """A warm pod of deploy/agent-sandbox: boxkited --pod with the pool's claim key in a variable,
    claimed, then its sidecar container restarted (the state directory, an emptyDir, survives)."""

    def test_claim_then_restart_the_sidecar(self):
        bkit.require_tools("unshare", "nsenter", "setpriv")
        with bkit.scope():
            pod = bkit.Pod(tag="claim-pod", key_env=CLAIM_ENV, claim=True)
            d = pod.daemon
            d.tcp = ("127.0.0.1", bkit.free_tcp_port())
            d.start()
            pod.start_container()
            bkit.wait_for(lambda: d.health().get("sandbox_ready") is True, GUARD, what="the sandbox container")
            claim_key = wire.load_key_file(d.key)
            self.assertNotIn(CLAIM_ENV.encode(), open(f"/proc/{d.front_pid()}/environ", "rb").read())
            self.assertRefused(lambda: exec_shell(d, claim_key, "cat /container-marker"), Status.PERMISSION_DENIED,
                               Detail.CLAIM_KEY)
            # bkctl verify with the claim key: layer one skipped, and said why; not a pass.
            r = d.bkctl("-o", "json", "verify", url=f"tcp://{d.tcp[0]}:{d.tcp[1]}", timeout=90)
            checks = {(c["layer"], c["check"]): c for c in json.loads(r.stdout)["checks"]}
            self.assertEqual((r.returncode, checks[(1, "exec")]["verdict"]), (5, "SKIPPED"), r.stdout)
            self.assertIn("warm pool's claim key", checks[(1, "exec")]["detail"])
            key = tenant_key()
            r, _ = claim(d, claim_key, key)
            self.assertTrue(r.verified)
            self.assertEqual(exec_shell(d, key, "cat /container-marker").stdout.decode().strip(), pod.marker)
            self.assertClaimKeyRetired(d, claim_key)
            # The sidecar container restarts (SIGKILL, as a failed liveness probe ends it) with the
            # same variable and flags; the pod and its state emptyDir live on.
            use_tenant_key_for_the_harness(d, key)
            os.kill(d.front_pid(), signal.SIGKILL)
            d.proc.wait(timeout=GUARD)
            d._logf.close()
            d._front = None
            d.start()
            bkit.wait_for(lambda: d.health().get("sandbox_ready") is True, GUARD, what="the sandbox again")
            self.assertClaimKeyRetired(d, claim_key)
            self.assertEqual(exec_shell(d, key, "cat /container-marker").stdout.decode().strip(), pod.marker)


if __name__ == "__main__":
    unittest.main()
