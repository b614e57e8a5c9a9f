"""Health through the boxkite package against a real boxkited over tcp://127.0.0.1, the checks its
wire layer makes of every answer, and the MAC test vectors of docs/PROTOCOL.md."""

import os
import re
import time
import unittest

import boxkited_process

try:
    import boxkite
    from boxkite import Status, wire
    from boxkite.v1 import boxkite_pb2 as pb
    IMPORT_ERROR = None
except ImportError as e:  # not run through make test-python, which installs the package
    IMPORT_ERROR = "cannot import the boxkite package (%s): make test-python installs it" % e


def boxkite_version():
    """BK_VERSION from common/version.h: what Health must report."""
    with open(os.path.join(boxkited_process.REPO_ROOT, "common", "version.h")) as f:
        return re.search(r'BK_VERSION "([^"]*)"', f.read()).group(1)


SKIP_REASON = boxkited_process.skip_reason(IMPORT_ERROR)  # the runner (tests/integration/run.py) prints it after "SKIP"


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class HealthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.started = time.monotonic()
        cls.daemon = boxkited_process.Boxkited().__enter__()
        cls.key = wire.load_key_file(cls.daemon.key_file)

    @classmethod
    def tearDownClass(cls):
        log = cls.daemon.log()
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("boxkited exited with %s; its log:\n%s" % (status, log))

    def client(self, keyed=True, secret=None):
        key = wire.Key(self.key.key_id, secret or self.key.secret) if keyed else None
        c = wire.Channel(self.daemon.url, key=key, timeout=10.0)
        self.addCleanup(c.close)
        return c

    def assert_health_fields(self, h):
        self.assertEqual(h.version, boxkite_version())
        self.assertEqual(h.mode, "local")  # started with --workspace
        self.assertTrue(h.auth_configured)
        # Counted from boxkited's start, which came after the class's.
        self.assertLessEqual(h.uptime_ms, (time.monotonic() - self.started) * 1000 + 1)

    def test_unkeyed(self):
        reply = self.client(keyed=False).call("Health", pb.HealthRequest(), pb.HealthResponse)
        self.assert_health_fields(reply.message)
        self.assertFalse(reply.verified)
        self.assertEqual(reply.envelope.key_id, "")
        self.assertEqual(reply.envelope.mac, b"")

    def test_keyed(self):
        reply = self.client().call("Health", pb.HealthRequest(), pb.HealthResponse)
        self.assert_health_fields(reply.message)
        self.assertTrue(reply.verified)
        env = reply.envelope
        self.assertEqual(env.version, wire.ENVELOPE_VERSION)
        self.assertEqual(env.kind, pb.ENVELOPE_KIND_RESPONSE)
        self.assertEqual(env.key_id, self.key.key_id)
        self.assertEqual((env.status, env.detail, env.message), (Status.OK, pb.STATUS_DETAIL_NONE, ""))
        self.assertEqual(len(env.mac), wire.MAC_LEN)
        self.assertEqual(env.mac, wire.envelope_mac(self.key.secret, env))

    def test_the_clients_health(self):
        with self.daemon.client() as box:
            h = box.health()
        self.assert_health_fields(h)
        self.assertTrue(h.authenticated, "a keyed Health's answer is MAC'd")
        with self.daemon.client(key_file=None) as box:
            self.assertFalse(box.health().authenticated, "an unkeyed one's is only an indication")

    def test_the_local_sandbox_becomes_ready(self):
        c = self.client(keyed=False)
        deadline = time.monotonic() + 30  # a hang guard, not a figure
        while not c.call("Health", pb.HealthRequest(), pb.HealthResponse).message.sandbox_ready:
            self.assertLess(time.monotonic(), deadline, "the local sandbox never became ready")
            time.sleep(0.05)

    def test_several_calls_on_one_connection(self):
        c = self.client()
        uptimes = [c.call("Health", pb.HealthRequest(), pb.HealthResponse).message.uptime_ms for _ in range(5)]
        self.assertEqual(uptimes, sorted(uptimes))

    def test_wrong_key_is_bad_mac(self):
        c = self.client(secret=os.urandom(32))
        with self.assertRaises(boxkite.UnauthenticatedError) as cm:
            c.call("Health", pb.HealthRequest(), pb.HealthResponse)
        self.assertEqual(cm.exception.code, Status.UNAUTHENTICATED)
        self.assertEqual(cm.exception.detail, pb.STATUS_DETAIL_BAD_MAC)
        # Refused before the key was proven: the answer carries no MAC.
        self.assertFalse(cm.exception.verified)

    def test_replayed_request_is_answered_identically(self):
        c = self.client()
        request = c.seal("Health", pb.HealthRequest())
        raw = request.SerializeToString()
        first, second = c.exchange(raw), c.exchange(raw)
        self.assertEqual(first, second)
        a, b = pb.Envelope.FromString(first), pb.Envelope.FromString(second)
        self.assertEqual(a.body, b.body)
        self.assertEqual(a.mac, b.mac)
        for answer in (first, second):
            reply = c.open_answer(answer, request, pb.HealthResponse)
            self.assertTrue(reply.verified)
        # The second answer came from the replay cache, not from a second run of the handler.
        self.assertIn("answered from the replay cache", self.daemon.log())

    def test_tampered_answer_fails_verification(self):
        c = self.client()
        request = c.seal("Health", pb.HealthRequest())
        answer = c.exchange(request.SerializeToString())
        self.assertTrue(c.open_answer(answer, request, pb.HealthResponse).verified)

        env = pb.Envelope.FromString(answer)
        health = pb.HealthResponse.FromString(env.body)
        health.uptime_ms += 1
        env.body = health.SerializeToString()
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            c.open_answer(env.SerializeToString(), request, pb.HealthResponse)
        self.assertEqual(cm.exception.code, Status.DATA_LOSS)
        self.assertIn("MAC does not verify", cm.exception.message)

        # Stripping the MAC does not help: a keyed caller needs one on success.
        env = pb.Envelope.FromString(answer)
        env.ClearField("mac")
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            c.open_answer(env.SerializeToString(), request, pb.HealthResponse)
        self.assertEqual(cm.exception.code, Status.DATA_LOSS)
        self.assertIn("without a MAC", cm.exception.message)

    def test_non_canonical_answer_is_refused(self):
        c = self.client()
        request = c.seal("Health", pb.HealthRequest())
        answer = c.exchange(request.SerializeToString())
        # Field 15, varint 1: unknown to the schema, so outside what the MAC covers.
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            c.open_answer(answer + b"\x78\x01", request, pb.HealthResponse)
        self.assertEqual(cm.exception.code, Status.DATA_LOSS)
        self.assertIn("not a canonical", cm.exception.message)

    def test_non_canonical_request_is_malformed(self):
        """Refused MALFORMED, and the refusal repeats nothing of the request (no nonce, no method):
        a client cannot match it to its request, and treats it as a failed, unverified call."""
        c = self.client()
        request = c.seal("Health", pb.HealthRequest())
        for extra in (b"\x78\x01", b"\x60\x01", b"\x62\x00"):  # unknown field; data as a varint; empty data
            with self.subTest(extra=extra.hex()):
                answer = pb.Envelope.FromString(c.exchange(request.SerializeToString() + extra))
                self.assertEqual((answer.status, answer.detail), (Status.INVALID_ARGUMENT, pb.STATUS_DETAIL_MALFORMED))
                self.assertEqual((answer.nonce, answer.method, answer.mac), (b"", "", b""))
                with self.assertRaises(boxkite.BoxkiteError) as cm:
                    c.open_answer(answer.SerializeToString(), request, pb.HealthResponse)
                self.assertEqual(cm.exception.code, Status.DATA_LOSS)
                self.assertFalse(cm.exception.verified)

    def test_data_is_taken_only_in_the_answers_that_carry_it(self):
        """docs/PROTOCOL.md, "what a client must check", step 7: FileDownload's and ProcessRead's
        answers carry data; any other answer carrying some is refused, MAC'd or not."""
        c = self.client()

        def answer_to(request, body, data):
            env = pb.Envelope(version=wire.ENVELOPE_VERSION, kind=pb.ENVELOPE_KIND_RESPONSE, key_id=self.key.key_id,
                              timestamp_ms=request.timestamp_ms, nonce=request.nonce, method=request.method,
                              body=body, data=data)
            env.mac = wire.envelope_mac(self.key.secret, env)
            return env.SerializeToString()

        request = c.seal("Health", pb.HealthRequest())
        real = pb.Envelope.FromString(c.exchange(request.SerializeToString()))
        with self.assertRaises(boxkite.DataLossError) as cm:
            c.open_answer(answer_to(request, real.body, b"smuggled"), request)
        self.assertIn("data this call does not take", cm.exception.message)
        body = pb.ProcessReadResponse(stdout=pb.StreamChunk(length=2, end=2), stderr=pb.StreamChunk(),
                                      status=pb.ProcessStatus()).SerializeToString()
        for method, req in (("ProcessRead", pb.ProcessReadRequest(process_id="p1")),
                            ("FileDownload", pb.FileDownloadRequest(path="x"))):
            with self.subTest(method=method):
                request = c.seal(method, req)
                reply = c.open_answer(answer_to(request, body if method == "ProcessRead" else b"", b"ab"), request)
                self.assertEqual((reply.data, reply.verified), (b"ab", True))
                with self.assertRaises(boxkite.DataLossError):
                    c.open_answer(answer_to(request, b"", b"ab"), request, answer_data=False)

    def test_answer_to_another_request_is_refused(self):
        c = self.client()
        request = c.seal("Health", pb.HealthRequest())
        answer = c.exchange(request.SerializeToString())
        other = c.seal("Health", pb.HealthRequest())
        with self.assertRaises(boxkite.BoxkiteError) as cm:
            c.open_answer(answer, other, pb.HealthResponse)
        self.assertEqual(cm.exception.code, Status.DATA_LOSS)
        self.assertIn("not for this request", cm.exception.message)


@unittest.skipIf(IMPORT_ERROR, "SKIP: %s" % IMPORT_ERROR)
class MacVectorTest(unittest.TestCase):
    """The test vectors of docs/PROTOCOL.md ("Test vectors"), and one MAC input laid out by hand
    for the sign handling the vectors do not reach (a negative timestamp and status)."""

    K32 = bytes(range(0x00, 0x20))
    K64 = bytes(range(0x40, 0x80))
    NA = bytes(range(0xA0, 0xB0))

    def vector(self, key, **fields):
        env = pb.Envelope(version=2, **fields)
        return wire.envelope_mac(key, env).hex(), env

    def test_vectors(self):
        exec_body = pb.ExecRequest(argv=["echo", "hi"]).SerializeToString()
        self.assertEqual(exec_body.hex(), "0a046563686f0a026869")
        health = pb.HealthResponse(version="0.1.0", mode="local", sandbox_ready=True, auth_configured=True,
                                   uptime_ms=1234).SerializeToString()
        vectors = [
            (self.K32, dict(kind=1, key_id="test-key", timestamp_ms=1700000000000, nonce=self.NA,
                            method="Exec", body=exec_body),
             "9da43df1278db7d4fb2bd8b62476c6f1aabf2e3b216687ab46b65390fa54d603"),
            (self.K32, dict(kind=1, key_id="test-key", timestamp_ms=1700000000500,
                            nonce=bytes.fromhex("00112233445566778899aabbccddeeff"), method="Health"),
             "4875627d69f547a3dc53c7b9a22cdcb9982555508ce286fcc97f1e9190d0d16f"),
            (self.K32, dict(kind=2, key_id="test-key", timestamp_ms=1700000001234, nonce=self.NA, method="Exec",
                            status=16, detail=5, message="timestamp 45000 ms is older than the 30000 ms window"),
             "f8268bdfbaa68a2c289f2e4e4d6954917f7c0c69088f0c2edd6fbbab748126d4"),
            (self.K64, dict(kind=2, key_id="ops.rotated_2", timestamp_ms=1700000002000, nonce=self.NA,
                            method="Health", body=health),
             "ab3362946eb5422a6b039850534e850951241d87bc176ec82bffd44507c29e7c"),
            (self.K32, dict(kind=1, key_id="test-key", timestamp_ms=1700000003000, nonce=self.NA,
                            method="FileUploadChunk",
                            body=pb.FileUploadChunkRequest(upload_id="00112233445566778899aabbccddeeff")
                            .SerializeToString(), data=b"hello, world\n"),
             "43cdd20c44f8fb06ac3c51a21fc3cf736008bf89f185df24016258f1685fe139"),
        ]
        for i, (key, fields, want) in enumerate(vectors, 1):
            with self.subTest(vector=i):
                self.assertEqual(self.vector(key, **fields)[0], want)

    def test_second_vector_on_the_wire(self):
        mac, env = self.vector(self.K32, kind=1, key_id="test-key", timestamp_ms=1700000000500,
                               nonce=bytes.fromhex("00112233445566778899aabbccddeeff"), method="Health")
        env.mac = bytes.fromhex(mac)
        raw = env.SerializeToString()
        self.assertEqual(raw.hex(), "080210011a08746573742d6b657920f4d395ffbc312a1000112233445566778899aabbccddeeff"
                                     "32064865616c74685a204875627d69f547a3dc53c7b9a22cdcb9982555508ce286fcc97f1e91"
                                     "90d0d16f")
        self.assertTrue(wire.is_canonical(env, raw))

    def test_fifth_vector_on_the_wire(self):
        """Python's encoder puts the data field last, after the MAC, as boxkited requires."""
        mac, env = self.vector(self.K32, kind=1, key_id="test-key", timestamp_ms=1700000003000, nonce=self.NA,
                               method="FileUploadChunk",
                               body=pb.FileUploadChunkRequest(upload_id="00112233445566778899aabbccddeeff")
                               .SerializeToString(), data=b"hello, world\n")
        env.mac = bytes.fromhex(mac)
        raw = env.SerializeToString()
        self.assertTrue(raw.hex().endswith("5a20" + mac + "620d68656c6c6f2c20776f726c640a"), raw.hex())
        self.assertTrue(wire.is_canonical(env, raw))

    def test_the_preview_token_and_store_prefix_vectors(self):
        """docs/PROTOCOL.md's vectors for the other two keyed constructions."""
        key = wire.Key("k1", bytes(range(1, 33)))
        self.assertEqual(wire.preview_token(key, 3000, 1767225600),
                         "AQu4AAAAAGlVuQACazEF-wl3Xl11tIJ4I6a511ONeB74rv4Nf5lJDpWhWTR-5Q")
        self.assertEqual(wire.store_prefix(key), "t-b01b77dda2ae434a39823b1200b2fe6a")

    def test_signed_fields(self):
        env = pb.Envelope(version=2, kind=pb.ENVELOPE_KIND_RESPONSE, key_id="k1", timestamp_ms=-1,
                          nonce=bytes(range(16)), method="Health", status=-2,
                          detail=pb.STATUS_DETAIL_BAD_MAC, message="m", body=b"\x08\x01",
                          mac=b"\xff" * 32, data=b"abc")
        want = (b"boxkite.v1.Envelope\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x02"
                + b"\x00\x00\x00\x02k1" + b"\xff" * 8 + b"\x00\x00\x00\x10" + bytes(range(16))
                + b"\x00\x00\x00\x06Health" + b"\xff\xff\xff\xfe" + b"\x00\x00\x00\x04"
                + b"\x00\x00\x00\x01m" + b"\x00" * 7 + b"\x02" + b"\x08\x01"
                + b"\x00" * 7 + b"\x03" + bytes.fromhex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        self.assertEqual(wire.mac_input(env), want)


if __name__ == "__main__":
    unittest.main()
