/* The request pipeline, in the order a reviewer checks it against docs/PROTOCOL.md:
 *
 *   decode the Envelope (bounded allocator) → version, kind, nonce, method present
 *   → find the method row → key (or unkeyed Health) → MAC, constant time → time window
 *   → replay cache → body size limit → decode the body → handler
 *
 * Nothing of the body is decoded before the MAC verified. Once it did, every answer, errors
 * included, is MAC'd with the caller's key and bound to its nonce; before, answers carry no MAC
 * and a client treats them as unverified. */
#include "rpc/call.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "auth/replaylog.h"
#include "log.h"
#include "utf8.h"

const bk_method *bk_server_method(const bk_server *srv, const char *name)
{
	const ProtobufCMethodDescriptor *d =
		protobuf_c_service_descriptor_get_method_by_name(&boxkite__v1__sandbox__descriptor, name);

	return d ? &srv->methods[d - boxkite__v1__sandbox__descriptor.methods] : NULL;
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
	bk_call_end(call, status, detail, msg, NULL, false);
}

/* Drop a request without an answer: its twin is still being served, and the REQ peer will take
 * that answer (a re-sent request carries the same nng request id). */
static void drop(bk_call *call)
{
	bk_call_account(call, &(bk_log_request){
		.method = call->env->method,
		.key_id = call->key->id,
		.status = BK_ABORTED,
		.detail = BK_DETAIL_NONE,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.message = "duplicate of a request in flight: dropped, the original answers",
	});
	bk_call_release(call, NULL);
}

/* A re-sent request that was already answered: send the same bytes again. */
static void resend(bk_call *call, uint8_t *answer, size_t len)
{
	nng_msg *msg = NULL;

	if (nng_msg_alloc(&msg, len) == 0)
		memcpy(nng_msg_body(msg), answer, len);
	free(answer);
	bk_call_account(call, &(bk_log_request){
		.method = call->env->method,
		.key_id = call->key->id,
		.status = BK_OK,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.bytes_out = len,
		.message = "re-sent request: answered from the replay cache",
	});
	bk_call_release(call, msg);
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
	/* A warm pool's claim key, shared by the pool's pods, opens no sandbox: it may only hand
	 * one to its tenant, by a Reset that installs the tenant's key (the handler checks that). */
	if (bk_keyring_ref_claim(call->keys) && !(call->method->flags & BK_METHOD_CLAIM)) {
		refuse(call, BK_PERMISSION_DENIED, BK_DETAIL_CLAIM_KEY,
		       "%s refused: a warm pool's claim key serves Health and Reset only, until a Reset installs the "
		       "tenant's key", call->method->name);
		return false;
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
			bk_call_end(call, BK_UNAVAILABLE, BK_DETAIL_NONE, "the request could not be recorded against replay",
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

/* The gate a Reset shuts (server/session/reset.c): true when the call was refused (and ended). */
static bool gate_refuses(bk_call *call)
{
	bk_server *srv = call->srv;

	switch (atomic_load(&srv->gate)) {
	case BK_GATE_RESET:
		bk_call_failf(call, BK_UNAVAILABLE, 0, "a reset is running: retry when it is over");
		return true;
	case BK_GATE_FAILED:
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "this sidecar serves only Health: %s; restart or discard it",
			      srv->failure);
		return true;
	default:
		return false;
	}
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
	const ProtobufCMessageDescriptor *in = NULL;
	if (bk_utf8_message_check(&env->base, &in)) {
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_MALFORMED, "an Envelope's strings are UTF-8");
		return;
	}
	call->env = env;
	if (env->version != BK_ENVELOPE_VERSION) {
		refuse(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_VERSION, "envelope version %u; this server speaks %d",
		       env->version, BK_ENVELOPE_VERSION);
		return;
	}
	if (env->kind != BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST || !bk_call_nonce_ok(env) || !env->method[0] ||
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
	if ((!(method->flags & BK_METHOD_UNKEYED) || env->key_id[0] || env->mac.len) && !authenticate(srv, call))
		return;
	if (env->body.len > method->max_body) {
		bk_call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED, "request body larger than this method allows",
			 NULL, call->key != NULL);
		return;
	}
	if (call->data_len > method->max_data) {
		if (method->max_data)
			bk_call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED,
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
			bk_call_end(call, BK_RESOURCE_EXHAUSTED, BK_DETAIL_OVERSIZED,
				 "request decodes to more memory than allowed", NULL, call->key != NULL);
		else
			bk_call_end(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY,
				 "body is not a valid request for this method", NULL, call->key != NULL);
		return;
	}
	/* The body too must be canonical: a string with a NUL byte would be read up to the NUL
	 * (a path "x\0/../../etc" acted on as "x"). And it holds no field this server does not
	 * know: ignoring one would serve something other than what the client asked for. */
	if (protobuf_c_message_get_packed_size(request) != env->body.len || request->n_unknown_fields) {
		bk_call_end(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY,
			 "body is not canonically encoded (a NUL byte in a string?) or has a field this server does not "
			 "know",
			 NULL, call->key != NULL);
		return;
	}
	/* Every string is UTF-8, as protobuf says: one that is not would be kept (a process's
	 * shell, its tag) and repeated in answers that strict decoders then refuse whole. */
	const ProtobufCFieldDescriptor *bad = bk_utf8_message_check(request, &in);
	if (bad) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, BK_DETAIL_BAD_BODY, "%s.%s is not UTF-8", in->short_name,
			      bad->name);
		return;
	}
	if (!method->handler) {
		bk_call_end(call, BK_UNIMPLEMENTED, BK_DETAIL_NONE, "not implemented yet", NULL, call->key != NULL);
		return;
	}
	if (atomic_load(&srv->stopping)) {
		bk_call_end(call, BK_UNAVAILABLE, BK_DETAIL_NONE, "boxkited is shutting down", NULL, call->key != NULL);
		return;
	}
	/* Counted before the reset gate is read, and a reset shuts the gate before it counts: one
	 * of them sees the other (both seq_cst), so no call slips past a reset unseen. */
	call->open = true;
	atomic_fetch_add(&srv->calls_open, 1);
	if (!(method->flags & BK_METHOD_DURING_RESET) && gate_refuses(call))
		return;
	atomic_fetch_add(&method->calls, 1);
	if (call->key && call->keyed)
		call->keyed(call);
	method->handler(call, request);
}
