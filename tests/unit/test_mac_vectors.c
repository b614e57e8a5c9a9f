/* The Envelope MAC test vectors of docs/PROTOCOL.md ("Test vectors"), checked against
 * common/envelope.c. The same vectors are recomputed independently, with Python's hmac module,
 * by tests/unit/mac_vectors.py, which also checks that this file and the document carry these
 * exact MACs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "envelope.h"
#include "support.h"

struct mac_vector {
	const char *name;
	uint8_t key_first; /* the key is key_first, key_first+1, ... */
	size_t key_len;
	const char *key_id;
	uint32_t version;
	int kind;
	int64_t timestamp_ms;
	uint8_t nonce[BK_NONCE_LEN];
	const char *method;
	int32_t status;
	int detail;
	const char *message;
	const uint8_t *body;
	size_t body_len;
	const uint8_t *data;
	size_t data_len;
	const char *mac_hex;
};

#define NONCE_A { 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf }

/* ExecRequest{argv: ["echo", "hi"]} */
static const uint8_t exec_echo_hi[] = { 0x0a, 0x04, 'e', 'c', 'h', 'o', 0x0a, 0x02, 'h', 'i' };

/* HealthResponse{version: "0.1.0", mode: "local", sandbox_ready: true, auth_configured: true,
 * uptime_ms: 1234} */
static const uint8_t health_response[] = { 0x0a, 0x05, '0',  '.',  '1',  '.',  '0',  0x12, 0x05, 'l', 'o',
					   'c',  'a',  'l',  0x18, 0x01, 0x20, 0x01, 0x28, 0xd2, 0x09 };

/* FileUploadChunkRequest{upload_id: "00112233445566778899aabbccddeeff", offset: 0}, and its data */
static const uint8_t chunk_request[] = "\x0a\x20" "00112233445566778899aabbccddeeff";
static const uint8_t chunk_data[] = "hello, world\n";

static const struct mac_vector vectors[] = {
	{
		.name = "request",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 2, .kind = 1, .timestamp_ms = 1700000000000, .nonce = NONCE_A, .method = "Exec",
		.status = 0, .detail = 0, .message = "",
		.body = exec_echo_hi, .body_len = sizeof(exec_echo_hi),
		.mac_hex = "9da43df1278db7d4fb2bd8b62476c6f1aabf2e3b216687ab46b65390fa54d603",
	},
	{
		.name = "request with an empty body",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 2, .kind = 1, .timestamp_ms = 1700000000500,
		.nonce = { 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
			   0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff },
		.method = "Health", .status = 0, .detail = 0, .message = "",
		.body = NULL, .body_len = 0,
		.mac_hex = "4875627d69f547a3dc53c7b9a22cdcb9982555508ce286fcc97f1e9190d0d16f",
	},
	{
		.name = "refusal response",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 2, .kind = 2, .timestamp_ms = 1700000001234, .nonce = NONCE_A, .method = "Exec",
		.status = 16, .detail = 5, .message = "timestamp 45000 ms is older than the 30000 ms window",
		.body = NULL, .body_len = 0,
		.mac_hex = "f8268bdfbaa68a2c289f2e4e4d6954917f7c0c69088f0c2edd6fbbab748126d4",
	},
	{
		.name = "success response, 64-byte key",
		.key_first = 0x40, .key_len = 64, .key_id = "ops.rotated_2",
		.version = 2, .kind = 2, .timestamp_ms = 1700000002000, .nonce = NONCE_A, .method = "Health",
		.status = 0, .detail = 0, .message = "",
		.body = health_response, .body_len = sizeof(health_response),
		.mac_hex = "ab3362946eb5422a6b039850534e850951241d87bc176ec82bffd44507c29e7c",
	},
	{
		.name = "request with data",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 2, .kind = 1, .timestamp_ms = 1700000003000, .nonce = NONCE_A, .method = "FileUploadChunk",
		.status = 0, .detail = 0, .message = "",
		.body = chunk_request, .body_len = sizeof(chunk_request) - 1,
		.data = chunk_data, .data_len = sizeof(chunk_data) - 1,
		.mac_hex = "43cdd20c44f8fb06ac3c51a21fc3cf736008bf89f185df24016258f1685fe139",
	},
};

static bk_envelope vector_header(const struct mac_vector *v)
{
	bk_envelope hdr = BOXKITE__V1__ENVELOPE__INIT;

	hdr.version = v->version;
	hdr.kind = (Boxkite__V1__EnvelopeKind)v->kind;
	hdr.key_id = (char *)v->key_id;
	hdr.timestamp_ms = v->timestamp_ms;
	hdr.nonce.data = (uint8_t *)v->nonce;
	hdr.nonce.len = BK_NONCE_LEN;
	hdr.method = (char *)v->method;
	hdr.status = v->status;
	hdr.detail = (Boxkite__V1__StatusDetail)v->detail;
	hdr.message = (char *)v->message;
	return hdr;
}

static void vectors_match_envelope_mac(void **state)
{
	(void)state;
	for (size_t i = 0; i < BK_ARRAY_SIZE(vectors); i++) {
		const struct mac_vector *v = &vectors[i];
		bk_envelope hdr = vector_header(v);
		uint8_t mac[BK_MAC_LEN];
		char hex[2 * BK_MAC_LEN + 1];
		bk_digest data;
		bk_key key;

		unit_key(&key, v->key_id, v->key_first, v->key_len);
		assert_int_equal(bk_digest_of(v->data, v->data_len, &data), 0);
		assert_int_equal(bk_envelope_mac(&key, &hdr, v->body, v->body_len, &data, mac), 0);
		if (strcmp(unit_hex(mac, sizeof(mac), hex), v->mac_hex) != 0)
			fail_msg("vector \"%s\": MAC %s, expected %s", v->name, hex, v->mac_hex);
		bk_key_clear(&key);
	}
}

/* The vectors also verify as received envelopes: packed with body, mac and data, decoded whole
 * (the MAC hashing the data itself), and split as the server and the client split them. */
static void vectors_verify_after_decoding(void **state)
{
	(void)state;
	for (size_t i = 0; i < BK_ARRAY_SIZE(vectors); i++) {
		const struct mac_vector *v = &vectors[i];
		bk_envelope whole = vector_header(v);
		uint8_t mac[BK_MAC_LEN], wire[512];
		bk_envelope *env;
		bk_key key;

		for (size_t b = 0; b < BK_MAC_LEN; b++) {
			unsigned byte;
			assert_int_equal(sscanf(v->mac_hex + 2 * b, "%2x", &byte), 1);
			mac[b] = (uint8_t)byte;
		}
		whole.body.data = (uint8_t *)v->body;
		whole.body.len = v->body_len;
		whole.mac.data = mac;
		whole.mac.len = BK_MAC_LEN;
		whole.data.data = (uint8_t *)v->data;
		whole.data.len = v->data_len;
		assert_true(protobuf_c_message_get_packed_size(&whole.base) <= sizeof(wire));
		size_t len = protobuf_c_message_pack(&whole.base, wire);
		env = boxkite__v1__envelope__unpack(NULL, len, wire);
		assert_non_null(env);
		unit_key(&key, v->key_id, v->key_first, v->key_len);
		if (!bk_envelope_mac_ok(&key, env, NULL))
			fail_msg("vector \"%s\" does not verify after decoding", v->name);
		protobuf_c_message_free_unpacked(&env->base, NULL);

		const uint8_t *data;
		size_t fields_len, data_len;
		bk_digest digest;
		assert_int_equal(bk_envelope_split(wire, len, &fields_len, &data, &data_len), 0);
		assert_int_equal(data_len, v->data_len);
		assert_int_equal(fields_len, len - (v->data_len ? 2 + v->data_len : 0));
		env = boxkite__v1__envelope__unpack(NULL, fields_len, wire);
		assert_non_null(env);
		assert_int_equal(bk_digest_of(data, data_len, &digest), 0);
		if (!bk_envelope_mac_ok(&key, env, &digest))
			fail_msg("vector \"%s\" does not verify after splitting", v->name);
		protobuf_c_message_free_unpacked(&env->base, NULL);
		bk_key_clear(&key);
	}
}

/* The bodies in the vectors are what protobuf-c packs for the messages the document names, and
 * sealing those messages ends in the vector's MAC. */
static void vector_bodies_are_the_named_messages(void **state)
{
	Boxkite__V1__ExecRequest exec = BOXKITE__V1__EXEC_REQUEST__INIT;
	Boxkite__V1__HealthResponse health = BOXKITE__V1__HEALTH_RESPONSE__INIT;
	char *argv[] = { "echo", "hi" };
	const struct {
		const struct mac_vector *v;
		const ProtobufCMessage *msg;
	} cases[] = { { &vectors[0], &exec.base }, { &vectors[3], &health.base } };

	(void)state;
	exec.argv = argv;
	exec.n_argv = BK_ARRAY_SIZE(argv);
	health.version = "0.1.0";
	health.mode = "local";
	health.sandbox_ready = true;
	health.auth_configured = true;
	health.uptime_ms = 1234;
	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		const struct mac_vector *v = cases[i].v;
		bk_envelope hdr = vector_header(v);
		uint8_t body[64], sealed[512];
		char hex[2 * BK_MAC_LEN + 1];
		size_t len;
		bk_key key;

		assert_int_equal(protobuf_c_message_pack(cases[i].msg, body), v->body_len);
		assert_memory_equal(body, v->body, v->body_len);
		unit_key(&key, v->key_id, v->key_first, v->key_len);
		assert_true(bk_envelope_sealed_size(&hdr, cases[i].msg, 0, true) <= sizeof(sealed));
		len = bk_envelope_seal(&hdr, cases[i].msg, &key, sealed);
		assert_string_equal(unit_hex(sealed + len - BK_MAC_LEN, BK_MAC_LEN, hex), v->mac_hex);
		bk_key_clear(&key);
	}
}

/* The whole sealed Envelopes of the second vector (a Health request: HealthRequest{} packs to
 * nothing, so there is no body field) and the fifth (a chunk: the data field after the MAC), as
 * docs/PROTOCOL.md spells them out, laid out and signed as libboxkite does. */
static const char vector2_sealed_hex[] =
	"080210011a08746573742d6b657920f4d395ffbc312a1000112233445566778899aabbccddeeff32064865616c7468"
	"5a204875627d69f547a3dc53c7b9a22cdcb9982555508ce286fcc97f1e9190d0d16f";
static const char vector5_sealed_hex[] =
	"080210011a08746573742d6b657920b8e795ffbc312a10a0a1a2a3a4a5a6a7a8a9aaabacadaeaf320f46696c6555706c6f6164"
	"4368756e6b52220a2030303131323233333434353536363737383839396161626263636464656566665a2043cdd20c44f8fb06"
	"ac3c51a21fc3cf736008bf89f185df24016258f1685fe139620d68656c6c6f2c20776f726c640a";

static void vectors_seal_to_the_documented_bytes(void **state)
{
	Boxkite__V1__HealthRequest health = BOXKITE__V1__HEALTH_REQUEST__INIT;
	Boxkite__V1__FileUploadChunkRequest chunk = BOXKITE__V1__FILE_UPLOAD_CHUNK_REQUEST__INIT;
	const struct {
		const struct mac_vector *v;
		const ProtobufCMessage *body;
		const char *hex;
	} cases[] = { { &vectors[1], &health.base, vector2_sealed_hex }, { &vectors[4], &chunk.base, vector5_sealed_hex } };

	(void)state;
	chunk.upload_id = "00112233445566778899aabbccddeeff";
	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		const struct mac_vector *v = cases[i].v;
		bk_envelope hdr = vector_header(v);
		uint8_t sealed[256];
		char hex[2 * sizeof(sealed) + 1];
		bk_layout l;
		bk_digest d;
		bk_key key;

		unit_key(&key, v->key_id, v->key_first, v->key_len);
		assert_true(bk_envelope_sealed_size(&hdr, cases[i].body, v->data_len, true) <= sizeof(sealed));
		bk_envelope_layout(&hdr, cases[i].body, v->data_len, true, sealed, &l);
		assert_int_equal(l.data_len, v->data_len);
		if (v->data_len)
			memcpy(sealed + l.data_at, v->data, v->data_len);
		assert_int_equal(bk_digest_of(v->data, v->data_len, &d), 0);
		assert_int_equal(bk_envelope_sign(&hdr, &key, &d, sealed, &l), 0);
		if (strcmp(unit_hex(sealed, l.len, hex), cases[i].hex) != 0)
			fail_msg("vector \"%s\" seals to %s", v->name, hex);
		bk_key_clear(&key);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vectors_match_envelope_mac),
		cmocka_unit_test(vectors_verify_after_decoding),
		cmocka_unit_test(vector_bodies_are_the_named_messages),
		cmocka_unit_test(vectors_seal_to_the_documented_bytes),
	};

	return cmocka_run_group_tests_name("mac_vectors", tests, NULL, NULL);
}
