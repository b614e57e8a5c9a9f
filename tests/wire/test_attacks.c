/* Attacks on the envelope and the dispatch pipeline, sent by a raw nng REQ peer that forges its
 * bytes (tests/wire/fixture.h). Each refusal is asserted by status, StatusDetail, whether the
 * answer is MAC'd (only once the request's MAC verified) and by the handler counters not moving:
 * a refused request ran nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fixture.h"

/* A 5 s window: stale and future stamps need not be far off. */
static const char *const flags_keyed[] = { "--window", "5", NULL };
/* No answer fits: a re-sent request cannot be answered from the cache. */
static const char *const flags_answer_cap[] = { "--replay-answer-cap", "1", NULL };
static const char *const flags_small_message[] = { "--max-message", "4K", NULL };
/* Room to decode 64 KiB per request: a small message that decodes large can exceed it. */
static const char *const flags_decode_cap[] = { "--decode-cap", "64K", NULL };

static int setup_keyed(void **state)
{
	return wire_start((wire **)state, true, flags_keyed);
}

static int setup_answer_cap(void **state)
{
	return wire_start((wire **)state, true, flags_answer_cap);
}

static int setup_small_message(void **state)
{
	return wire_start((wire **)state, true, flags_small_message);
}

static int setup_decode_cap(void **state)
{
	return wire_start((wire **)state, true, flags_decode_cap);
}

static int setup_claim(void **state)
{
	return wire_start_claim((wire **)state);
}

static int setup_unkeyed(void **state)
{
	return wire_start((wire **)state, false, NULL);
}

/* --- helpers -------------------------------------------------------------------------------- */

/* Deterministic garbage: a failure reproduces with the same bytes. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static size_t varint_len(size_t v)
{
	size_t n = 1;

	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}

/* A body of exactly `total` bytes: one length-delimited field with tag byte `tag` filled with
 * 'x'. Tag 0x2a is ExecRequest.stdin; tag 0x7a is field 15, unknown to every request type, which
 * the decoder skips. */
static uint8_t *field_body(uint8_t tag, size_t total)
{
	size_t n = total - 2, at = 1;
	uint8_t *b = malloc(total);

	assert_non_null(b);
	while (1 + varint_len(n) + n > total)
		n--;
	assert_int_equal(1 + varint_len(n) + n, total);
	b[0] = tag;
	for (size_t v = n; ; v >>= 7) {
		b[at++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
		if (v < 0x80)
			break;
	}
	memset(b + at, 'x', n);
	return b;
}

/* A keyed Exec of `true` as libboxkite seals it; hdr and nonce describe it. */
static uint8_t *exec_request(wire *w, bk_envelope *hdr, uint8_t nonce[BK_NONCE_LEN], size_t *len)
{
	static char *argv[] = { "true" };
	Boxkite__V1__ExecRequest req = BOXKITE__V1__EXEC_REQUEST__INIT;

	req.n_argv = 1;
	req.argv = argv;
	wire_header(hdr, nonce, "Exec", WIRE_KEY_ID);
	return wire_seal(hdr, &req.base, w->key, len);
}

/* Send req and assert it was served: OK, MAC'd under key (or not, when NULL), and exactly one
 * handler ran. */
static void expect_served(wire *w, const uint8_t *req, size_t len, const uint8_t *nonce, const char *method,
			  const bk_key *key)
{
	unsigned long runs = wire_handler_runs(w);
	_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(w, req, len);

	wire_assert_answer(ans, BK_OK, BK_DETAIL_NONE, nonce, method, key);
	assert_int_equal(wire_handler_runs(w), runs + 1);
}

/* A valid unkeyed Health: the server still serves. */
static void expect_alive(wire *w)
{
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = NULL;

	wire_header(&hdr, nonce, "Health", "");
	req = wire_forge(&hdr, NULL, 0, NULL, &len);
	expect_served(w, req, len, nonce, "Health", NULL);
}

/* --- the happy paths the attacks are measured against --------------------------------------- */

static void test_keyed_exec_reaches_handler(void **state)
{
	wire *w = *state;
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(w, req, len);
	Boxkite__V1__ExecResponse *resp;

	wire_assert_answer(ans, BK_OK, BK_DETAIL_NONE, nonce, "Exec", w->key);
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs + 1);
	assert_int_equal(atomic_load(&wire_method(w, "Exec")->calls), 1);
	resp = boxkite__v1__exec_response__unpack(NULL, ans->body.len, ans->body.data);
	assert_non_null(resp);
	assert_int_equal(resp->exit_code, 0);
	boxkite__v1__exec_response__free_unpacked(resp, NULL);
}

static void test_health_unkeyed_and_keyed(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *unkeyed = NULL, *keyed = NULL;

	wire_header(&hdr, nonce, "Health", "");
	unkeyed = wire_forge(&hdr, NULL, 0, NULL, &len);
	expect_served(w, unkeyed, len, nonce, "Health", NULL);

	wire_header(&hdr, nonce, "Health", WIRE_KEY_ID);
	keyed = wire_forge(&hdr, NULL, 0, w->key, &len);
	expect_served(w, keyed, len, nonce, "Health", w->key);
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), 2);
}

/* --- replay --------------------------------------------------------------------------------- */

/* The same sealed bytes twice: the second is answered from the replay cache, byte for byte, and
 * the handler ran once. This is what makes nng's REQ resend safe. */
static void test_replay_answered_from_cache(void **state)
{
	wire *w = *state;
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	nng_msg *first = NULL, *second = NULL;

	assert_int_equal(wire_send(w, req, len, WIRE_TIMEOUT_MS, &first), 0);
	assert_int_equal(wire_send(w, req, len, WIRE_TIMEOUT_MS, &second), 0);
	assert_int_equal(nng_msg_len(first), nng_msg_len(second));
	assert_memory_equal(nng_msg_body(first), nng_msg_body(second), nng_msg_len(first));
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs + 1);
	assert_int_equal(atomic_load(&wire_method(w, "Exec")->calls), 1);
	{
		_cleanup_(wire_envelope_freep) bk_envelope *ans =
			boxkite__v1__envelope__unpack(NULL, nng_msg_len(first), nng_msg_body(first));
		assert_non_null(ans);
		wire_assert_answer(ans, BK_OK, BK_DETAIL_NONE, nonce, "Exec", w->key);
	}
	nng_msg_free(first);
	nng_msg_free(second);
}

/* With no room to keep answers, the re-sent request is refused as REPLAYED (MAC'd: it carried a
 * valid MAC) and the handler still ran once. */
static void test_replay_refused_when_answer_not_kept(void **state)
{
	wire *w = *state;
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);

	expect_served(w, req, len, nonce, "Exec", w->key);
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_REPLAYED, nonce, "Exec", w->key);
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_REPLAYED, nonce, "Exec", w->key);
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs + 1);
}

static bk_call *_Atomic parked_call;

/* An Exec handler that holds its call, as a slow command would, until the test ends it. */
static void parking_exec(bk_call *call, const ProtobufCMessage *request)
{
	(void)request;
	atomic_fetch_add(&wire_exec_runs, 1);
	atomic_store(&parked_call, call);
}

static void ctx_send(nng_ctx ctx, nng_aio *aio, const uint8_t *req, size_t len)
{
	nng_msg *msg = NULL;

	assert_int_equal(nng_msg_alloc(&msg, len), 0);
	memcpy(nng_msg_body(msg), req, len);
	nng_aio_set_msg(aio, msg);
	nng_ctx_send(ctx, aio);
	nng_aio_wait(aio);
	assert_int_equal(nng_aio_result(aio), 0);
}

/* A duplicate that arrives while the original is still running is dropped without an answer
 * (the original answers), never run a second time; once answered, a third copy gets the cached
 * answer. */
static void test_replay_in_flight_duplicate_dropped(void **state)
{
	const struct timespec tick = { .tv_nsec = 1000000 };
	wire *w = *state;
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	Boxkite__V1__ExecResponse resp = BOXKITE__V1__EXEC_RESPONSE__INIT;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	nng_ctx original, duplicate;
	nng_aio *aio_original = NULL, *aio_duplicate = NULL;
	nng_msg *answer = NULL, *again = NULL;
	bk_call *call;

	wire_method(w, "Exec")->handler = parking_exec;
	atomic_store(&parked_call, NULL);
	assert_int_equal(nng_ctx_open(&original, w->req), 0);
	assert_int_equal(nng_ctx_open(&duplicate, w->req), 0);
	assert_int_equal(nng_aio_alloc(&aio_original, NULL, NULL), 0);
	assert_int_equal(nng_aio_alloc(&aio_duplicate, NULL, NULL), 0);

	ctx_send(original, aio_original, req, len);
	nng_aio_set_timeout(aio_original, WIRE_TIMEOUT_MS);
	nng_ctx_recv(original, aio_original);
	for (int i = 0; i < WIRE_TIMEOUT_MS && !atomic_load(&parked_call); i++)
		nanosleep(&tick, NULL);
	call = atomic_load(&parked_call);
	assert_non_null(call);

	/* A second is ample for the duplicate to meet the in-flight entry and be dropped. Were it
	 * slower, it would get the cached answer after the release below, too late for this
	 * receive: the test would still hold, it just would not have exercised the drop. */
	ctx_send(duplicate, aio_duplicate, req, len);
	nng_aio_set_timeout(aio_duplicate, 1000);
	nng_ctx_recv(duplicate, aio_duplicate);
	nng_aio_wait(aio_duplicate);
	assert_int_equal(nng_aio_result(aio_duplicate), NNG_ETIMEDOUT);
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs + 1);
	assert_ptr_equal(atomic_load(&parked_call), call);

	bk_call_reply(call, &resp.base);
	nng_aio_wait(aio_original);
	assert_int_equal(nng_aio_result(aio_original), 0);
	answer = nng_aio_get_msg(aio_original);
	{
		_cleanup_(wire_envelope_freep) bk_envelope *ans =
			boxkite__v1__envelope__unpack(NULL, nng_msg_len(answer), nng_msg_body(answer));
		assert_non_null(ans);
		wire_assert_answer(ans, BK_OK, BK_DETAIL_NONE, nonce, "Exec", w->key);
	}
	assert_int_equal(wire_send(w, req, len, WIRE_TIMEOUT_MS, &again), 0);
	assert_int_equal(nng_msg_len(again), nng_msg_len(answer));
	assert_memory_equal(nng_msg_body(again), nng_msg_body(answer), nng_msg_len(answer));
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs + 1);

	nng_msg_free(answer);
	nng_msg_free(again);
	nng_aio_free(aio_original);
	nng_aio_free(aio_duplicate);
	nng_ctx_close(original);
	nng_ctx_close(duplicate);
}

/* --- time window ---------------------------------------------------------------------------- */

static void test_time_stale(void **state)
{
	wire *w = *state;

	wire_expect_time_refusal(w, bk_clock_realtime_ms() - 7000, BK_DETAIL_STALE);
	wire_expect_time_refusal(w, 0, BK_DETAIL_STALE);
	wire_expect_time_refusal(w, -1, BK_DETAIL_STALE);
}

static void test_time_future(void **state)
{
	wire *w = *state;

	wire_expect_time_refusal(w, bk_clock_realtime_ms() + 7000, BK_DETAIL_FUTURE);
}

/* The control for the two above: skew inside the window either way is accepted. */
static void test_time_inside_window(void **state)
{
	wire *w = *state;
	int64_t skews[] = { -3000, 3000 };

	for (size_t i = 0; i < BK_ARRAY_SIZE(skews); i++) {
		bk_envelope hdr;
		uint8_t nonce[BK_NONCE_LEN];
		size_t blen, len;
		_cleanup_free_ uint8_t *body = wire_exec_body(&blen), *req = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		hdr.timestamp_ms += skews[i];
		req = wire_forge(&hdr, body, blen, w->key, &len);
		expect_served(w, req, len, nonce, "Exec", w->key);
	}
}

/* --- MAC ------------------------------------------------------------------------------------ */

static void test_bad_mac_body_byte(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	uint8_t *arg = memmem(req, len, "true", 4);

	assert_non_null(arg);
	arg[0] ^= 0x01; /* "urue": still a valid ExecRequest, so only the MAC can catch it */
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
}

static void test_bad_mac_header_byte(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	uint8_t *at_nonce = memmem(req, len, nonce, BK_NONCE_LEN);
	uint8_t *at_key = memmem(req, len, WIRE_KEY_ID, strlen(WIRE_KEY_ID));

	/* A nonce byte: the answer echoes the nonce as received. */
	assert_non_null(at_nonce);
	at_nonce[3] ^= 0x01;
	nonce[3] ^= 0x01;
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
	at_nonce[3] ^= 0x01;
	nonce[3] ^= 0x01;

	/* The timestamp's lowest bit (the varint after the key id's tag 0x20): one millisecond off. */
	assert_non_null(at_key);
	assert_int_equal(at_key[strlen(WIRE_KEY_ID)], 0x20);
	at_key[strlen(WIRE_KEY_ID) + 1] ^= 0x01;
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
}

static void test_bad_mac_mac_byte(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);

	req[len - 1] ^= 0x80;
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
}

/* The right key id with another secret; a MAC one byte short; no MAC at all; one byte long (a
 * MAC longer than 32 bytes is not an Envelope the server accepts at all). */
static void test_bad_mac_wrong_secret_or_length(void **state)
{
	wire *w = *state;
	static const uint8_t secret[32] = { 1, 2, 3 };
	bk_key impostor;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN], mac[BK_MAC_LEN + 1] = { 0 };
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen), *forged = NULL, *short_mac = NULL, *no_mac = NULL,
			       *long_mac = NULL;

	assert_int_equal(bk_key_init(&impostor, WIRE_KEY_ID, secret, sizeof(secret), NULL), 0);
	wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
	forged = wire_forge(&hdr, body, blen, &impostor, &len);
	wire_expect_refusal(w, forged, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
	bk_key_clear(&impostor);

	assert_int_equal(bk_envelope_mac(w->key, &hdr, body, blen, NULL, mac), 0);
	short_mac = wire_pack(&hdr, body, blen, mac, BK_MAC_LEN - 1, &len);
	wire_expect_refusal(w, short_mac, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
	no_mac = wire_pack(&hdr, body, blen, NULL, 0, &len);
	wire_expect_refusal(w, no_mac, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "Exec", NULL);
	long_mac = wire_pack(&hdr, body, blen, mac, BK_MAC_LEN + 1, &len);
	wire_expect_refusal(w, long_mac, len, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, nonce, "Exec", NULL);
}

/* Every single-bit change of a valid request, at every byte, in the low and the high bit, is
 * refused and reaches no handler. The server takes only canonical encodings, so no change can
 * decode to the same envelope under different bytes. */
static void test_bad_mac_every_byte(void **state)
{
	static const uint8_t bits[] = { 0x01, 0x80 };
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	unsigned long runs = wire_handler_runs(w);

	for (size_t i = 0; i < len; i++) {
		for (size_t b = 0; b < BK_ARRAY_SIZE(bits); b++) {
			bk_envelope *ans;

			req[i] ^= bits[b];
			ans = wire_call(w, req, len);
			req[i] ^= bits[b];
			if (ans->status == BK_OK || wire_handler_runs(w) != runs)
				fail_msg("flipping bit 0x%02x of byte %zu of %zu was served", bits[b], i, len);
			wire_envelope_free(ans);
		}
	}
	assert_int_equal(atomic_load(&wire_method(w, "Exec")->calls), 0);
}

/* req with del bytes at `at` replaced by ins. malloc'd; *out_len set. */
static uint8_t *splice(const uint8_t *req, size_t len, size_t at, size_t del, const void *ins, size_t ins_len,
		       size_t *out_len)
{
	uint8_t *out = malloc(len - del + ins_len);

	assert_non_null(out);
	assert_true(at + del <= len);
	memcpy(out, req, at);
	memcpy(out + at, ins, ins_len);
	memcpy(out + at + ins_len, req + at + del, len - at - del);
	*out_len = len - del + ins_len;
	return out;
}

/* Encodings of a valid keyed Exec that no encoder writes: an unknown field, a NUL inside the
 * method (C would MAC "Exec", another implementation "Exec\0x"), an overlong varint, a repeated
 * field, an explicit default; a data field that is empty, padded, or not last. Each decodes to
 * an envelope whose MAC verifies in C (or would, data aside), and each is refused MALFORMED
 * before the MAC is looked at — answered with nothing of the request repeated, not even its
 * nonce or method: those are what two readers could disagree on. */
static void test_non_canonical_envelope(void **state)
{
	static const uint8_t method_field[] = { 0x32, 0x04, 'E', 'x', 'e', 'c' };
	static const uint8_t mac_tag[] = { 0x5a, BK_MAC_LEN };
	static const uint8_t nul_method[] = { 0x32, 0x06, 'E', 'x', 'e', 'c', 0x00, 'x' };
	static const uint8_t unknown_field[] = { 0x78, 0x01 };
	static const uint8_t overlong_version[] = { 0x08, 0x82, 0x00 };
	static const uint8_t explicit_status[] = { 0x38, 0x00 };
	static const uint8_t empty_data[] = { 0x62, 0x00 };
	static const uint8_t padded_data[] = { 0x62, 0x81, 0x00, 'a' };
	static const uint8_t data[] = { 0x62, 0x01, 'a' };
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	const uint8_t *m = memmem(req, len, method_field, sizeof(method_field));
	const uint8_t *mac = memmem(req, len, mac_tag, sizeof(mac_tag));

	assert_non_null(m);
	assert_non_null(mac);
	assert_memory_equal(req, "\x08\x02", 2); /* the version field comes first */
	const struct {
		size_t at, del;
		const uint8_t *ins;
		size_t ins_len;
	} cases[] = {
		{ len, 0, unknown_field, sizeof(unknown_field) },
		{ (size_t)(m - req), sizeof(method_field), nul_method, sizeof(nul_method) },
		{ 0, 2, overlong_version, sizeof(overlong_version) },
		{ len, 0, method_field, sizeof(method_field) },
		{ len, 0, explicit_status, sizeof(explicit_status) },
		{ len, 0, empty_data, sizeof(empty_data) },
		{ len, 0, padded_data, sizeof(padded_data) },
		{ (size_t)(mac - req), 0, data, sizeof(data) }, /* data before the MAC */
	};

	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		size_t n;
		_cleanup_free_ uint8_t *bad = splice(req, len, cases[i].at, cases[i].del, cases[i].ins,
						     cases[i].ins_len, &n);

		wire_expect_refusal(w, bad, n, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, NULL, "", NULL);
	}
	expect_served(w, req, len, nonce, "Exec", w->key);
}

/* --- keys ----------------------------------------------------------------------------------- */

static void test_unknown_key_id(void **state)
{
	wire *w = *state;
	static const uint8_t secret[32] = { 9, 9, 9 };
	bk_key stranger;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen), *req = NULL;

	assert_int_equal(bk_key_init(&stranger, "stranger", secret, sizeof(secret), NULL), 0);
	wire_header(&hdr, nonce, "Exec", "stranger");
	req = wire_forge(&hdr, body, blen, &stranger, &len);
	bk_key_clear(&stranger);
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_UNKNOWN_KEY, nonce, "Exec", NULL);
}

/* An rpc that needs a key, sent without a key id: with no MAC, and with the right key's MAC. */
static void test_missing_key_id(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen), *bare = NULL, *macd = NULL;

	wire_header(&hdr, nonce, "Exec", "");
	bare = wire_forge(&hdr, body, blen, NULL, &len);
	wire_expect_refusal(w, bare, len, BK_UNAUTHENTICATED, BK_DETAIL_UNKNOWN_KEY, nonce, "Exec", NULL);
	wire_header(&hdr, nonce, "Exec", "");
	macd = wire_forge(&hdr, body, blen, w->key, &len);
	wire_expect_refusal(w, macd, len, BK_UNAUTHENTICATED, BK_DETAIL_UNKNOWN_KEY, nonce, "Exec", NULL);
}

/* --- framing -------------------------------------------------------------------------------- */

/* Every prefix of a valid keyed Exec. A prefix that ends inside a field does not decode
 * (MALFORMED); one that ends between fields decodes to an envelope missing the rest, refused by
 * the first check it fails. The fields come in number order: version, kind, key_id, timestamp,
 * nonce, method, then body and mac as bk_envelope_seal() appends them. */
static void test_truncated_every_prefix(void **state)
{
	static const unsigned tags[] = { 1, 2, 3, 4, 5, 6, 10, 11 };
	/* What an envelope cut just after field i lacks, and so how it is refused. */
	static const int after_field[][2] = {
		{ BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED }, /* version: kind missing */
		{ BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED }, /* kind: nonce missing */
		{ BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED }, /* key_id */
		{ BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED }, /* timestamp */
		{ BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED }, /* nonce: method missing */
		{ BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC },    /* method: keyed, no MAC */
		{ BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC },    /* body: keyed, no MAC */
	};
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len, ends[BK_ARRAY_SIZE(tags)], nfields = 0, at = 0;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);

	/* Find where each field ends: a one-byte tag, then a varint or a length and that many bytes. */
	while (at < len) {
		uint64_t v = 0;
		unsigned shift = 0, tag = req[at] >> 3, type = req[at] & 7;

		assert_true(nfields < BK_ARRAY_SIZE(tags));
		assert_int_equal(tag, tags[nfields]);
		at++;
		do {
			v |= (uint64_t)(req[at] & 0x7f) << shift;
			shift += 7;
		} while (req[at++] & 0x80);
		if (type == 2)
			at += v;
		ends[nfields++] = at;
	}
	assert_int_equal(nfields, BK_ARRAY_SIZE(tags));
	assert_int_equal(ends[nfields - 1], len);

	wire_expect_refusal(w, req, 0, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_VERSION, NULL, "", NULL);
	for (size_t cut = 1; cut < len; cut++) {
		int status = BK_INVALID_ARGUMENT, detail = BK_DETAIL_MALFORMED;
		const uint8_t *echo = NULL;
		const char *method = "";

		for (size_t f = 0; f + 1 < nfields; f++) {
			if (ends[f] == cut) {
				status = after_field[f][0];
				detail = after_field[f][1];
			}
			/* The answer echoes the nonce and the method once the envelope decoded with them. */
			if (ends[f] == cut && f >= 4)
				echo = nonce;
			if (ends[f] == cut && f >= 5)
				method = "Exec";
		}
		wire_expect_refusal(w, req, cut, status, detail, echo, method, NULL);
	}
}

/* A body of the method's max_body passes the size check; one byte more is refused before it is
 * decoded, and the refusal is MAC'd when the request was. Exec (8 MiB) with stdin is served;
 * Health (1 KiB, no fields) gets as far as decoding, where its unknown field is refused. */
static void test_body_over_method_limit(void **state)
{
	static const struct {
		const char *method;
		uint8_t tag;
		bool keyed;
		int fits; /* the detail a body of max_body gets: NONE for served */
	} cases[] = {
		{ "Health", 0x7a, false, BK_DETAIL_BAD_BODY },
		{ "Health", 0x7a, true, BK_DETAIL_BAD_BODY },
		{ "Exec", 0x2a, true, BK_DETAIL_NONE },
	};
	wire *w = *state;

	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		const bk_key *key = cases[i].keyed ? w->key : NULL;
		size_t max = wire_method(w, cases[i].method)->max_body, len;
		bk_envelope hdr;
		uint8_t nonce[BK_NONCE_LEN];
		_cleanup_free_ uint8_t *fits = field_body(cases[i].tag, max), *over = field_body(cases[i].tag, max + 1);
		_cleanup_free_ uint8_t *req_fits = NULL, *req_over = NULL;

		wire_header(&hdr, nonce, cases[i].method, key ? WIRE_KEY_ID : "");
		req_fits = wire_forge(&hdr, fits, max, key, &len);
		if (cases[i].fits == BK_DETAIL_NONE)
			expect_served(w, req_fits, len, nonce, cases[i].method, key);
		else
			wire_expect_refusal(w, req_fits, len, BK_INVALID_ARGUMENT, cases[i].fits, nonce, cases[i].method,
					    key);
		wire_header(&hdr, nonce, cases[i].method, key ? WIRE_KEY_ID : "");
		req_over = wire_forge(&hdr, over, max + 1, key, &len);
		wire_expect_refusal(w, req_over, len, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, nonce,
				    cases[i].method, key);
	}
}

/* A FileUploadChunk request as a client forges it: body and data, MAC'd over both. */
static uint8_t *chunk_request(wire *w, bk_envelope *hdr, uint8_t nonce[BK_NONCE_LEN], const uint8_t *data,
			      size_t data_len, size_t *len)
{
	Boxkite__V1__FileUploadChunkRequest rq = BOXKITE__V1__FILE_UPLOAD_CHUNK_REQUEST__INIT;
	uint8_t body[64];
	size_t blen;

	rq.upload_id = "00112233445566778899aabbccddeeff";
	blen = protobuf_c_message_pack(&rq.base, body);
	wire_header(hdr, nonce, "FileUploadChunk", WIRE_KEY_ID);
	hdr->data.data = (uint8_t *)data;
	hdr->data.len = data_len;
	return wire_forge(hdr, body, blen, w->key, len);
}

/* The data field: covered by the MAC (one changed byte, or bytes cut, is BAD_MAC), allowed only
 * to the method that takes it and up to its limit (beyond: OVERSIZED; to another method,
 * BAD_BODY — both MAC'd), and refused unMAC'd to unkeyed Health. A chunk that passes reaches its
 * handler, which here has no executor to serve it. */
static void test_data_field(void **state)
{
	wire *w = *state;
	size_t max = wire_method(w, "FileUploadChunk")->max_data, len, blen;
	_cleanup_free_ uint8_t *data = malloc(max + 1), *body = wire_exec_body(&blen);
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	unsigned long runs;

	assert_non_null(data);
	assert_int_equal(max, 4 * 1024 * 1024 + 64 * 1024);
	memset(data, 'd', max + 1);
	{
		_cleanup_free_ uint8_t *req = chunk_request(w, &hdr, nonce, data, max, &len);
		_cleanup_(wire_envelope_freep) bk_envelope *ans = NULL;

		runs = wire_handler_runs(w);
		ans = wire_call(w, req, len);
		wire_assert_answer(ans, BK_UNAVAILABLE, BK_DETAIL_NONE, nonce, "FileUploadChunk", w->key);
		assert_int_equal(wire_handler_runs(w), runs + 1);
		assert_non_null(strstr(ans->message, "no executor"));
	}
	{
		_cleanup_free_ uint8_t *req = chunk_request(w, &hdr, nonce, data, 1000, &len);

		req[len - 500] ^= 0x01;
		wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "FileUploadChunk", NULL);
	}
	{
		_cleanup_free_ uint8_t *req = chunk_request(w, &hdr, nonce, data, 1000, &len);

		/* The last byte cut, its length field one less: the same fields, other data. */
		req[len - 1000 - 1] = (uint8_t)(999 >> 7);
		req[len - 1000 - 2] = (uint8_t)(0x80 | (999 & 0x7f));
		wire_expect_refusal(w, req, len - 1, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, nonce, "FileUploadChunk",
				    NULL);
	}
	{
		_cleanup_free_ uint8_t *req = chunk_request(w, &hdr, nonce, data, max + 1, &len);

		wire_expect_refusal(w, req, len, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, nonce, "FileUploadChunk",
				    w->key);
	}
	{
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		hdr.data.data = data;
		hdr.data.len = 1;
		req = wire_forge(&hdr, body, blen, w->key, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, nonce, "Exec", w->key);
	}
	{
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, "Health", "");
		hdr.data.data = data;
		hdr.data.len = 1;
		req = wire_forge(&hdr, NULL, 0, NULL, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, nonce, "Health", NULL);
	}
	expect_alive(w);
}

/* A message above --max-message never reaches dispatch: nng drops it and closes the
 * connection, the peer gets no answer, and the server goes on serving the next request. */
static void test_message_over_max_message(void **state)
{
	wire *w = *state;
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *body = field_body(0x2a, 8192), *req = NULL;
	nng_msg *answer = NULL;

	assert_int_equal(w->cfg.max_message, 4096);
	wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
	req = wire_forge(&hdr, body, 8192, w->key, &len);
	assert_int_equal(wire_send(w, req, len, 1000, &answer), NNG_ETIMEDOUT);
	assert_int_equal(wire_handler_runs(w), 0);
	expect_alive(w);
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs);
}

/* An Envelope that decodes to more than --decode-cap (64 KiB): eight thousand one-byte unknown
 * fields, 16 KB on the wire, each kept by the decoder in a record of its own. Refused as too
 * large before anything else is looked at. */
static void test_envelope_over_decode_cap(void **state)
{
	wire *w = *state;
	uint8_t fields[16000];

	for (size_t i = 0; i < sizeof(fields); i += 2) {
		fields[i] = 0x78; /* field 15, varint: unknown to Envelope */
		fields[i + 1] = 0x00;
	}
	wire_expect_refusal(w, fields, sizeof(fields), BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, NULL, "", NULL);
	expect_alive(w);
}

/* Authenticated Exec bodies that decode to more than --decode-cap (64 KiB) with the envelope:
 * one 40 000-byte argv string, and eight thousand empty ones (16 KB on the wire, but an 8-byte
 * pointer and a string each once decoded). Both are over the cap and refused alike, MAC'd, as
 * too large: StatusDetail OVERSIZED is "message or decoded body over the method's limit". */
static void test_body_over_decode_cap(void **state)
{
	wire *w = *state;
	_cleanup_free_ uint8_t *one_string = field_body(0x0a, 40000);
	uint8_t empty_strings[16000];
	const struct {
		const uint8_t *body;
		size_t len;
	} bodies[] = {
		{ one_string, 40000 },
		{ empty_strings, sizeof(empty_strings) },
	};

	for (size_t i = 0; i < sizeof(empty_strings); i += 2) {
		empty_strings[i] = 0x0a; /* ExecRequest.argv */
		empty_strings[i + 1] = 0x00;
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(bodies); i++) {
		bk_envelope hdr;
		uint8_t nonce[BK_NONCE_LEN];
		size_t len;
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		req = wire_forge(&hdr, bodies[i].body, bodies[i].len, w->key, &len);
		wire_expect_refusal(w, req, len, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, nonce, "Exec", w->key);
	}
}

/* Random buffers: each is answered as not an Envelope (or as one of another version and nothing
 * else that is valid), never with a MAC, never by a handler; the server stays up. */
static void test_random_garbage(void **state)
{
	wire *w = *state;
	uint8_t buf[512];

	for (int i = 0; i < 2000; i++) {
		size_t len = rng_next() % sizeof(buf);
		unsigned long runs = wire_handler_runs(w);
		bk_envelope *ans;

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rng_next();
		ans = wire_call(w, buf, len);
		assert_int_equal(ans->status, BK_INVALID_ARGUMENT);
		if ((int)ans->detail != BK_DETAIL_MALFORMED && (int)ans->detail != BK_DETAIL_BAD_VERSION)
			fail_msg("garbage %d (%zu bytes) refused as %s", i, len, bk_detail_name((int)ans->detail));
		assert_int_equal(ans->mac.len, 0);
		assert_int_equal(wire_handler_runs(w), runs);
		wire_envelope_free(ans);
	}
	expect_alive(w);
}

/* A valid request whose tail from a random point on is replaced by random bytes: the decoder gets
 * deeper before it fails. Refused, unMAC'd, no handler. */
static void test_garbage_after_valid_prefix(void **state)
{
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(w, &hdr, nonce, &len);
	uint8_t buf[512];

	assert_true(len < sizeof(buf));
	for (int i = 0; i < 1000; i++) {
		size_t cut = rng_next() % len, total = cut + 1 + rng_next() % (sizeof(buf) - cut - 1);
		unsigned long runs = wire_handler_runs(w);
		bk_envelope *ans;

		memcpy(buf, req, cut);
		for (size_t j = cut; j < total; j++)
			buf[j] = (uint8_t)rng_next();
		/* A changed byte, not random bytes that happen to equal the original. */
		buf[cut] = (uint8_t)(req[cut] ^ 0x5a);
		ans = wire_call(w, buf, total);
		assert_int_not_equal(ans->status, BK_OK);
		assert_int_equal(ans->mac.len, 0);
		assert_int_equal(wire_handler_runs(w), runs);
		wire_envelope_free(ans);
	}
	expect_alive(w);
}

/* --- header fields -------------------------------------------------------------------------- */

/* Names that are not rpcs of the service, each properly MAC'd: refused before authentication,
 * so unMAC'd. An empty method is a malformed request. */
static void test_unknown_method(void **state)
{
	static const char *const names[] = { "Nope", "exec", "Health ", "boxkite.v1.Sandbox/Exec", "Exec\n" };
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen);

	for (size_t i = 0; i < BK_ARRAY_SIZE(names); i++) {
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, names[i], WIRE_KEY_ID);
		req = wire_forge(&hdr, body, blen, w->key, &len);
		wire_expect_refusal(w, req, len, BK_UNIMPLEMENTED, BK_DETAIL_UNKNOWN_METHOD, nonce, names[i], NULL);
	}
	{
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, "", WIRE_KEY_ID);
		req = wire_forge(&hdr, body, blen, w->key, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, nonce, "", NULL);
	}
}

/* Any version but ours is refused before its MAC is looked at — version 1 too, MAC'd as version
 * 1 did (the data inside the body) — and the refusal is written in the request's version, so
 * that a client of that version can read why. */
static void test_bad_version(void **state)
{
	static const uint32_t versions[] = { 0, 1, BK_ENVELOPE_VERSION + 1, UINT32_MAX };
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen);

	for (size_t i = 0; i < BK_ARRAY_SIZE(versions); i++) {
		_cleanup_free_ uint8_t *req = NULL;
		_cleanup_(wire_envelope_freep) bk_envelope *ans = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		hdr.version = versions[i];
		req = wire_forge(&hdr, body, blen, w->key, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_VERSION, nonce, "Exec", NULL);
		ans = wire_call(w, req, len);
		assert_int_equal(ans->version, versions[i]);
		assert_non_null(strstr(ans->message, "this server speaks 2"));
	}
}

/* A RESPONSE (or any kind but REQUEST, including values outside the enum) sent as a request. */
static void test_kind_not_request(void **state)
{
	static const int kinds[] = { BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE,
				     BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_UNSPECIFIED, 7, -1 };
	wire *w = *state;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen);

	for (size_t i = 0; i < BK_ARRAY_SIZE(kinds); i++) {
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		hdr.kind = (Boxkite__V1__EnvelopeKind)kinds[i];
		req = wire_forge(&hdr, body, blen, w->key, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, nonce, "Exec", NULL);
	}
}

/* A nonce of any length but 16 is malformed, and the answer cannot echo it. */
static void test_bad_nonce_length(void **state)
{
	static const size_t lengths[] = { 0, 1, BK_NONCE_LEN - 1, BK_NONCE_LEN + 1, 64 };
	wire *w = *state;
	uint8_t nonce[64] = { 0 };
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen);

	for (size_t i = 0; i < BK_ARRAY_SIZE(lengths); i++) {
		bk_envelope hdr;
		_cleanup_free_ uint8_t *req = NULL;
		_cleanup_(wire_envelope_freep) bk_envelope *ans = NULL;

		wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
		hdr.nonce.len = lengths[i];
		req = wire_forge(&hdr, body, blen, w->key, &len);
		ans = wire_call(w, req, len);
		wire_assert_answer(ans, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, NULL, "Exec", NULL);
	}
	assert_int_equal(wire_handler_runs(w), 0);
}

/* Authenticated bodies that are not the method's request type, at the top level and nested (an
 * EnvVar that does not decode), or that carry a field the server does not know: BAD_BODY, MAC'd,
 * no handler. Unkeyed Health likewise, unMAC'd. */
static void test_bad_body(void **state)
{
	static const uint8_t short_string[] = { 0x0a, 0x05, 'a' };        /* argv: 5 bytes promised, 1 sent */
	static const uint8_t bad_nested[] = { 0x22, 0x02, 0xff, 0xff };    /* env: an unterminated varint */
	static const uint8_t bad_wire_type[] = { 0x0f };                    /* field 1, wire type 7 */
	static const uint8_t unknown_field[] = { 0x0a, 0x01, 'x', 0x78, 0x01 }; /* argv "x", field 15 */
	static const struct {
		const char *method;
		const uint8_t *body;
		size_t len;
		bool keyed;
	} cases[] = {
		{ "Exec", short_string, sizeof(short_string), true },
		{ "Exec", bad_nested, sizeof(bad_nested), true },
		{ "Exec", bad_wire_type, sizeof(bad_wire_type), true },
		{ "Exec", unknown_field, sizeof(unknown_field), true },
		{ "Health", bad_wire_type, sizeof(bad_wire_type), true },
		{ "Health", short_string + 1, sizeof(short_string) - 1, false }, /* a lone 0x05: wire type 5 truncated */
	};
	wire *w = *state;

	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		const bk_key *key = cases[i].keyed ? w->key : NULL;
		bk_envelope hdr;
		uint8_t nonce[BK_NONCE_LEN];
		size_t len;
		_cleanup_free_ uint8_t *req = NULL;

		wire_header(&hdr, nonce, cases[i].method, key ? WIRE_KEY_ID : "");
		req = wire_forge(&hdr, cases[i].body, cases[i].len, key, &len);
		wire_expect_refusal(w, req, len, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, nonce, cases[i].method, key);
	}
}

/* A body whose only content is one string 0xff (not UTF-8) at the end of path (field ids from
 * the request type inwards): each level a length-delimited field holding the next. */
static uint8_t *string_at_path(const uint32_t *path, size_t depth, size_t *len)
{
	uint8_t inner[256], outer[256];
	size_t n = 1;

	inner[0] = 0xff;
	for (size_t level = depth; level-- > 0;) {
		size_t at = 0;
		for (uint32_t v = path[level] << 3 | 2; ; v >>= 7) {
			outer[at++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
			if (v < 0x80)
				break;
		}
		assert_true(n < 0x80);
		outer[at++] = (uint8_t)n;
		memcpy(outer + at, inner, n);
		n += at;
		memcpy(inner, outer, n);
	}
	*len = n;
	return memcpy(malloc(n), inner, n);
}

/* Every string field of every request type, nested ones included (found from the descriptors,
 * as the server finds them): one that is not UTF-8 is refused BAD_BODY before any handler, the
 * field named. Before, ProcessStart kept such a shell and tag and every ProcessList answer then
 * carried them, which strict protobuf decoders refuse whole. */
struct string_case {
	wire *w;
	const char *method;
	unsigned sent;
};

static void strings_of(struct string_case *sc, const ProtobufCMessageDescriptor *d, uint32_t *path, size_t depth)
{
	if (depth == 4)
		return;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		path[depth] = f->id;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			strings_of(sc, f->descriptor, path, depth + 1);
		} else if (f->type == PROTOBUF_C_TYPE_STRING) {
			bk_envelope hdr;
			uint8_t nonce[BK_NONCE_LEN];
			size_t blen, len;
			char want[256];
			_cleanup_free_ uint8_t *body = string_at_path(path, depth + 1, &blen), *req = NULL;
			unsigned long runs = wire_handler_runs(sc->w);

			wire_header(&hdr, nonce, sc->method, WIRE_KEY_ID);
			req = wire_forge(&hdr, body, blen, sc->w->key, &len);
			_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(sc->w, req, len);
			wire_assert_answer(ans, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, nonce, sc->method, sc->w->key);
			assert_int_equal(wire_handler_runs(sc->w), runs);
			snprintf(want, sizeof(want), "%s.%s is not UTF-8", d->short_name, f->name);
			assert_string_equal(ans->message, want);
			sc->sent++;
		}
	}
}

static void test_strings_not_utf8(void **state)
{
	const ProtobufCServiceDescriptor *svc = &boxkite__v1__sandbox__descriptor;
	struct string_case sc = { .w = *state };
	uint32_t path[4];

	for (unsigned m = 0; m < svc->n_methods; m++) {
		sc.method = svc->methods[m].name;
		strings_of(&sc, svc->methods[m].input, path, 0);
	}
	/* ProcessStart's shell and tag, Exec's argv, every path: dozens of fields. */
	assert_true(sc.sent > 30);
	/* And a valid request around such bytes still runs: an Exec whose argv is UTF-8. */
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;
	_cleanup_free_ uint8_t *req = exec_request(sc.w, &hdr, nonce, &len);
	expect_served(sc.w, req, len, nonce, "Exec", sc.w->key);
}

/* --- dispatch ------------------------------------------------------------------------------- */

/* A row without a handler answers UNIMPLEMENTED through the whole pipeline, MAC'd. Reset's row
 * is emptied here so that the test keeps a subject once every rpc has a handler. */
static void test_unimplemented_rpc(void **state)
{
	wire *w = *state;
	size_t tried = 0;

	wire_method(w, "Reset")->handler = NULL;
	for (size_t i = 0; i < w->srv.nmethods; i++) {
		const bk_method *m = &w->srv.methods[i];
		bk_envelope hdr;
		uint8_t nonce[BK_NONCE_LEN];
		size_t len;
		_cleanup_free_ uint8_t *req = NULL;

		if (m->handler)
			continue;
		wire_header(&hdr, nonce, m->name, WIRE_KEY_ID);
		req = wire_forge(&hdr, NULL, 0, w->key, &len);
		wire_expect_refusal(w, req, len, BK_UNIMPLEMENTED, BK_DETAIL_NONE, nonce, m->name, w->key);
		tried++;
	}
	assert_true(tried >= 1);
}

/* Without a key file only Health is served: every other rpc, and a keyed Health, is refused
 * AUTH_NOT_CONFIGURED, unMAC'd (the server has no key to MAC with). */
static void test_no_key_configured(void **state)
{
	static const uint8_t secret[32] = { 7 };
	wire *w = *state;
	bk_key key;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len;

	assert_null(w->key);
	assert_int_equal(bk_key_init(&key, WIRE_KEY_ID, secret, sizeof(secret), NULL), 0);
	expect_alive(w);
	for (size_t i = 0; i < w->srv.nmethods; i++) {
		const char *name = w->srv.methods[i].name;
		_cleanup_free_ uint8_t *bare = NULL, *keyed = NULL;

		wire_header(&hdr, nonce, name, WIRE_KEY_ID);
		keyed = wire_forge(&hdr, NULL, 0, &key, &len);
		wire_expect_refusal(w, keyed, len, BK_UNAVAILABLE, BK_DETAIL_AUTH_NOT_CONFIGURED, nonce, name, NULL);
		if (strcmp(name, "Health") == 0)
			continue;
		wire_header(&hdr, nonce, name, "");
		bare = wire_forge(&hdr, NULL, 0, NULL, &len);
		wire_expect_refusal(w, bare, len, BK_UNAVAILABLE, BK_DETAIL_AUTH_NOT_CONFIGURED, nonce, name, NULL);
	}
	bk_key_clear(&key);
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), 1);
}

/* A warm pool's claim key: every rpc but Health and Reset refused PERMISSION_DENIED/CLAIM_KEY,
 * MAC'd under it (its holder is authenticated, only not allowed), before any handler ran; Health
 * served; a Reset with it refused by its handler unless it installs a key other than the claim
 * key. */
static void test_claim_key_serves_health_and_reset_only(void **state)
{
	const ProtobufCServiceDescriptor *svc = &boxkite__v1__sandbox__descriptor;
	Boxkite__V1__HealthRequest health = BOXKITE__V1__HEALTH_REQUEST__INIT;
	Boxkite__V1__ResetRequest reset = BOXKITE__V1__RESET_REQUEST__INIT;
	uint8_t nonce[BK_NONCE_LEN];
	wire *w = *state;
	bk_envelope hdr;
	size_t len, refused = 0;

	for (size_t i = 0; i < svc->n_methods; i++) {
		const char *name = svc->methods[i].name;
		unsigned long runs = wire_handler_runs(w);

		if (strcmp(name, "Health") == 0 || strcmp(name, "Reset") == 0)
			continue;
		wire_header(&hdr, nonce, name, WIRE_KEY_ID);
		_cleanup_free_ uint8_t *req = wire_forge(&hdr, NULL, 0, w->key, &len);
		_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(w, req, len);
		wire_assert_answer(ans, BK_PERMISSION_DENIED, BK_DETAIL_CLAIM_KEY, nonce, name, w->key);
		assert_int_equal(wire_handler_runs(w), runs);
		refused++;
	}
	assert_int_equal(refused, svc->n_methods - 2);

	wire_header(&hdr, nonce, "Health", WIRE_KEY_ID);
	_cleanup_free_ uint8_t *h = wire_seal(&hdr, &health.base, w->key, &len);
	expect_served(w, h, len, nonce, "Health", w->key);

	/* Reset: its handler runs, and refuses before anything happens. */
	struct {
		const char *id;
		const uint8_t *secret;
		int status;
	} resets[] = {
		{ "", NULL, BK_PERMISSION_DENIED },                      /* no new key */
		{ WIRE_KEY_ID, w->key->secret, BK_INVALID_ARGUMENT },    /* the claim key itself */
		{ "tenant", w->key->secret, BK_INVALID_ARGUMENT },       /* ... under another id */
	};
	for (size_t i = 0; i < BK_ARRAY_SIZE(resets); i++) {
		unsigned long runs = wire_handler_runs(w);

		reset.new_key_id = (char *)resets[i].id;
		reset.new_key_secret.data = (uint8_t *)resets[i].secret;
		reset.new_key_secret.len = resets[i].secret ? w->key->len : 0;
		wire_header(&hdr, nonce, "Reset", WIRE_KEY_ID);
		_cleanup_free_ uint8_t *req = wire_seal(&hdr, &reset.base, w->key, &len);
		_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(w, req, len);
		wire_assert_answer(ans, resets[i].status, BK_DETAIL_CLAIM_KEY, nonce, "Reset", w->key);
		assert_int_equal(wire_handler_runs(w), runs + 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keyed_exec_reaches_handler, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_health_unkeyed_and_keyed, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_claim_key_serves_health_and_reset_only, setup_claim, wire_teardown),
		cmocka_unit_test_setup_teardown(test_replay_answered_from_cache, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_replay_refused_when_answer_not_kept, setup_answer_cap, wire_teardown),
		cmocka_unit_test_setup_teardown(test_replay_in_flight_duplicate_dropped, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_time_stale, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_time_future, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_time_inside_window, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_mac_body_byte, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_mac_header_byte, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_mac_mac_byte, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_mac_wrong_secret_or_length, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_mac_every_byte, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_non_canonical_envelope, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_key_id, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_missing_key_id, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_every_prefix, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_body_over_method_limit, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_data_field, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_message_over_max_message, setup_small_message, wire_teardown),
		cmocka_unit_test_setup_teardown(test_envelope_over_decode_cap, setup_decode_cap, wire_teardown),
		cmocka_unit_test_setup_teardown(test_body_over_decode_cap, setup_decode_cap, wire_teardown),
		cmocka_unit_test_setup_teardown(test_random_garbage, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_garbage_after_valid_prefix, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_method, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_version, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_kind_not_request, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_nonce_length, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_bad_body, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_strings_not_utf8, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_unimplemented_rpc, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_no_key_configured, setup_unkeyed, wire_teardown),
	};

	return cmocka_run_group_tests_name("wire: attacks on the envelope and dispatch", tests, NULL, NULL);
}
