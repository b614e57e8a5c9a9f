/* Unit tests of common/envelope.c: the MAC covers every field (data through its SHA-256),
 * sealing gives exactly what protobuf-c gives for the whole Envelope, splitting finds the data
 * field only where sealing puts it, the time window has inclusive edges and cannot overflow,
 * and the decoding arena enforces its byte cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "envelope.h"
#include "support.h"

#define T0 1700000000123LL /* an arbitrary "now", ms since the epoch */

static const uint8_t test_nonce[BK_NONCE_LEN] = { 0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
						  0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f };

/* A header with every field but body and mac set to a non-default value, so that the MAC has
 * something to cover in each. */
static bk_envelope full_header(void)
{
	bk_envelope hdr = BOXKITE__V1__ENVELOPE__INIT;

	hdr.version = BK_ENVELOPE_VERSION;
	hdr.kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST;
	hdr.key_id = "k1";
	hdr.timestamp_ms = T0;
	hdr.nonce.data = (uint8_t *)test_nonce;
	hdr.nonce.len = sizeof(test_nonce);
	hdr.method = "Exec";
	hdr.status = 3;
	hdr.detail = BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_BAD_MAC;
	hdr.message = "a message";
	return hdr;
}

static char *exec_argv[] = { "echo", "hello" };

static Boxkite__V1__ExecRequest exec_body(void)
{
	Boxkite__V1__ExecRequest req = BOXKITE__V1__EXEC_REQUEST__INIT;

	req.n_argv = BK_ARRAY_SIZE(exec_argv);
	req.argv = exec_argv;
	return req;
}

/* The data the sealed test envelopes carry: over 127 bytes, so its length takes two bytes. */
static uint8_t test_data[300];

static void test_data_fill(void)
{
	for (size_t i = 0; i < sizeof(test_data); i++)
		test_data[i] = (uint8_t)(i * 7 + 1);
}

/* Seal hdr, body and data_len bytes of test_data under key (NULL: unkeyed) into a malloc'd
 * buffer, laid out and signed as both sides do. */
static uint8_t *seal_data(const bk_envelope *hdr, const ProtobufCMessage *body, size_t data_len, const bk_key *key,
			  size_t *len)
{
	size_t size = bk_envelope_sealed_size(hdr, body, data_len, key != NULL);
	uint8_t *out = malloc(size);
	bk_layout l;
	bk_digest d;

	assert_non_null(out);
	bk_envelope_layout(hdr, body, data_len, key != NULL, out, &l);
	assert_int_equal(l.len, size);
	assert_int_equal(l.data_len, data_len);
	memcpy(out + l.data_at, test_data, data_len);
	assert_int_equal(bk_digest_of(test_data, data_len, &d), 0);
	if (key)
		assert_int_equal(bk_envelope_sign(hdr, key, &d, out, &l), 0);
	*len = l.len;
	return out;
}

static uint8_t *seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, size_t *len)
{
	return seal_data(hdr, body, sizeof(test_data), key, len);
}

static bk_envelope *unpack(const uint8_t *wire, size_t len)
{
	bk_envelope *env = boxkite__v1__envelope__unpack(NULL, len, wire);

	assert_non_null(env);
	return env;
}

static void envelope_free(bk_envelope *env)
{
	protobuf_c_message_free_unpacked(&env->base, NULL);
}

/* --- MAC ---------------------------------------------------------------------------------- */

static void seal_unpack_verify_round_trip(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	uint8_t body_wire[64];
	size_t body_len = protobuf_c_message_pack(&body.base, body_wire);
	bk_key key, other;
	size_t len;
	uint8_t *wire;
	bk_envelope *env;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);
	unit_key(&other, "k1", 0x02, 32);
	wire = seal(&hdr, &body.base, &key, &len);
	env = unpack(wire, len);

	assert_int_equal(env->version, BK_ENVELOPE_VERSION);
	assert_int_equal(env->kind, hdr.kind);
	assert_string_equal(env->key_id, "k1");
	assert_true(env->timestamp_ms == T0);
	assert_int_equal(env->nonce.len, BK_NONCE_LEN);
	assert_memory_equal(env->nonce.data, test_nonce, BK_NONCE_LEN);
	assert_string_equal(env->method, "Exec");
	assert_int_equal(env->status, 3);
	assert_int_equal(env->detail, hdr.detail);
	assert_string_equal(env->message, "a message");
	assert_int_equal(env->body.len, body_len);
	assert_memory_equal(env->body.data, body_wire, body_len);
	assert_int_equal(env->mac.len, BK_MAC_LEN);
	assert_int_equal(env->data.len, sizeof(test_data));
	assert_memory_equal(env->data.data, test_data, sizeof(test_data));

	assert_true(bk_envelope_mac_ok(&key, env, NULL));
	/* Same id, different secret: the MAC is the secret's, not the id's. */
	assert_false(bk_envelope_mac_ok(&other, env, NULL));

	envelope_free(env);
	free(wire);
	bk_key_clear(&key);
	bk_key_clear(&other);
}

enum envelope_field {
	FIELD_VERSION,
	FIELD_KIND,
	FIELD_KEY_ID,
	FIELD_TIMESTAMP,
	FIELD_NONCE,
	FIELD_METHOD,
	FIELD_STATUS,
	FIELD_DETAIL,
	FIELD_MESSAGE,
	FIELD_BODY,
	FIELD_BODY_LENGTH,
	FIELD_DATA,
	FIELD_DATA_LENGTH,
	FIELD_COUNT,
};

static const char *const field_names[FIELD_COUNT] = {
	"version", "kind", "key_id", "timestamp_ms", "nonce", "method",
	"status",  "detail", "message", "body", "body length", "data", "data length",
};

/* Change one field of a decoded envelope in the smallest way: one bit, or one byte less. */
static void flip_field(bk_envelope *env, enum envelope_field field)
{
	switch (field) {
	case FIELD_VERSION: env->version ^= 2; break;
	case FIELD_KIND: env->kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE; break;
	case FIELD_KEY_ID: env->key_id[1] ^= 1; break;
	case FIELD_TIMESTAMP: env->timestamp_ms ^= 1; break;
	case FIELD_NONCE: env->nonce.data[BK_NONCE_LEN - 1] ^= 0x80; break;
	case FIELD_METHOD: env->method[0] ^= 0x20; break;
	case FIELD_STATUS: env->status ^= 1; break;
	case FIELD_DETAIL: env->detail = BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE; break;
	case FIELD_MESSAGE: env->message[strlen(env->message) - 1] ^= 1; break;
	case FIELD_BODY: env->body.data[env->body.len - 1] ^= 1; break;
	case FIELD_BODY_LENGTH: env->body.len--; break;
	case FIELD_DATA: env->data.data[env->data.len / 2] ^= 4; break;
	case FIELD_DATA_LENGTH: env->data.len--; break;
	case FIELD_COUNT: fail_msg("no such field"); break;
	}
}

static void any_changed_field_fails_verification(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	bk_key key;
	size_t len;
	uint8_t *wire;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);
	wire = seal(&hdr, &body.base, &key, &len);
	for (int f = 0; f < FIELD_COUNT; f++) {
		bk_envelope *env = unpack(wire, len);

		assert_true(bk_envelope_mac_ok(&key, env, NULL));
		flip_field(env, (enum envelope_field)f);
		if (bk_envelope_mac_ok(&key, env, NULL))
			fail_msg("changing %s left the MAC valid", field_names[f]);
		envelope_free(env);
	}
	free(wire);
	bk_key_clear(&key);
}

static void any_flipped_mac_bit_fails_verification(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	bk_envelope *env;
	bk_key key;
	size_t len;
	uint8_t *wire;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);
	wire = seal(&hdr, &body.base, &key, &len);
	env = unpack(wire, len);
	for (size_t i = 0; i < BK_MAC_LEN; i++) {
		for (int bit = 0; bit < 8; bit++) {
			env->mac.data[i] ^= (uint8_t)(1u << bit);
			if (bk_envelope_mac_ok(&key, env, NULL))
				fail_msg("MAC byte %zu bit %d flipped, still verifies", i, bit);
			env->mac.data[i] ^= (uint8_t)(1u << bit);
		}
	}
	assert_true(bk_envelope_mac_ok(&key, env, NULL));
	/* A MAC one byte short (its prefix correct) or missing does not verify either. */
	env->mac.len = BK_MAC_LEN - 1;
	assert_false(bk_envelope_mac_ok(&key, env, NULL));
	env->mac.len = 0;
	assert_false(bk_envelope_mac_ok(&key, env, NULL));
	envelope_free(env);
	free(wire);
	bk_key_clear(&key);
}

/* An envelope as the server and the client take one in: the data split off in place, the rest
 * decoded, the MAC checked with the data's digest. true when it gets through. */
static bool received_verifies(const uint8_t *wire, size_t len, const bk_key *key)
{
	const uint8_t *data;
	size_t fields_len, data_len;
	bk_envelope *env;
	bk_digest d;
	bool ok;

	if (bk_envelope_split(wire, len, &fields_len, &data, &data_len) < 0)
		return false;
	env = boxkite__v1__envelope__unpack(NULL, fields_len, wire);
	if (!env)
		return false;
	ok = bk_digest_of(data, data_len, &d) == 0 && bk_envelope_mac_ok(key, env, &d);
	envelope_free(env);
	return ok;
}

/* Every single-bit change of the sealed bytes either stops them decoding or stops the MAC
 * verifying, whether decoded whole or split as received: nothing on the wire escapes the MAC. */
static void any_flipped_wire_bit_is_detected(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	bk_key key;
	size_t len;
	uint8_t *wire;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);
	wire = seal(&hdr, &body.base, &key, &len);
	assert_true(received_verifies(wire, len, &key));
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			bk_envelope *env;

			wire[i] ^= (uint8_t)(1u << bit);
			env = boxkite__v1__envelope__unpack(NULL, len, wire);
			if (env && bk_envelope_mac_ok(&key, env, NULL))
				fail_msg("wire byte %zu bit %d flipped, still decodes and verifies", i, bit);
			if (env)
				envelope_free(env);
			if (received_verifies(wire, len, &key))
				fail_msg("wire byte %zu bit %d flipped, still splits and verifies", i, bit);
			wire[i] ^= (uint8_t)(1u << bit);
		}
	}
	free(wire);
	bk_key_clear(&key);
}

/* Pack the whole Envelope with protobuf-c: hdr's fields plus body, mac and data. */
static uint8_t *pack_whole(const bk_envelope *hdr, const uint8_t *body, size_t body_len, const uint8_t *mac,
			   const uint8_t *data, size_t data_len, size_t *len)
{
	bk_envelope whole = *hdr;
	uint8_t *out;

	whole.body.data = (uint8_t *)body;
	whole.body.len = body_len;
	whole.mac.data = (uint8_t *)mac;
	whole.mac.len = mac ? BK_MAC_LEN : 0;
	whole.data.data = (uint8_t *)data;
	whole.data.len = data_len;
	out = malloc(protobuf_c_message_get_packed_size(&whole.base));
	assert_non_null(out);
	*len = protobuf_c_message_pack(&whole.base, out);
	return out;
}

static void seal_matches_protobuf_c_packing(const ProtobufCMessage *body, size_t data_len, const bk_key *key)
{
	bk_envelope hdr = full_header();
	uint8_t body_wire[512], mac[BK_MAC_LEN];
	size_t body_len = body ? protobuf_c_message_pack(body, body_wire) : 0;
	size_t sealed_len, whole_len;
	uint8_t *sealed, *whole;
	bk_digest d;

	sealed = seal_data(&hdr, body, data_len, key, &sealed_len);
	assert_int_equal(bk_digest_of(test_data, data_len, &d), 0);
	if (key)
		assert_int_equal(bk_envelope_mac(key, &hdr, body_wire, body_len, &d, mac), 0);
	whole = pack_whole(&hdr, body_wire, body_len, key ? mac : NULL, test_data, data_len, &whole_len);
	assert_int_equal(sealed_len, whole_len);
	assert_memory_equal(sealed, whole, whole_len);
	free(sealed);
	free(whole);
}

static void seal_is_byte_identical_to_protobuf_c(void **state)
{
	Boxkite__V1__ExecRequest exec = exec_body();
	Boxkite__V1__ExecRequest wide = exec_body();
	Boxkite__V1__HealthRequest empty = BOXKITE__V1__HEALTH_REQUEST__INIT;
	static char shell[200]; /* a body over 127 bytes: a two-byte length varint */
	bk_key key;

	(void)state;
	memset(shell, 'x', sizeof(shell) - 1);
	wide.shell = shell;
	unit_key(&key, "k1", 0x01, 32);
	for (size_t data_len = 0; data_len <= sizeof(test_data); data_len += sizeof(test_data) / 2) {
		seal_matches_protobuf_c_packing(&exec.base, data_len, &key);
		seal_matches_protobuf_c_packing(&wide.base, data_len, &key);
		seal_matches_protobuf_c_packing(&empty.base, data_len, &key); /* packs to 0 bytes: no body field */
		seal_matches_protobuf_c_packing(NULL, data_len, &key);
		seal_matches_protobuf_c_packing(&exec.base, data_len, NULL);
	}
	bk_key_clear(&key);
}

static void seal_without_key_has_no_mac_field(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	bk_envelope *env;
	size_t len;
	uint8_t *wire = malloc(bk_envelope_sealed_size(&hdr, &body.base, 0, false));

	(void)state;
	assert_non_null(wire);
	len = bk_envelope_seal(&hdr, &body.base, NULL, wire);
	assert_int_equal(len, bk_envelope_sealed_size(&hdr, &body.base, 0, true) - 2 - BK_MAC_LEN);
	env = unpack(wire, len);
	assert_int_equal(env->mac.len, 0);
	assert_int_not_equal(env->body.len, 0);
	assert_null(env->base.unknown_fields);
	envelope_free(env);
	free(wire);
}

/* --- splitting a received message ------------------------------------------------------------ */

static void split_finds_the_data_in_place(void **state)
{
	Boxkite__V1__ExecRequest body = exec_body();
	bk_envelope hdr = full_header();
	const uint8_t *data;
	size_t len, fields_len, data_len;
	uint8_t *wire;
	bk_key key;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);
	wire = seal(&hdr, &body.base, &key, &len);
	assert_int_equal(bk_envelope_split(wire, len, &fields_len, &data, &data_len), 0);
	assert_ptr_equal(data, wire + len - sizeof(test_data));
	assert_int_equal(data_len, sizeof(test_data));
	assert_int_equal(fields_len, len - sizeof(test_data) - 3); /* tag, two-byte length */
	free(wire);
	/* No data field: all of it is fields. */
	wire = seal_data(&hdr, &body.base, 0, &key, &len);
	assert_int_equal(bk_envelope_split(wire, len, &fields_len, &data, &data_len), 0);
	assert_int_equal(fields_len, len);
	assert_null(data);
	assert_int_equal(data_len, 0);
	free(wire);
	bk_key_clear(&key);
}

/* The data field only as sealing writes it: last, non-empty, a one-byte tag and the shortest
 * length. Anything else is not canonical, and would let two readers see different data. */
static void split_refuses_a_data_field_written_otherwise(void **state)
{
	bk_envelope hdr = full_header();
	const uint8_t *data;
	size_t len, fields_len, data_len;
	uint8_t wire[1024], *p;

	(void)state;
	len = protobuf_c_message_pack(&hdr.base, wire);
	p = wire + len;
	/* Data, then a MAC field after it. */
	memcpy(p, "\x62\x02" "ab" "\x5a\x01" "m", 7);
	assert_int_equal(bk_envelope_split(wire, len + 7, &fields_len, &data, &data_len), -EBADMSG);
	/* Twice. */
	memcpy(p, "\x62\x01" "a" "\x62\x01" "b", 6);
	assert_int_equal(bk_envelope_split(wire, len + 6, &fields_len, &data, &data_len), -EBADMSG);
	/* Present but empty. */
	memcpy(p, "\x62\x00", 2);
	assert_int_equal(bk_envelope_split(wire, len + 2, &fields_len, &data, &data_len), -EBADMSG);
	/* A padded length (0x82 0x00 is 2), a padded tag (0xe2 0x00 is field 12, wire type 2). */
	memcpy(p, "\x62\x82\x00" "ab", 5);
	assert_int_equal(bk_envelope_split(wire, len + 5, &fields_len, &data, &data_len), -EBADMSG);
	memcpy(p, "\xe2\x00\x02" "ab", 5);
	assert_int_equal(bk_envelope_split(wire, len + 5, &fields_len, &data, &data_len), -EBADMSG);
	/* Longer than the message, or cut short. */
	memcpy(p, "\x62\x05" "ab", 4);
	assert_int_equal(bk_envelope_split(wire, len + 4, &fields_len, &data, &data_len), -EBADMSG);
	memcpy(p, "\x62", 1);
	assert_int_equal(bk_envelope_split(wire, len + 1, &fields_len, &data, &data_len), -EBADMSG);
	/* Field 12 with another wire type; an unknown wire type; a runaway varint. */
	memcpy(p, "\x60\x05", 2);
	assert_int_equal(bk_envelope_split(wire, len + 2, &fields_len, &data, &data_len), 0);
	assert_int_equal(fields_len, len + 2); /* left to the decoder, which refuses it */
	bk_envelope *env = boxkite__v1__envelope__unpack(NULL, fields_len, wire);
	assert_true(!env || env->base.n_unknown_fields || protobuf_c_message_get_packed_size(&env->base) != fields_len);
	if (env)
		envelope_free(env);
	memcpy(p, "\x67\x05", 2);
	assert_int_equal(bk_envelope_split(wire, len + 2, &fields_len, &data, &data_len), -EBADMSG);
	memset(p, 0xff, 11);
	assert_int_equal(bk_envelope_split(wire, len + 11, &fields_len, &data, &data_len), -EBADMSG);
	/* And the one good form. */
	memcpy(p, "\x62\x02" "ab", 4);
	assert_int_equal(bk_envelope_split(wire, len + 4, &fields_len, &data, &data_len), 0);
	assert_int_equal(fields_len, len);
	assert_int_equal(data_len, 2);
	assert_memory_equal(data, "ab", 2);
}

static void digest_is_length_and_sha256(void **state)
{
	/* SHA-256 of "abc" and of nothing (FIPS 180-2's examples). */
	static const char abc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	static const char none[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	char hex[2 * BK_SHA256_LEN + 1];
	bk_digest d;

	(void)state;
	assert_int_equal(bk_digest_of((const uint8_t *)"abc", 3, &d), 0);
	assert_int_equal(d.len, 3);
	assert_string_equal(unit_hex(d.sha256, BK_SHA256_LEN, hex), abc);
	assert_int_equal(bk_digest_of(NULL, 0, &d), 0);
	assert_int_equal(d.len, 0);
	assert_string_equal(unit_hex(d.sha256, BK_SHA256_LEN, hex), none);
}

static void mac_of(const bk_key *key, const bk_envelope *env, const char *body, uint8_t mac[BK_MAC_LEN])
{
	assert_int_equal(bk_envelope_mac(key, env, (const uint8_t *)body, strlen(body), NULL, mac), 0);
}

/* Bytes moved from the end of one variable field to the start of the next must change the MAC:
 * each variable field carries its length. */
static void length_prefixes_keep_fields_apart(void **state)
{
	bk_envelope a = full_header(), b = full_header();
	uint8_t mac_a[BK_MAC_LEN], mac_b[BK_MAC_LEN];
	uint8_t nonce_a[17], nonce_b[15];
	bk_key key;

	(void)state;
	unit_key(&key, "k1", 0x01, 32);

	a.key_id = "ab", a.method = "c";
	b.key_id = "a", b.method = "bc";
	mac_of(&key, &a, "", mac_a);
	mac_of(&key, &b, "", mac_b);
	assert_memory_not_equal(mac_a, mac_b, BK_MAC_LEN);

	a = full_header(), b = full_header();
	a.method = "Exec", a.message = "x";
	b.method = "Exe", b.message = "cx";
	mac_of(&key, &a, "", mac_a);
	mac_of(&key, &b, "", mac_b);
	assert_memory_not_equal(mac_a, mac_b, BK_MAC_LEN);

	a = full_header(), b = full_header();
	a.message = "ab";
	b.message = "a";
	mac_of(&key, &a, "", mac_a);
	mac_of(&key, &b, "b", mac_b);
	assert_memory_not_equal(mac_a, mac_b, BK_MAC_LEN);

	a = full_header(), b = full_header();
	memset(nonce_a, 'n', sizeof(nonce_a));
	memset(nonce_b, 'n', sizeof(nonce_b));
	a.nonce.data = nonce_a, a.nonce.len = sizeof(nonce_a), a.method = "x";
	b.nonce.data = nonce_b, b.nonce.len = sizeof(nonce_b), b.method = "nnx";
	mac_of(&key, &a, "", mac_a);
	mac_of(&key, &b, "", mac_b);
	assert_memory_not_equal(mac_a, mac_b, BK_MAC_LEN);

	/* The body's last byte as the data's first. */
	a = full_header(), b = full_header();
	b.data.data = (uint8_t *)"b", b.data.len = 1;
	mac_of(&key, &a, "ab", mac_a);
	mac_of(&key, &b, "a", mac_b);
	assert_memory_not_equal(mac_a, mac_b, BK_MAC_LEN);

	bk_key_clear(&key);
}

/* --- time window ------------------------------------------------------------------------- */

#define WINDOW 30000

static void window_edges_are_inclusive(void **state)
{
	(void)state;
	assert_int_equal(bk_envelope_check_time(T0, T0, WINDOW), BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(T0 - WINDOW, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(T0 + WINDOW, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(T0 - WINDOW - 1, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(T0 + WINDOW + 1, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
	assert_int_equal(bk_envelope_check_time(T0, T0, 0), BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(T0 - 1, T0, 0), BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(T0 + 1, T0, 0), BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
}

/* The sanitizer build traps on signed overflow, so these also prove no overflow happens. */
static void window_survives_extreme_timestamps(void **state)
{
	(void)state;
	assert_int_equal(bk_envelope_check_time(INT64_MIN, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, T0, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
	assert_int_equal(bk_envelope_check_time(INT64_MIN, INT64_MAX, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, INT64_MIN, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
	/* 2^64 - 1 apart is more than even the largest window. */
	assert_int_equal(bk_envelope_check_time(INT64_MIN, INT64_MAX, INT64_MAX),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, INT64_MIN, INT64_MAX),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
	/* The edges still hold next to the ends of the range. */
	assert_int_equal(bk_envelope_check_time(INT64_MIN, INT64_MIN + WINDOW, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(INT64_MIN, INT64_MIN + WINDOW + 1, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, INT64_MAX - WINDOW, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, INT64_MAX - WINDOW - 1, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE);
	assert_int_equal(bk_envelope_check_time(INT64_MIN, INT64_MIN, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
	assert_int_equal(bk_envelope_check_time(INT64_MAX, INT64_MAX, WINDOW),
			 BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE);
}

/* --- arena ------------------------------------------------------------------------------- */

/* An Envelope whose body is body_len bytes, packed into a malloc'd buffer. */
static uint8_t *envelope_with_body(size_t body_len, size_t *len)
{
	bk_envelope hdr = full_header();
	uint8_t *body = malloc(body_len), *wire;

	assert_non_null(body);
	memset(body, 0x5a, body_len);
	wire = pack_whole(&hdr, body, body_len, NULL, NULL, 0, len);
	free(body);
	return wire;
}

static void arena_cap_refuses_a_larger_message(void **state)
{
	size_t len;
	uint8_t *wire = envelope_with_body(64 * 1024, &len);
	bk_arena *arena;
	bk_envelope *env;

	(void)state;
	/* A cap below the body: the decoder gets NULL for it and fails cleanly. */
	arena = bk_arena_new(16 * 1024);
	assert_non_null(arena);
	env = boxkite__v1__envelope__unpack(bk_arena_allocator(arena), len, wire);
	assert_null(env);
	assert_true(bk_arena_used(arena) <= 16 * 1024);
	bk_arena_free(arena);

	/* A cap with room: the same bytes decode, all of it inside the cap. */
	arena = bk_arena_new(128 * 1024);
	assert_non_null(arena);
	env = boxkite__v1__envelope__unpack(bk_arena_allocator(arena), len, wire);
	assert_non_null(env);
	assert_int_equal(env->body.len, 64 * 1024);
	assert_string_equal(env->method, "Exec");
	assert_true(bk_arena_used(arena) >= 64 * 1024);
	assert_true(bk_arena_used(arena) <= 128 * 1024);
	bk_arena_free(arena); /* frees env with it: no free_unpacked */
	free(wire);
}

/* Many small allocations spill over several blocks; the cap counts all of them. */
static void arena_cap_counts_many_small_allocations(void **state)
{
	enum { N = 5000 };
	Boxkite__V1__ExecRequest req = BOXKITE__V1__EXEC_REQUEST__INIT;
	char **argv = calloc(N, sizeof(*argv));
	Boxkite__V1__ExecRequest *got;
	size_t len, decoded;
	uint8_t *wire;
	bk_arena *arena;

	(void)state;
	assert_non_null(argv);
	for (size_t i = 0; i < N; i++)
		argv[i] = "x";
	req.argv = argv;
	req.n_argv = N;
	wire = malloc(protobuf_c_message_get_packed_size(&req.base));
	assert_non_null(wire);
	len = protobuf_c_message_pack(&req.base, wire);

	arena = bk_arena_new(SIZE_MAX);
	got = boxkite__v1__exec_request__unpack(bk_arena_allocator(arena), len, wire);
	assert_non_null(got);
	assert_int_equal(got->n_argv, N);
	assert_string_equal(got->argv[N - 1], "x");
	decoded = bk_arena_used(arena);
	assert_true(decoded > 4096); /* more than one block */
	bk_arena_free(arena);

	arena = bk_arena_new(decoded - 1);
	assert_null(boxkite__v1__exec_request__unpack(bk_arena_allocator(arena), len, wire));
	assert_true(bk_arena_used(arena) < decoded);
	bk_arena_free(arena);

	arena = bk_arena_new(decoded);
	got = boxkite__v1__exec_request__unpack(bk_arena_allocator(arena), len, wire);
	assert_non_null(got);
	assert_int_equal(bk_arena_used(arena), decoded);
	bk_arena_free(arena);

	free(wire);
	free(argv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seal_unpack_verify_round_trip),
		cmocka_unit_test(any_changed_field_fails_verification),
		cmocka_unit_test(any_flipped_mac_bit_fails_verification),
		cmocka_unit_test(any_flipped_wire_bit_is_detected),
		cmocka_unit_test(seal_is_byte_identical_to_protobuf_c),
		cmocka_unit_test(seal_without_key_has_no_mac_field),
		cmocka_unit_test(split_finds_the_data_in_place),
		cmocka_unit_test(split_refuses_a_data_field_written_otherwise),
		cmocka_unit_test(digest_is_length_and_sha256),
		cmocka_unit_test(length_prefixes_keep_fields_apart),
		cmocka_unit_test(window_edges_are_inclusive),
		cmocka_unit_test(window_survives_extreme_timestamps),
		cmocka_unit_test(arena_cap_refuses_a_larger_message),
		cmocka_unit_test(arena_cap_counts_many_small_allocations),
	};

	test_data_fill();
	return cmocka_run_group_tests_name("envelope", tests, NULL, NULL);
}
