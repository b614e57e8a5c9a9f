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
	const char *mac_hex;
};

#define NONCE_A { 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf }

/* ExecRequest{argv: ["echo", "hi"]} */
static const uint8_t exec_echo_hi[] = { 0x0a, 0x04, 'e', 'c', 'h', 'o', 0x0a, 0x02, 'h', 'i' };

/* HealthResponse{version: "0.1.0", mode: "local", sandbox_ready: true, auth_configured: true,
 * uptime_ms: 1234} */
static const uint8_t health_response[] = { 0x0a, 0x05, '0',  '.',  '1',  '.',  '0',  0x12, 0x05, 'l', 'o',
					   'c',  'a',  'l',  0x18, 0x01, 0x20, 0x01, 0x28, 0xd2, 0x09 };

static const struct mac_vector vectors[] = {
	{
		.name = "request",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 1, .kind = 1, .timestamp_ms = 1700000000000, .nonce = NONCE_A, .method = "Exec",
		.status = 0, .detail = 0, .message = "",
		.body = exec_echo_hi, .body_len = sizeof(exec_echo_hi),
		.mac_hex = "f9120c0572b2db8f8a637cb2445766bfcefaa099ca95b5915d86efbe392d7c54",
	},
	{
		.name = "request with an empty body",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 1, .kind = 1, .timestamp_ms = 1700000000500,
		.nonce = { 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
			   0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff },
		.method = "Health", .status = 0, .detail = 0, .message = "",
		.body = NULL, .body_len = 0,
		.mac_hex = "96a5ffb76fc47ce43dea8a5045c057f293e09cd978675fc733d1accd3c48d741",
	},
	{
		.name = "refusal response",
		.key_first = 0x00, .key_len = 32, .key_id = "test-key",
		.version = 1, .kind = 2, .timestamp_ms = 1700000001234, .nonce = NONCE_A, .method = "Exec",
		.status = 16, .detail = 5, .message = "timestamp 45000 ms is older than the 30000 ms window",
		.body = NULL, .body_len = 0,
		.mac_hex = "1f34eb58ee70014b4cbb68d407424cb1024bdba9256f01ae8cd38a39db5a62f1",
	},
	{
		.name = "success response, 64-byte key",
		.key_first = 0x40, .key_len = 64, .key_id = "ops.rotated_2",
		.version = 1, .kind = 2, .timestamp_ms = 1700000002000, .nonce = NONCE_A, .method = "Health",
		.status = 0, .detail = 0, .message = "",
		.body = health_response, .body_len = sizeof(health_response),
		.mac_hex = "8672fd3ca7046a3052d12d7f7b58d46634d3afae78dfb07b1dc0af0990058a41",
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
		bk_key key;

		unit_key(&key, v->key_id, v->key_first, v->key_len);
		assert_int_equal(bk_envelope_mac(&key, &hdr, v->body, v->body_len, mac), 0);
		if (strcmp(unit_hex(mac, sizeof(mac), hex), v->mac_hex) != 0)
			fail_msg("vector \"%s\": MAC %s, expected %s", v->name, hex, v->mac_hex);
		bk_key_clear(&key);
	}
}

/* The vectors also verify as received envelopes: packed with body and mac, decoded, checked. */
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
		assert_true(protobuf_c_message_get_packed_size(&whole.base) <= sizeof(wire));
		env = boxkite__v1__envelope__unpack(NULL, protobuf_c_message_pack(&whole.base, wire), wire);
		assert_non_null(env);
		unit_key(&key, v->key_id, v->key_first, v->key_len);
		if (!bk_envelope_mac_ok(&key, env))
			fail_msg("vector \"%s\" does not verify after decoding", v->name);
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
		assert_true(bk_envelope_sealed_size(&hdr, cases[i].msg) <= sizeof(sealed));
		len = bk_envelope_seal(&hdr, cases[i].msg, &key, sealed);
		assert_string_equal(unit_hex(sealed + len - BK_MAC_LEN, BK_MAC_LEN, hex), v->mac_hex);
		bk_key_clear(&key);
	}
}

/* The whole sealed Envelope of the second vector, as docs/PROTOCOL.md spells it out: a Health
 * request (HealthRequest{} packs to nothing, so there is no body field). */
static const char vector2_sealed_hex[] =
	"080110011a08746573742d6b657920f4d395ffbc312a1000112233445566778899aabbccddeeff32064865616c7468"
	"5a2096a5ffb76fc47ce43dea8a5045c057f293e09cd978675fc733d1accd3c48d741";

static void vector2_seals_to_the_documented_bytes(void **state)
{
	Boxkite__V1__HealthRequest health = BOXKITE__V1__HEALTH_REQUEST__INIT;
	const struct mac_vector *v = &vectors[1];
	bk_envelope hdr = vector_header(v);
	uint8_t sealed[128];
	char hex[2 * sizeof(sealed) + 1];
	bk_key key;

	(void)state;
	unit_key(&key, v->key_id, v->key_first, v->key_len);
	assert_true(bk_envelope_sealed_size(&hdr, &health.base) <= sizeof(sealed));
	assert_string_equal(unit_hex(sealed, bk_envelope_seal(&hdr, &health.base, &key, sealed), hex),
			    vector2_sealed_hex);
	bk_key_clear(&key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vectors_match_envelope_mac),
		cmocka_unit_test(vectors_verify_after_decoding),
		cmocka_unit_test(vector_bodies_are_the_named_messages),
		cmocka_unit_test(vector2_seals_to_the_documented_bytes),
	};

	return cmocka_run_group_tests_name("mac_vectors", tests, NULL, NULL);
}
