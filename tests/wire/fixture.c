#include "fixture.h"

#include <errno.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cmocka.h>
#include <stdatomic.h>
#include <nng/protocol/reqrep0/req.h>

#include "boxkite/boxkite.h"
#include "boundary/link.h"
#include "files/files.h"
#include "files/watch.h"
#include "rpc/methods.h"
#include "runs/exec.h"
#include "runs/runs.h"
#include "session/reset.h"

atomic_uint wire_exec_runs;

/* Stands in for the Exec handler: counts, and answers an empty ExecResponse like a command that
 * exited 0, so that a test sees the whole path through the real reply code. */
static void counting_exec(bk_call *call, const ProtobufCMessage *request)
{
	Boxkite__V1__ExecResponse resp = BOXKITE__V1__EXEC_RESPONSE__INIT;

	(void)request;
	atomic_fetch_add(&wire_exec_runs, 1);
	bk_call_reply(call, &resp.base);
}

bk_method *wire_method(wire *w, const char *name)
{
	return (bk_method *)bk_server_method(&w->srv, name);
}

unsigned long wire_handler_runs(const wire *w)
{
	unsigned long n = 0;

	for (size_t i = 0; i < w->srv.nmethods; i++)
		n += atomic_load(&w->srv.methods[i].calls);
	return n;
}

static int start_fail(wire *w, const char *what, bk_error *err)
{
	fprintf(stderr, "wire fixture: %s: %s\n", what, bk_error_msg(err));
	bk_error_free(err);
	wire_stop(w);
	return -1;
}

/* The front's channels to the stubs, and its exec and file machinery, as main.c sets them up. */
static int stubs_start(wire *w)
{
	bk_error *err = NULL;
	int fd;

	if (stub_start(&w->stub, w->dir, &fd) < 0)
		return -1;
	if (bk_link_new("executor", bk_server_executor_event, &w->srv, &w->links[0], &err) < 0 ||
	    bk_link_new("file worker", bk_server_files_event, &w->srv, &w->links[1], &err) < 0) {
		close(fd);
		fprintf(stderr, "wire fixture: links: %s\n", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	bk_link_attach(w->links[0], fd);
	w->srv.executor = w->links[0];
	w->srv.files_link = w->links[1];
	if (bk_runs_start(&w->srv, &err) < 0 || bk_execs_start(&w->srv, &err) < 0 ||
	    bk_files_start(&w->srv, &err) < 0 || bk_watches_start(&w->srv, &err) < 0 ||
	    bk_link_start(w->links[1], &err) < 0 || bk_link_start(w->links[0], &err) < 0) {
		fprintf(stderr, "wire fixture: exec and files: %s\n", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	/* The stub's first events: FilesReady, then the sandbox ready (that order: once it reads
	 * ready, the file worker's channel is attached). A hang guard. */
	for (int i = 0; i < WIRE_TIMEOUT_MS && !atomic_load(&w->srv.sandbox_ready); i++)
		usleep(1000);
	if (!atomic_load(&w->srv.sandbox_ready)) {
		fprintf(stderr, "wire fixture: the stub executor's state never came\n");
		return -1;
	}
	return 0;
}

/* key_option: how the key file is given (--key-file, or --claim-key-file for a warm pool's). */
static int start(wire **out, const char *key_option, const char *const *extra, bool stubbed)
{
	const char *argv[32] = { "boxkited", "--listen" };
	wire *w = calloc(1, sizeof(*w));
	bk_error *err = NULL;
	int argc = 2, rv;

	if (!w)
		return -1;
	snprintf(w->dir, sizeof(w->dir), "/tmp/bk-wire-XXXXXX");
	if (!mkdtemp(w->dir)) {
		w->dir[0] = '\0';
		bk_error_errno(&err, errno, "mkdtemp");
		return start_fail(w, "temp dir", err);
	}
	snprintf(w->url, sizeof(w->url), "ipc://%s/s.sock", w->dir);
	argv[argc++] = w->url;
	/* Its replay log in the temp dir, like a daemon's in its state directory. */
	argv[argc++] = "--state-dir";
	argv[argc++] = w->dir;
	if (key_option) {
		snprintf(w->key_path, sizeof(w->key_path), "%s/key", w->dir);
		if (bk_keyfile_create(w->key_path, WIRE_KEY_ID, &err) < 0 ||
		    bk_keyring_load(w->key_path, &w->ring, &err) < 0)
			return start_fail(w, "key file", err);
		w->key = &w->ring->keys[0];
		argv[argc++] = key_option;
		argv[argc++] = w->key_path;
	}
	for (size_t i = 0; extra && extra[i] && argc < (int)BK_ARRAY_SIZE(argv) - 1; i++)
		argv[argc++] = extra[i];

	if (bk_config_parse(&w->cfg, argc, (char **)argv, &err) != 0)
		return start_fail(w, "bk_config_parse", err);
	/* bk_server_fini() undoes a partial bk_server_init() too. */
	w->srv_up = true;
	if (bk_server_init(&w->srv, &w->cfg, &err) < 0 || bk_methods_init(&w->srv, &err) < 0 ||
	    bk_reset_init(&w->srv, &err) < 0)
		return start_fail(w, "bk_server_init", err);
	if (!stubbed)
		wire_method(w, "Exec")->handler = counting_exec;
	else if (stubs_start(w) < 0)
		return start_fail(w, "stubs", NULL);
	if (bk_front_listen(&w->srv, &err) < 0)
		return start_fail(w, "bk_front_listen", err);
	bk_front_serve(&w->srv);

	if ((rv = nng_req0_open(&w->req)) != 0) {
		fprintf(stderr, "wire fixture: nng_req0_open: %s\n", nng_strerror(rv));
		wire_stop(w);
		return -1;
	}
	w->req_open = true;
	nng_socket_set_ms(w->req, NNG_OPT_SENDTIMEO, WIRE_TIMEOUT_MS);
	if ((rv = nng_dial(w->req, w->url, NULL, 0)) != 0) {
		fprintf(stderr, "wire fixture: dial %s: %s\n", w->url, nng_strerror(rv));
		wire_stop(w);
		return -1;
	}
	*out = w;
	return 0;
}

int wire_start(wire **out, bool keyed, const char *const *extra)
{
	return start(out, keyed ? "--key-file" : NULL, extra, false);
}

int wire_start_claim(wire **out)
{
	return start(out, "--claim-key-file", NULL, false);
}

int wire_start_stubbed(wire **out, const char *const *extra)
{
	return start(out, "--key-file", extra, true);
}

void wire_stop(wire *w)
{
	char path[128];

	if (!w)
		return;
	if (w->req_open)
		nng_close(w->req);
	/* As main.c: the executor's link first (what is pending fails), then Exec, the files
	 * machinery, the transport, the run engine; the links freed last. */
	atomic_store(&w->srv.stopping, true);
	bk_link_close(w->links[0]);
	bk_link_close(w->links[1]);
	stub_stop(w->stub);
	bk_execs_stop(&w->srv);
	bk_watches_stop(&w->srv);
	bk_files_stop(&w->srv);
	bk_front_stop(&w->srv);
	bk_runs_stop(&w->srv);
	bk_execs_free(&w->srv);
	bk_watches_free(&w->srv);
	bk_link_free(w->links[0]);
	bk_link_free(w->links[1]);
	if (w->srv_up) {
		bk_reset_fini(&w->srv);
		bk_server_fini(&w->srv);
	}
	bk_config_free(&w->cfg);
	bk_keyring_free(w->ring);
	if (w->dir[0]) {
		/* nng removes the socket file when the listener closes; be sure anyway. */
		snprintf(path, sizeof(path), "%s/s.sock", w->dir);
		unlink(path);
		if (w->key_path[0])
			unlink(w->key_path);
		/* Where a Reset writes the tenant's key (bk_reset_init opens it). */
		snprintf(path, sizeof(path), "%s/tenant-key", w->dir);
		unlink(path);
		for (int i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/replay.%d", w->dir, i);
			unlink(path);
		}
		if (rmdir(w->dir) < 0)
			fprintf(stderr, "wire fixture: cannot remove %s: %s\n", w->dir, strerror(errno));
	}
	free(w);
}

int wire_teardown(void **state)
{
	wire_stop(*state);
	return 0;
}

struct bk_client *wire_client(wire *w)
{
	bk_client *c = NULL;
	bk_status st;

	if (bk_client_open(&c, w->url, &(bk_client_options){ .key_file = w->key_path, .timeout_ms = WIRE_TIMEOUT_MS },
			   &st) != BK_OK)
		fail_msg("bk_client_open: %s", st.message);
	return c;
}

void wire_header(bk_envelope *hdr, uint8_t nonce[BK_NONCE_LEN], const char *method, const char *key_id)
{
	bk_envelope init = BOXKITE__V1__ENVELOPE__INIT;

	assert_int_equal(getrandom(nonce, BK_NONCE_LEN, 0), BK_NONCE_LEN);
	*hdr = init;
	hdr->version = BK_ENVELOPE_VERSION;
	hdr->kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST;
	hdr->key_id = (char *)key_id;
	hdr->timestamp_ms = bk_clock_realtime_ms();
	hdr->nonce.data = nonce;
	hdr->nonce.len = BK_NONCE_LEN;
	hdr->method = (char *)method;
}

uint8_t *wire_pack(const bk_envelope *hdr, const uint8_t *body, size_t body_len, const uint8_t *mac, size_t mac_len,
		   size_t *len)
{
	bk_envelope env = *hdr;
	uint8_t *out;

	env.body.data = (uint8_t *)body;
	env.body.len = body_len;
	env.mac.data = (uint8_t *)mac;
	env.mac.len = mac ? mac_len : 0;
	*len = protobuf_c_message_get_packed_size(&env.base);
	out = malloc(*len ? *len : 1);
	assert_non_null(out);
	assert_int_equal(protobuf_c_message_pack(&env.base, out), *len);
	return out;
}

uint8_t *wire_forge(const bk_envelope *hdr, const uint8_t *body, size_t body_len, const bk_key *key, size_t *len)
{
	uint8_t mac[BK_MAC_LEN];

	if (key)
		assert_int_equal(bk_envelope_mac(key, hdr, body, body_len, NULL, mac), 0);
	return wire_pack(hdr, body, body_len, key ? mac : NULL, sizeof(mac), len);
}

uint8_t *wire_seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, size_t *len)
{
	uint8_t *out = malloc(bk_envelope_sealed_size(hdr, body, 0, key != NULL));

	assert_non_null(out);
	*len = bk_envelope_seal(hdr, body, key, out);
	return out;
}

int wire_send(wire *w, const uint8_t *req, size_t len, int timeout_ms, nng_msg **answer)
{
	nng_msg *msg = NULL;
	int rv;

	*answer = NULL;
	if ((rv = nng_msg_alloc(&msg, len)) != 0)
		return rv;
	memcpy(nng_msg_body(msg), req, len);
	if ((rv = nng_sendmsg(w->req, msg, 0)) != 0) {
		nng_msg_free(msg);
		return rv;
	}
	nng_socket_set_ms(w->req, NNG_OPT_RECVTIMEO, timeout_ms);
	return nng_recvmsg(w->req, answer, 0);
}

bk_envelope *wire_call(wire *w, const uint8_t *req, size_t len)
{
	nng_msg *answer = NULL;
	bk_envelope *env;
	int rv;

	rv = wire_send(w, req, len, WIRE_TIMEOUT_MS, &answer);
	if (rv != 0)
		fail_msg("no answer to a %zu-byte request: %s", len, nng_strerror(rv));
	env = boxkite__v1__envelope__unpack(NULL, nng_msg_len(answer), nng_msg_body(answer));
	nng_msg_free(answer);
	assert_non_null(env);
	return env;
}

void wire_assert_answer(const bk_envelope *ans, int status, int detail, const uint8_t *nonce, const char *method,
			const bk_key *key)
{
	if (ans->status != status || (int)ans->detail != detail)
		fail_msg("answer %s/%s (\"%s\"), expected %s/%s", bk_status_name(ans->status),
			 bk_detail_name((int)ans->detail), ans->message, bk_status_name(status), bk_detail_name(detail));
	/* A BAD_VERSION refusal is in the request's version (test_bad_version checks it). */
	if (detail != BK_DETAIL_BAD_VERSION)
		assert_int_equal(ans->version, BK_ENVELOPE_VERSION);
	assert_int_equal(ans->kind, BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE);
	if (nonce) {
		assert_int_equal(ans->nonce.len, BK_NONCE_LEN);
		assert_memory_equal(ans->nonce.data, nonce, BK_NONCE_LEN);
	} else {
		assert_int_equal(ans->nonce.len, 0);
	}
	assert_string_equal(ans->method, method);
	if (key) {
		assert_string_equal(ans->key_id, key->id);
		assert_true(bk_envelope_mac_ok(key, ans, NULL));
	} else {
		assert_string_equal(ans->key_id, "");
		assert_int_equal(ans->mac.len, 0);
	}
}

void wire_expect_refusal(wire *w, const uint8_t *req, size_t len, int status, int detail, const uint8_t *nonce,
			 const char *method, const bk_key *key)
{
	unsigned long runs = wire_handler_runs(w);
	unsigned exec_runs = atomic_load(&wire_exec_runs);
	_cleanup_(wire_envelope_freep) bk_envelope *ans = wire_call(w, req, len);

	wire_assert_answer(ans, status, detail, nonce, method, key);
	assert_int_equal(wire_handler_runs(w), runs);
	assert_int_equal(atomic_load(&wire_exec_runs), exec_runs);
}

void wire_expect_time_refusal(wire *w, int64_t ts, int detail)
{
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;
	_cleanup_free_ uint8_t *body = wire_exec_body(&blen), *req = NULL;

	wire_header(&hdr, nonce, "Exec", WIRE_KEY_ID);
	hdr.timestamp_ms = ts;
	req = wire_forge(&hdr, body, blen, w->key, &len);
	wire_expect_refusal(w, req, len, BK_UNAUTHENTICATED, detail, nonce, "Exec", w->key);
}

uint8_t *wire_exec_body(size_t *len)
{
	static char *argv[] = { "true" };
	Boxkite__V1__ExecRequest req = BOXKITE__V1__EXEC_REQUEST__INIT;
	uint8_t *b;

	req.n_argv = 1;
	req.argv = argv;
	*len = protobuf_c_message_get_packed_size(&req.base);
	b = malloc(*len);
	assert_non_null(b);
	protobuf_c_message_pack(&req.base, b);
	return b;
}

void wire_envelope_free(bk_envelope *env)
{
	boxkite__v1__envelope__free_unpacked(env, NULL);
}
