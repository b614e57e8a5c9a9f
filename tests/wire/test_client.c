/* libboxkite against the in-process server (tests/wire/fixture.h), and against a fake server
 * that tampers with its answers: the client must take only answers that are MAC'd under its key
 * and bound to the request it sent. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "boxkite/boxkite.h"
#include "fixture.h"
#include "version.h"

static int setup_keyed(void **state)
{
	return wire_start((wire **)state, true, NULL);
}

static int setup_unkeyed(void **state)
{
	return wire_start((wire **)state, false, NULL);
}

static const uint8_t stranger_secret[32] = { 0x5e, 0xc1, 0x2e, 0x7 };

static bk_client *client_open(const char *url, const bk_client_options *opts)
{
	bk_client *c = NULL;
	bk_status st;

	if (bk_client_open(&c, url, opts, &st) != BK_OK)
		fail_msg("bk_client_open %s: %s", url, st.message);
	return c;
}

/* --- against the real server ---------------------------------------------------------------- */

static void test_health_unkeyed(void **state)
{
	wire *w = *state;
	bk_client *c = client_open(w->url, &(bk_client_options){ .timeout_ms = WIRE_TIMEOUT_MS });
	bk_health_info info;
	bk_status st;

	assert_int_equal(bk_health(c, &info, &st), BK_OK);
	assert_false(info.authenticated);
	assert_false(st.verified);
	assert_true(info.auth_configured);
	assert_false(info.sandbox_ready);
	assert_string_equal(info.version, BK_VERSION);
	assert_string_equal(info.mode, "none");
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), 1);
	bk_client_close(c);
}

static void test_health_keyed_answer_verified(void **state)
{
	wire *w = *state;
	bk_client *c = client_open(w->url, &(bk_client_options){ .key_file = w->key_path, .timeout_ms = WIRE_TIMEOUT_MS });
	bk_health_info info;
	bk_status st;

	assert_int_equal(bk_health(c, &info, &st), BK_OK);
	assert_true(info.authenticated);
	assert_true(st.verified);
	assert_true(info.auth_configured);
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), 1);
	bk_client_close(c);
}

/* A key the server does not know: refused before the MAC is checked, so the refusal is
 * unverified, and the status says which check failed. */
static void test_health_unknown_key(void **state)
{
	wire *w = *state;
	bk_client *c = client_open(w->url, &(bk_client_options){ .key = stranger_secret,
								  .key_len = sizeof(stranger_secret),
								  .key_id = "stranger",
								  .timeout_ms = WIRE_TIMEOUT_MS });
	bk_health_info info;
	bk_status st;

	assert_int_equal(bk_health(c, &info, &st), BK_UNAUTHENTICATED);
	assert_int_equal(st.detail, BK_DETAIL_UNKNOWN_KEY);
	assert_false(st.verified);
	assert_int_equal(wire_handler_runs(w), 0);
	bk_client_close(c);
}

/* A server without keys: Health answers an unkeyed client; a keyed client is told why not. */
static void test_health_server_without_key(void **state)
{
	wire *w = *state;
	bk_client *unkeyed = client_open(w->url, &(bk_client_options){ .timeout_ms = WIRE_TIMEOUT_MS });
	bk_client *keyed = client_open(w->url, &(bk_client_options){ .key = stranger_secret,
								       .key_len = sizeof(stranger_secret),
								       .key_id = "stranger",
								       .timeout_ms = WIRE_TIMEOUT_MS });
	bk_health_info info;
	bk_status st;

	assert_int_equal(bk_health(unkeyed, &info, &st), BK_OK);
	assert_false(info.auth_configured);
	assert_false(info.authenticated);
	assert_int_equal(bk_health(keyed, &info, &st), BK_UNAVAILABLE);
	assert_int_equal(st.detail, BK_DETAIL_AUTH_NOT_CONFIGURED);
	assert_false(st.verified);
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), 1);
	bk_client_close(unkeyed);
	bk_client_close(keyed);
}

#define THREADS 8
#define CALLS_PER_THREAD 50

struct worker {
	bk_client *client;
	pthread_t thread;
	int failures;
	bk_status last_failure;
};

static void *health_worker(void *arg)
{
	struct worker *wk = arg;

	for (int i = 0; i < CALLS_PER_THREAD; i++) {
		bk_health_info info;
		bk_status st;

		if (bk_health(wk->client, &info, &st) != BK_OK || !info.authenticated) {
			wk->failures++;
			wk->last_failure = st;
		}
	}
	return NULL;
}

/* One bk_client shared by THREADS threads (documented thread-safe): every call succeeds and is
 * verified, and the server ran exactly that many Health handlers. */
/* A reset installs a key of BK_RESET_KEY_LEN bytes: another length is refused by the library, with
 * the rule, before anything reaches the server (boxkite.h, bk_reset_request). */
static void test_reset_new_key_length_checked_here(void **state)
{
	wire *w = *state;
	bk_client *c = client_open(w->url, &(bk_client_options){ .key = stranger_secret, .key_len = 32,
								 .key_id = "k1", .timeout_ms = WIRE_TIMEOUT_MS });
	static const uint8_t secret[64] = { 1 };
	bk_reset_result res;
	bk_status st;

	for (size_t len = 31; len <= 64; len += 33) {
		bk_reset_request rq = { .new_key_id = "next", .new_key = secret, .new_key_len = len };
		assert_int_equal(bk_reset(c, &rq, &res, &st), BK_INVALID_ARGUMENT);
		assert_non_null(strstr(st.message, "a reset installs a key of 32 bytes"));
	}
	assert_int_equal(atomic_load(&wire_method(w, "Reset")->calls), 0);
	bk_client_close(c);
}

static void test_concurrent_keyed_health(void **state)
{
	wire *w = *state;
	bk_client *c = client_open(w->url, &(bk_client_options){ .key_file = w->key_path, .timeout_ms = WIRE_TIMEOUT_MS });
	struct worker workers[THREADS] = { 0 };

	for (int i = 0; i < THREADS; i++) {
		workers[i].client = c;
		assert_int_equal(pthread_create(&workers[i].thread, NULL, health_worker, &workers[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(workers[i].thread, NULL), 0);
		if (workers[i].failures)
			fail_msg("thread %d: %d failed calls, the last %s/%s: %s", i, workers[i].failures,
				 bk_status_name(workers[i].last_failure.code),
				 bk_detail_name(workers[i].last_failure.detail), workers[i].last_failure.message);
	}
	assert_int_equal(atomic_load(&wire_method(w, "Health")->calls), THREADS * CALLS_PER_THREAD);
	bk_client_close(c);
}

/* --- against a server that tampers with its answers ------------------------------------------ */

enum tamper {
	TAMPER_NONE,          /* a correct, MAC'd answer (the control) */
	TAMPER_BODY,          /* a body byte changed after MACing */
	TAMPER_TIMESTAMP,     /* the timestamp changed after MACing */
	TAMPER_STATUS,        /* a MAC'd refusal turned into OK */
	TAMPER_MAC,           /* a MAC byte changed */
	TAMPER_OTHER_SECRET,  /* MAC'd under the right key id with another secret */
	TAMPER_OTHER_KEY_ID,  /* MAC'd under another key, named as such */
	TAMPER_OLD_ANSWER,    /* the genuine answer to the previous request */
	TAMPER_OTHER_METHOD,  /* MAC'd, but for another rpc */
	TAMPER_KIND_REQUEST,  /* MAC'd, but of kind REQUEST */
	TAMPER_STRIP_MAC,     /* an OK answer without its MAC */
	TAMPER_BAD_BODY,      /* MAC'd OK answer whose body is not a HealthResponse */
	TAMPER_GARBAGE,       /* not an Envelope */
	TAMPER_UNKNOWN_FIELD, /* a correct answer with a field the MAC does not cover appended */
	TAMPER_UNMACD_ERROR,  /* an unMAC'd refusal, as the server sends before a MAC verified */
	TAMPER_OLD_SERVER,    /* a version 1 server's BAD_VERSION refusal, in its version */
	TAMPER_OLD_VERSION,   /* a MAC'd OK answer that says version 1 */
	TAMPER_DATA,          /* a MAC'd OK answer carrying data that Health does not take */
	TAMPER_DATA_UNMACD,   /* the same, its data changed after MACing */
};

struct fake {
	const bk_key *key;
	bk_key impostor, stranger;
	char url[112];
	char path[96];
	nng_socket sock;
	pthread_t thread;
	atomic_int tamper;
	uint8_t last[512]; /* the last correct answer, for TAMPER_OLD_ANSWER */
	size_t last_len;
};

/* Pack env with its body and MAC into a message; NULL when out of memory. */
static nng_msg *fake_pack(const bk_envelope *env)
{
	size_t len = protobuf_c_message_get_packed_size(&env->base);
	nng_msg *msg = NULL;

	if (nng_msg_alloc(&msg, len) != 0)
		return NULL;
	protobuf_c_message_pack(&env->base, nng_msg_body(msg));
	return msg;
}

/* The fake's answer to req under the current tamper mode. Runs on the fake's thread, so it
 * reports nothing through cmocka: a broken answer shows as the client's status. */
static nng_msg *fake_answer(struct fake *f, const bk_envelope *req)
{
	static const uint8_t garbage[] = { 0xff, 0xff, 0xff };
	Boxkite__V1__HealthResponse resp = BOXKITE__V1__HEALTH_RESPONSE__INIT;
	enum tamper tamper = atomic_load(&f->tamper);
	const bk_key *key = f->key;
	bk_envelope ans = BOXKITE__V1__ENVELOPE__INIT;
	uint8_t body[128], mac[BK_MAC_LEN];
	size_t blen;
	nng_msg *msg;

	resp.version = "fake";
	resp.mode = "none";
	resp.auth_configured = true;
	blen = protobuf_c_message_pack(&resp.base, body);

	ans.version = BK_ENVELOPE_VERSION;
	ans.kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE;
	ans.timestamp_ms = bk_clock_realtime_ms();
	ans.nonce = req->nonce;
	ans.method = req->method;
	ans.body.data = body;
	ans.body.len = blen;

	/* What is changed before the MAC is computed: a validly MAC'd answer that is still wrong. */
	switch (tamper) {
	case TAMPER_OTHER_SECRET:
		key = &f->impostor;
		break;
	case TAMPER_OTHER_KEY_ID:
		key = &f->stranger;
		break;
	case TAMPER_STATUS:
		ans.status = BK_PERMISSION_DENIED;
		ans.message = "denied";
		ans.body.len = 0;
		break;
	case TAMPER_OTHER_METHOD:
		ans.method = "Exec";
		break;
	case TAMPER_KIND_REQUEST:
		ans.kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST;
		break;
	case TAMPER_BAD_BODY:
		ans.body.data = (uint8_t *)garbage;
		ans.body.len = sizeof(garbage);
		break;
	case TAMPER_OLD_SERVER:
		ans.version = 1;
		ans.status = BK_INVALID_ARGUMENT;
		ans.detail = BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_BAD_VERSION;
		ans.message = "envelope version 2; this server speaks 1";
		ans.body.len = 0;
		return fake_pack(&ans);
	case TAMPER_OLD_VERSION:
		ans.version = 1;
		break;
	case TAMPER_DATA:
	case TAMPER_DATA_UNMACD:
		ans.data.data = (uint8_t *)garbage;
		ans.data.len = sizeof(garbage);
		break;
	case TAMPER_UNMACD_ERROR:
		ans.status = BK_UNAVAILABLE;
		ans.detail = BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_AUTH_NOT_CONFIGURED;
		ans.message = "no key";
		ans.body.len = 0;
		return fake_pack(&ans);
	case TAMPER_GARBAGE:
		if (nng_msg_alloc(&msg, sizeof(garbage)) == 0)
			memcpy(nng_msg_body(msg), garbage, sizeof(garbage));
		return msg;
	case TAMPER_OLD_ANSWER:
		if (nng_msg_alloc(&msg, f->last_len) == 0)
			memcpy(nng_msg_body(msg), f->last, f->last_len);
		return msg;
	default:
		break;
	}
	ans.key_id = (char *)key->id;
	if (bk_envelope_mac(key, &ans, ans.body.data, ans.body.len, NULL, mac) < 0)
		return NULL;
	ans.mac.data = mac;
	ans.mac.len = sizeof(mac);

	/* What is changed after: the MAC no longer matches. */
	switch (tamper) {
	case TAMPER_BODY:
		body[blen - 1] ^= 0x01; /* auth_configured true → false: still a valid HealthResponse */
		break;
	case TAMPER_TIMESTAMP:
		ans.timestamp_ms++;
		break;
	case TAMPER_STATUS:
		ans.status = BK_OK;
		ans.message = "";
		break;
	case TAMPER_MAC:
		mac[0] ^= 0x01;
		break;
	case TAMPER_STRIP_MAC:
		ans.mac.len = 0;
		break;
	case TAMPER_DATA_UNMACD:
		ans.data.len--;
		break;
	default:
		break;
	}
	msg = fake_pack(&ans);
	if (msg && tamper == TAMPER_UNKNOWN_FIELD && nng_msg_append(msg, "\x78\x01", 2) != 0) {
		nng_msg_free(msg);
		return NULL;
	}
	if (msg && tamper == TAMPER_NONE && nng_msg_len(msg) <= sizeof(f->last)) {
		memcpy(f->last, nng_msg_body(msg), nng_msg_len(msg));
		f->last_len = nng_msg_len(msg);
	}
	return msg;
}

static void *fake_serve(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		nng_msg *msg = NULL, *answer = NULL;
		bk_envelope *req;

		if (nng_recvmsg(f->sock, &msg, 0) != 0)
			return NULL; /* closed: the test is over */
		req = boxkite__v1__envelope__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
		nng_msg_free(msg);
		if (req)
			answer = fake_answer(f, req);
		boxkite__v1__envelope__free_unpacked(req, NULL);
		if (answer && nng_sendmsg(f->sock, answer, 0) != 0)
			nng_msg_free(answer);
	}
}

struct fake_state {
	wire *w;
	struct fake f;
	bool running;
};

static int teardown_fake(void **state)
{
	struct fake_state *fs = *state;

	if (!fs)
		return 0;
	if (fs->running) {
		nng_close(fs->f.sock);
		pthread_join(fs->f.thread, NULL);
		unlink(fs->f.path);
	}
	bk_key_clear(&fs->f.impostor);
	bk_key_clear(&fs->f.stranger);
	wire_stop(fs->w);
	free(fs);
	return 0;
}

/* The fixture's keyed server gives the temp dir and the key; the fake listens beside it. */
static int setup_fake(void **state)
{
	static const uint8_t impostor_secret[32] = { 0x1f };
	struct fake_state *fs = calloc(1, sizeof(*fs));
	struct fake *f;

	*state = fs;
	if (!fs || wire_start(&fs->w, true, NULL) < 0)
		goto fail;
	f = &fs->f;
	f->key = fs->w->key;
	if (bk_key_init(&f->impostor, f->key->id, impostor_secret, sizeof(impostor_secret), NULL) < 0 ||
	    bk_key_init(&f->stranger, "stranger", stranger_secret, sizeof(stranger_secret), NULL) < 0)
		goto fail;
	snprintf(f->path, sizeof(f->path), "%s/fake.sock", fs->w->dir);
	snprintf(f->url, sizeof(f->url), "ipc://%s", f->path);
	if (nng_rep0_open(&f->sock) != 0)
		goto fail;
	if (nng_listen(f->sock, f->url, NULL, 0) != 0 || pthread_create(&f->thread, NULL, fake_serve, f) != 0) {
		nng_close(f->sock);
		unlink(f->path);
		goto fail;
	}
	fs->running = true;
	return 0;
fail:
	fprintf(stderr, "cannot start the fake server\n");
	teardown_fake(state);
	return -1;
}

/* Every tampered answer is refused as DATA_LOSS, including one with a field the MAC does not
 * cover (docs/PROTOCOL.md: both sides accept only canonical Envelopes, unknown fields refused),
 * one of another envelope version, and one carrying data the call does not take; the control
 * passes; an unMAC'd refusal is passed on as what it is: an unverified status, and so is an old
 * server's BAD_VERSION, in its own version. */
static void test_client_rejects_tampered_answers(void **state)
{
	static const struct {
		enum tamper tamper;
		const char *name;
		int code;
	} cases[] = {
		{ TAMPER_NONE, "none", BK_OK },
		{ TAMPER_BODY, "body", BK_DATA_LOSS },
		{ TAMPER_TIMESTAMP, "timestamp", BK_DATA_LOSS },
		{ TAMPER_STATUS, "status", BK_DATA_LOSS },
		{ TAMPER_MAC, "mac", BK_DATA_LOSS },
		{ TAMPER_OTHER_SECRET, "other secret", BK_DATA_LOSS },
		{ TAMPER_OTHER_KEY_ID, "other key id", BK_DATA_LOSS },
		{ TAMPER_OLD_ANSWER, "old answer", BK_DATA_LOSS },
		{ TAMPER_OTHER_METHOD, "other method", BK_DATA_LOSS },
		{ TAMPER_KIND_REQUEST, "kind request", BK_DATA_LOSS },
		{ TAMPER_STRIP_MAC, "strip mac", BK_DATA_LOSS },
		{ TAMPER_BAD_BODY, "bad body", BK_DATA_LOSS },
		{ TAMPER_GARBAGE, "garbage", BK_DATA_LOSS },
		{ TAMPER_UNKNOWN_FIELD, "unknown field", BK_DATA_LOSS },
		{ TAMPER_UNMACD_ERROR, "unMAC'd error", BK_UNAVAILABLE },
		{ TAMPER_OLD_SERVER, "old server", BK_INVALID_ARGUMENT },
		{ TAMPER_OLD_VERSION, "old version", BK_DATA_LOSS },
		{ TAMPER_DATA, "data", BK_DATA_LOSS },
		{ TAMPER_DATA_UNMACD, "data changed", BK_DATA_LOSS },
		{ TAMPER_NONE, "none again", BK_OK },
	};
	struct fake_state *fs = *state;
	bk_client *c = client_open(fs->f.url, &(bk_client_options){ .key_file = fs->w->key_path,
								      .timeout_ms = WIRE_TIMEOUT_MS });
	char wrong[1024] = "";
	size_t nwrong = 0;

	/* Every case runs, and all that went wrong are reported together. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(cases); i++) {
		bk_health_info info = { .authenticated = false };
		bk_status st;
		int code;
		bool right;

		atomic_store(&fs->f.tamper, cases[i].tamper);
		code = bk_health(c, &info, &st);
		right = code == cases[i].code;
		if (code == BK_OK)
			right = right && info.authenticated && strcmp(info.version, "fake") == 0;
		if (cases[i].tamper == TAMPER_UNMACD_ERROR)
			right = right && st.detail == BK_DETAIL_AUTH_NOT_CONFIGURED && !st.verified &&
				strcmp(st.message, "(unverified answer) no key") == 0;
		if (cases[i].tamper == TAMPER_OLD_SERVER)
			right = right && st.detail == BK_DETAIL_BAD_VERSION && !st.verified &&
				strstr(st.message, "the server speaks envelope version 1, this client 2");
		if (cases[i].tamper == TAMPER_DATA)
			right = right && strstr(st.message, "data this call does not take");
		if (cases[i].tamper == TAMPER_DATA_UNMACD)
			right = right && strstr(st.message, "MAC does not verify");
		if (!right)
			nwrong += (size_t)snprintf(wrong + nwrong, sizeof(wrong) - nwrong,
						   "\n  %s: %s \"%s\", expected %s", cases[i].name,
						   bk_status_name(code), st.message, bk_status_name(cases[i].code));
		if (nwrong >= sizeof(wrong))
			nwrong = sizeof(wrong) - 1;
	}
	bk_client_close(c);
	if (wrong[0])
		fail_msg("tampered answers taken or refused wrongly:%s", wrong);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_health_unkeyed, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_health_keyed_answer_verified, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_health_unknown_key, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_health_server_without_key, setup_unkeyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_keyed_health, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_reset_new_key_length_checked_here, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_client_rejects_tampered_answers, setup_fake, teardown_fake),
	};

	return cmocka_run_group_tests_name("wire: libboxkite", tests, NULL, NULL);
}
