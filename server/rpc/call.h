/* The call API: how a handler ends the call it was given (exactly once, now or later, from any
 * thread), and how the pipeline ends the calls it refuses. Every end is sealed (MAC'd with the
 * caller's key once it verified), written in the audit log and counted. */
#ifndef BK_CALL_H
#define BK_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "log.h"
#include "rpc/server.h"

/* The handler will end the call later, after a wait of its own (a long-poll): the transport
 * serves other requests meanwhile, so that waiting calls never hold the admission limit
 * (--contexts). false when it cannot (BK_PARKED_MAX calls wait already): answer now instead. */
#define BK_PARKED_MAX 1024
bool bk_call_park(bk_call *call);

/* Be told (fn(arg), on a transport thread: it must not block) once the transport is done with the
 * call's answer: handed to its connection, which writes at most one answer at a time, or dropped.
 * What the answer holds is no longer the handler's to count from then on. Before the call ends. */
void bk_call_on_sent(bk_call *call, void (*fn)(void *arg), void *arg);

/* End a call with a response message (status OK). */
void bk_call_reply(bk_call *call, const ProtobufCMessage *response);

/* An answer that carries data (a file chunk), built in two steps so that the data is written
 * straight into the message: bk_call_answer() lays out response and room for data_len bytes
 * and returns where they go (NULL when out of memory: end the call otherwise); the handler
 * writes them there, then bk_call_reply_data() signs the answer with the data's digest (which
 * the handler computed, and may have used for itself) and ends the call, or
 * bk_call_answer_drop() frees it and the handler ends the call another way. Such answers are
 * not kept for re-sends (docs/PROTOCOL.md, "Replay and resend"). */
typedef struct bk_answer bk_answer;
bk_answer *bk_call_answer(bk_call *call, const ProtobufCMessage *response, size_t data_len, uint8_t **data);
void bk_call_reply_data(bk_call *call, bk_answer *answer, const bk_digest *data);
void bk_call_answer_drop(bk_answer *answer);
/* End a call with an error status and message; takes ownership of err. */
void bk_call_fail(bk_call *call, bk_error *err);
/* End a call with a status, a detail and a formatted message. */
void bk_call_failf(bk_call *call, int status, int detail, const char *fmt, ...) BK_PRINTF(4, 5);

/* A request envelope with a nonce an answer can be bound to (env may be NULL). */
static inline bool bk_call_nonce_ok(const bk_envelope *env)
{
	return env && env->nonce.len == BK_NONCE_LEN;
}

/* For the pipeline (rpc/pipeline.c): end a call with a status and, when body is not NULL, a
 * response (store_answer: kept for a re-send of the same request); write a call's audit line and
 * count it; hand the answer (NULL: none) to the transport. */
void bk_call_end(bk_call *call, int status, int detail, const char *message, const ProtobufCMessage *body,
		 bool store_answer);
void bk_call_account(const bk_call *call, const bk_log_request *r);
void bk_call_release(bk_call *call, nng_msg *answer);

#endif
