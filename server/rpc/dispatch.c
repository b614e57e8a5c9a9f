/* The request pipeline, in the order a reviewer checks it against docs/PROTOCOL.md:
 *
 *   decode the Envelope (bounded allocator) → version, kind, nonce, method present
 *   → find the method row → key (or unkeyed Health) → MAC, constant time → time window
 *   → replay cache → body size limit → decode the body → handler
 *
 * Nothing of the body is decoded before the MAC verified. Once it did, every answer, errors
 * included, is MAC'd with the caller's key and bound to its nonce; before, answers carry no MAC
 * and a client treats them as unverified. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "auth/replaylog.h"
#include "log.h"
#include "rpc/handlers.h"
#include "rpc/server.h"
#include "session/reset.h"
#include "utf8.h"

const bk_method *bk_server_method(const bk_server *srv, const char *name)
{
	const ProtobufCMethodDescriptor *d =
		protobuf_c_service_descriptor_get_method_by_name(&boxkite__v1__sandbox__descriptor, name);

	return d ? &srv->methods[d - boxkite__v1__sandbox__descriptor.methods] : NULL;
}

static bool nonce_ok(const bk_envelope *env)
{
	return env && env->nonce.len == BK_NONCE_LEN;
}

/* The call's audit line (one JSON line per request: server/log.c) and its counters. */
static void call_account(const bk_call *call, const bk_log_request *r)
{
	bk_log_call(r);
	bk_metrics_call(&call->srv->metrics, call->method ? (size_t)(call->method - call->srv->methods) : 0,
			call->method != NULL, r->status, r->detail, r->bytes_in, r->bytes_out);
}

/* Free what the call holds and hand the answer (or NULL: no answer) to the transport. */
static void call_release(bk_call *call, nng_msg *answer)
{
	bk_arena_free(call->arena);
	call->arena = NULL;
	call->env = NULL;
	nng_msg_free(call->msg); /* NULL-safe in nng 1.5.2 */
	call->msg = NULL;
	call->data = NULL;
	call->data_len = 0;
	bk_keyring_ref_put(call->keys);
	call->keys = NULL;
	call->key = NULL;
	if (call->open) {
		call->open = false;
		atomic_fetch_sub(&call->srv->calls_open, 1);
	}
	call->done(call, answer);
}

/* The answer's header: the request's nonce and method, our clock, the caller's key id once
 * its MAC verified. A BAD_VERSION refusal is written in the version of the request it refuses,
 * using only fields every version has, so that a client of that version can read why; every
 * other answer is in ours. escaped (2048 bytes) holds the message when it must be escaped. */
static void answer_header(const bk_call *call, int status, int detail, const char *message, bk_envelope *hdr,
			  char *escaped)
{
	const bk_envelope *env = call->env;

	boxkite__v1__envelope__init(hdr);
	hdr->version = env && detail == BK_DETAIL_BAD_VERSION ? env->version : BK_ENVELOPE_VERSION;
	hdr->kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE;
	hdr->key_id = call->key ? (char *)call->key->id : "";
	hdr->timestamp_ms = bk_clock_realtime_ms();
	if (nonce_ok(env))
		hdr->nonce = env->nonce;
	hdr->method = env && env->method ? env->method : "";
	hdr->status = status;
	hdr->detail = (Boxkite__V1__StatusDetail)detail;
	hdr->message = message ? (char *)message : "";
	/* A message about a file may quote its name, which need not be UTF-8: a protobuf string
	 * must be, for decoders in other languages. */
	if (message && !bk_utf8_valid(message))
		hdr->message = bk_utf8_escape(message, escaped, 2048);
}

/* Log the call and hand its answer (len bytes; NULL: none could be made) to the transport. An
 * answer is kept for re-sends when store_answer; with store_answer but no copy to keep
 * (keep_bytes false: it carries data), the request is only marked answered. */
static void call_send(bk_call *call, const bk_envelope *hdr, nng_msg *answer, size_t len, bool store_answer,
		      bool keep_bytes)
{
	if (answer && store_answer)
		bk_replay_answer(call->srv->replay, call->key->id, call->env->nonce.data,
				 keep_bytes ? nng_msg_body(answer) : NULL, len);
	call_account(call, &(bk_log_request){
		.method = hdr->method,
		.key_id = hdr->key_id,
		.status = hdr->status,
		.detail = (int)hdr->detail,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.bytes_out = answer ? len : 0,
		.message = hdr->status ? hdr->message : NULL,
	});
	call_release(call, answer);
}

static void call_end(bk_call *call, int status, int detail, const char *message, const ProtobufCMessage *body,
		     bool store_answer)
{
	bk_envelope hdr;
	char escaped[2048];
	nng_msg *answer = NULL;
	size_t len = 0;

	answer_header(call, status, detail, message, &hdr, escaped);
	/* No room for the answer (a large one): its caller is told so, in a small answer, rather
	 * than left waiting for one that never comes. */
	if (body && nng_msg_alloc(&answer, bk_envelope_sealed_size(&hdr, body, 0, call->key != NULL)) != 0) {
		answer = NULL;
		body = NULL;
		store_answer = false;
		hdr.status = BK_RESOURCE_EXHAUSTED;
		hdr.message = "boxkited is out of memory for this answer";
	}
	if (answer || nng_msg_alloc(&answer, bk_envelope_sealed_size(&hdr, body, 0, call->key != NULL)) == 0) {
		len = bk_envelope_seal(&hdr, body, call->key, nng_msg_body(answer));
		if (len == 0) {
			/* The MAC could not be computed: send nothing rather than an unsigned answer. */
			nng_msg_free(answer);
			answer = NULL;
		}
	}
	call_send(call, &hdr, answer, len, store_answer, true);
}

bool bk_call_park(bk_call *call)
{
	return call->park && call->park(call);
}

void bk_call_reply(bk_call *call, const ProtobufCMessage *response)
{
	call_end(call, BK_OK, BK_DETAIL_NONE, NULL, response, call->key != NULL);
}

struct bk_answer {
	nng_msg *msg;
	bk_envelope hdr;
	bk_layout layout;
};

bk_answer *bk_call_answer(bk_call *call, const ProtobufCMessage *response, size_t data_len, uint8_t **data)
{
	bk_answer *a = calloc(1, sizeof(*a));
	char unused[2048];

	if (!a)
		return NULL;
	answer_header(call, BK_OK, BK_DETAIL_NONE, NULL, &a->hdr, unused);
	if (nng_msg_alloc(&a->msg, bk_envelope_sealed_size(&a->hdr, response, data_len, call->key != NULL)) != 0) {
		free(a);
		return NULL;
	}
	bk_envelope_layout(&a->hdr, response, data_len, call->key != NULL, nng_msg_body(a->msg), &a->layout);
	*data = (uint8_t *)nng_msg_body(a->msg) + a->layout.data_at;
	return a;
}

void bk_call_reply_data(bk_call *call, bk_answer *a, const bk_digest *data)
{
	nng_msg *answer = a->msg;
	bk_envelope hdr = a->hdr;
	size_t len = a->layout.len;

	if (call->key && bk_envelope_sign(&a->hdr, call->key, data, nng_msg_body(answer), &a->layout) < 0) {
		nng_msg_free(answer);
		answer = NULL;
	}
	free(a);
	/* Marked answered, not kept: a chunk is read again for the asking, and 4 MiB answers would
	 * push every other kept answer out of the cache. */
	call_send(call, &hdr, answer, len, call->key != NULL, false);
}

void bk_call_answer_drop(bk_answer *a)
{
	if (!a)
		return;
	nng_msg_free(a->msg);
	free(a);
}

void bk_call_fail(bk_call *call, bk_error *err)
{
	call_end(call, err ? err->status : BK_INTERNAL, BK_DETAIL_NONE, bk_error_msg(err), NULL,
		 call->key != NULL);
	bk_error_free(err);
}

void bk_call_failf(bk_call *call, int status, int detail, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	call_end(call, status, detail, msg, NULL, call->key != NULL);
}

/* Refuse before a handler runs. Not stored for re-sends: nothing ran, and the same request
 * will be refused the same way again. */
static void refuse(bk_call *call, int status, int detail, const char *fmt, ...) BK_PRINTF(4, 5);
static void refuse(bk_call *call, int status, int detail, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	call_end(call, status, detail, msg, NULL, false);
}

/* Drop a request without an answer: its twin is still being served, and the REQ peer will take
 * that answer (a re-sent request carries the same nng request id). */
static void drop(bk_call *call)
{
	call_account(call, &(bk_log_request){
		.method = call->env->method,
		.key_id = call->key->id,
		.status = BK_ABORTED,
		.detail = BK_DETAIL_NONE,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.message = "duplicate of a request in flight: dropped, the original answers",
	});
	call_release(call, NULL);
}

/* A re-sent request that was already answered: send the same bytes again. */
static void resend(bk_call *call, uint8_t *answer, size_t len)
{
	nng_msg *msg = NULL;

	if (nng_msg_alloc(&msg, len) == 0)
		memcpy(nng_msg_body(msg), answer, len);
	free(answer);
	call_account(call, &(bk_log_request){
		.method = call->env->method,
		.key_id = call->key->id,
		.status = BK_OK,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.bytes_out = len,
		.message = "re-sent request: answered from the replay cache",
	});
	call_release(call, msg);
}

/* Authenticate a keyed request: key, MAC, window, replay. Returns true when the call may go on
 * to its handler; otherwise the call has been ended. */
static bool authenticate(bk_server *srv, bk_call *call)
{
	const bk_envelope *env = call->env;
	uint8_t *answer = NULL;
	size_t answer_len = 0;
	const bk_key *key;
	int64_t now = bk_clock_realtime_ms();

	call->keys = bk_keystore_get(srv->keystore);
	if (!call->keys) {
		refuse(call, BK_UNAVAILABLE, BK_DETAIL_AUTH_NOT_CONFIGURED,
		       "no key is configured: only Health is served (start boxkited with --key-file)");
		return false;
	}
	if (!env->key_id[0]) {
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_UNKNOWN_KEY, "%s needs a key: the request has no key id",
		       call->method->name);
		return false;
	}
	key = bk_keyring_find(bk_keyring_ref_ring(call->keys), env->key_id);
	if (!key) {
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_UNKNOWN_KEY, "unknown key id");
		return false;
	}
	/* The one hash of the data on this side: the MAC covers it, and the handler reuses it. */
	if (bk_digest_of(call->data, call->data_len, &call->data_digest) < 0) {
		refuse(call, BK_INTERNAL, BK_DETAIL_NONE, "SHA-256 failed in libcrypto");
		return false;
	}
	if (!bk_envelope_mac_ok(key, env, &call->data_digest)) {
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_BAD_MAC, "MAC does not verify");
		return false;
	}
	/* From here on the sender holds the key: answers are MAC'd and bound to its nonce. */
	call->key = key;
	switch (bk_envelope_check_time(env->timestamp_ms, now, srv->cfg.window_ms)) {
	case BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE:
		/* Unsigned: the difference of any two int64 stamps fits, and which is larger is known. */
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_STALE, "timestamp %llu ms is older than the %lld ms window",
		       (unsigned long long)((uint64_t)now - (uint64_t)env->timestamp_ms), (long long)srv->cfg.window_ms);
		return false;
	case BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE:
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_FUTURE, "timestamp %llu ms ahead of the %lld ms window",
		       (unsigned long long)((uint64_t)env->timestamp_ms - (uint64_t)now), (long long)srv->cfg.window_ms);
		return false;
	default:
		break;
	}
	switch (bk_replay_check(srv->replay, key->id, env->nonce.data, now, &answer, &answer_len)) {
	case BK_REPLAY_FRESH: {
		/* Recorded before it runs, so that a restarted boxkited refuses it too; a request that
		 * cannot be recorded does not run. The answer is kept for a re-send like any other. */
		int ret = srv->replay_log ? bk_replay_log_append(srv->replay_log, key->id, env->nonce.data,
								 (int64_t)env->timestamp_ms, now)
					  : 0;
		if (ret < 0) {
			bk_log(BK_LOG_ERROR, "replay log: %s", strerror(-ret));
			call_end(call, BK_UNAVAILABLE, BK_DETAIL_NONE, "the request could not be recorded against replay",
				 NULL, true);
			return false;
		}
		return true;
	}
	case BK_REPLAY_IN_FLIGHT:
		drop(call);
		return false;
	case BK_REPLAY_ANSWERED:
		resend(call, answer, answer_len);
		return false;
	case BK_REPLAY_REPLAYED:
		refuse(call, BK_UNAUTHENTICATED, BK_DETAIL_REPLAYED, "nonce already used");
		return false;
	case BK_REPLAY_FULL:
		refuse(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_REPLAY_CACHE_FULL,
		       "too many requests in the replay window; retry later");
		return false;
	}
	return false;
}

void bk_server_dispatch(bk_server *srv, bk_call *call, nng_msg *msg)
{
	const ProtobufCMessageDescriptor *input;
	ProtobufCMessage *request;
	bk_envelope *env;
	bk_method *method;
	size_t fields_len;

	clock_gettime(CLOCK_MONOTONIC, &call->started);
	call->srv = srv;
	call->bytes_in = nng_msg_len(msg);
	call->arena = bk_arena_new(srv->cfg.decode_cap);
	if (!call->arena) {
		nng_msg_free(msg);
		refuse(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_NONE, "out of memory");
		return;
	}
	/* The data field stays where nng received it, the message kept until the call ends; the
	 * decoder sees only the fields before it. */
	if (bk_envelope_split(nng_msg_body(msg), nng_msg_len(msg), &fields_len, &call->data, &call->data_len) < 0) {
		nng_msg_free(msg);
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, "not a boxkite.v1.Envelope");
		return;
	}
	env = boxkite__v1__envelope__unpack(bk_arena_allocator(call->arena), fields_len, nng_msg_body(msg));
	if (call->data_len)
		call->msg = msg;
	else
		nng_msg_free(msg);
	if (!env) {
		bool full = bk_arena_exhausted(call->arena);
		refuse(call, full ? BK_RESOURCE_EXHAUSTED : BK_INVALID_ARGUMENT,
		       full ? BK_DETAIL_OVERSIZED : BK_DETAIL_MALFORMED, "not a boxkite.v1.Envelope");
		return;
	}
	/* Only the canonical encoding is accepted: re-encoded, it has the length received, and no
	 * field the MAC does not cover. This refuses a string with a NUL byte (C would MAC it up to
	 * the NUL, other languages whole) and any encoding two implementations could read
	 * differently. Nothing of a refused one is repeated in the answer: its fields are what two
	 * readers could disagree on. */
	if (protobuf_c_message_get_packed_size(&env->base) != fields_len || env->base.n_unknown_fields) {
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED,
		       "not a canonically encoded Envelope (a NUL byte in a string, an unknown field?)");
		return;
	}
	call->env = env;
	if (env->version != BK_ENVELOPE_VERSION) {
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_VERSION, "envelope version %u; this server speaks %d",
		       env->version, BK_ENVELOPE_VERSION);
		return;
	}
	if (env->kind != BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST || !nonce_ok(env) || !env->method[0] ||
	    env->mac.len > BK_MAC_LEN) {
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED,
		       "a request has kind REQUEST, a %d-byte nonce, a method and at most a %d-byte MAC", BK_NONCE_LEN,
		       BK_MAC_LEN);
		return;
	}
	method = (bk_method *)bk_server_method(srv, env->method);
	if (!method) {
		refuse(call, BK_UNIMPLEMENTED, BK_DETAIL_UNKNOWN_METHOD, "no method named in service boxkite.v1.Sandbox");
		return;
	}
	call->method = method;
	if ((method->auth || env->key_id[0] || env->mac.len) && !authenticate(srv, call))
		return;
	if (env->body.len > method->max_body) {
		call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, "request body larger than this method allows",
			 NULL, call->key != NULL);
		return;
	}
	if (call->data_len > method->max_data) {
		if (method->max_data)
			call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED,
				 "request data larger than this method allows", NULL, call->key != NULL);
		else
			bk_call_failf(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, "%s takes no data field",
				      method->name);
		return;
	}
	input = method->desc->input;
	request = protobuf_c_message_unpack(input, bk_arena_allocator(call->arena), env->body.len, env->body.data);
	if (!request) {
		/* The body decoded past the per-request memory cap, or is not the method's type. */
		if (bk_arena_exhausted(call->arena))
			call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED,
				 "request decodes to more memory than allowed", NULL, call->key != NULL);
		else
			call_end(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY,
				 "body is not a valid request for this method", NULL, call->key != NULL);
		return;
	}
	/* The body too must be canonical: a string with a NUL byte would be read up to the NUL
	 * (a path "x\0/../../etc" acted on as "x"). And it holds no field this server does not
	 * know: ignoring one would serve something other than what the client asked for. */
	if (protobuf_c_message_get_packed_size(request) != env->body.len || request->n_unknown_fields) {
		call_end(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY,
			 "body is not canonically encoded (a NUL byte in a string?) or has a field this server does not "
			 "know",
			 NULL, call->key != NULL);
		return;
	}
	if (!method->handler) {
		call_end(call, BK_UNIMPLEMENTED, BK_DETAIL_NONE, "not implemented yet", NULL, call->key != NULL);
		return;
	}
	if (atomic_load(&srv->stopping)) {
		call_end(call, BK_UNAVAILABLE, BK_DETAIL_NONE, "boxkited is shutting down", NULL, call->key != NULL);
		return;
	}
	/* Counted before the reset gate is read, and a reset shuts the gate before it counts: one
	 * of them sees the other (both seq_cst), so no call slips past a reset unseen. */
	call->open = true;
	atomic_fetch_add(&srv->calls_open, 1);
	if (method->handler != bk_handle_health && bk_reset_refuses(call))
		return;
	atomic_fetch_add(&method->calls, 1);
	method->handler(call, request);
}
