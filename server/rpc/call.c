/* The call: how a handler ends it (reply, data answer, failure), and how every end is sealed,
 * accounted and handed to the transport. The pipeline (rpc/pipeline.c) ends calls it refuses the
 * same way. */
#include "rpc/call.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "utf8.h"

/* The call's audit line (one JSON line per request: server/log.c) and its counters. */
void bk_call_account(const bk_call *call, const bk_log_request *r)
{
	bk_log_call(r);
	bk_metrics_call(&call->srv->metrics, call->method ? (size_t)(call->method - call->srv->methods) : 0,
			call->method != NULL, r->status, r->detail, r->bytes_in, r->bytes_out);
}

/* Free what the call holds and hand the answer (or NULL: no answer) to the transport. */
void bk_call_release(bk_call *call, nng_msg *answer)
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
	bk_keyring_ref_put(call->answer_keys);
	call->answer_keys = NULL;
	call->answer_key = NULL;
	if (call->open) {
		call->open = false;
		atomic_fetch_sub(&call->srv->calls_open, 1);
	}
	call->done(call, answer);
}

/* The key an answer is MAC'd with: the caller's once its MAC verified, or the one its Reset
 * installed; NULL: the answer is not MAC'd. */
static const bk_key *answer_key(const bk_call *call)
{
	return call->answer_key ? call->answer_key : call->key;
}

/* The answer's header: the request's nonce and method, our clock, the id of the key that MACs
 * it. A BAD_VERSION refusal is written in the version of the request it refuses,
 * using only fields every version has, so that a client of that version can read why; every
 * other answer is in ours. escaped (2048 bytes) holds the message when it must be escaped. */
static void answer_header(const bk_call *call, int status, int detail, const char *message, bk_envelope *hdr,
			  char *escaped)
{
	const bk_envelope *env = call->env;

	boxkite__v1__envelope__init(hdr);
	hdr->version = env && detail == BK_DETAIL_BAD_VERSION ? env->version : BK_ENVELOPE_VERSION;
	hdr->kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE;
	hdr->key_id = answer_key(call) ? (char *)answer_key(call)->id : "";
	hdr->timestamp_ms = bk_clock_realtime_ms();
	if (bk_call_nonce_ok(env))
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
	bk_call_account(call, &(bk_log_request){
		.method = hdr->method,
		.key_id = call->key ? call->key->id : "",
		.key_installed = call->answer_key ? call->answer_key->id : NULL,
		.status = hdr->status,
		.detail = (int)hdr->detail,
		.duration_us = bk_elapsed_us(&call->started),
		.bytes_in = call->bytes_in,
		.bytes_out = answer ? len : 0,
		.message = hdr->status ? hdr->message : NULL,
	});
	bk_call_release(call, answer);
}

void bk_call_end(bk_call *call, int status, int detail, const char *message, const ProtobufCMessage *body,
		 bool store_answer)
{
	bk_envelope hdr;
	char escaped[2048];
	nng_msg *answer = NULL;
	size_t len = 0;

	answer_header(call, status, detail, message, &hdr, escaped);
	/* No room for the answer (a large one): its caller is told so, in a small answer, rather
	 * than left waiting for one that never comes. */
	if (body && nng_msg_alloc(&answer, bk_envelope_sealed_size(&hdr, body, 0, answer_key(call) != NULL)) != 0) {
		answer = NULL;
		body = NULL;
		store_answer = false;
		hdr.status = BK_RESOURCE_EXHAUSTED;
		hdr.message = "boxkited is out of memory for this answer";
	}
	if (answer || nng_msg_alloc(&answer, bk_envelope_sealed_size(&hdr, body, 0, answer_key(call) != NULL)) == 0) {
		len = bk_envelope_seal(&hdr, body, answer_key(call), nng_msg_body(answer));
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

void bk_call_on_sent(bk_call *call, void (*fn)(void *arg), void *arg)
{
	call->sent = fn;
	call->sent_arg = arg;
}

void bk_call_reply(bk_call *call, const ProtobufCMessage *response)
{
	bk_call_end(call, BK_OK, BK_DETAIL_NONE, NULL, response, call->key != NULL);
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
	if (nng_msg_alloc(&a->msg, bk_envelope_sealed_size(&a->hdr, response, data_len, answer_key(call) != NULL)) != 0) {
		free(a);
		return NULL;
	}
	bk_envelope_layout(&a->hdr, response, data_len, answer_key(call) != NULL, nng_msg_body(a->msg), &a->layout);
	*data = (uint8_t *)nng_msg_body(a->msg) + a->layout.data_at;
	return a;
}

void bk_call_reply_data(bk_call *call, bk_answer *a, const bk_digest *data)
{
	nng_msg *answer = a->msg;
	bk_envelope hdr = a->hdr;
	size_t len = a->layout.len;

	if (answer_key(call) && bk_envelope_sign(&a->hdr, answer_key(call), data, nng_msg_body(answer), &a->layout) < 0) {
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
	bk_call_end(call, err ? err->status : BK_INTERNAL, BK_DETAIL_NONE, bk_error_msg(err), NULL,
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
	bk_call_end(call, status, detail, msg, NULL, call->key != NULL);
}

