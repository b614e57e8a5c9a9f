/* Inside libboxkite: the one generic call every typed function goes through, and how a
 * bk_status is filled (bkctl, linked with the static library, fills its own the same way). */
#ifndef BK_CLIENT_REQUEST_H
#define BK_CLIENT_REQUEST_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>

#include "boxkite/boxkite.h"
#include "envelope.h"
#include "error.h"

/* Seal req as `method`, send it, wait up to timeout_ms (0: the client's default), verify the
 * answer (kind, nonce, method, MAC) and decode its body as resp_desc into *resp (free with
 * protobuf_c_message_free_unpacked(*resp, NULL)). Returns the status code; fills st. An answer
 * carrying data is refused (DATA_LOSS): that is bk_request_call()'s. */
int bk_client_call(bk_client *c, const char *method, const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp, int timeout_ms,
		   bool *verified, bk_status *st);

/* A call whose request or answer carries data (a file chunk), in two steps, so that the data is
 * written straight into the request message (read from a file into it) and read straight out of
 * the answer message, never copied in between. */
typedef struct bk_request {
	nng_msg *msg;                 /* NULL once sent or dropped */
	bk_envelope hdr;
	bk_layout layout;
	uint8_t nonce[BK_NONCE_LEN];
	const bk_key *answer_key;     /* the key the answer's MAC must be under; NULL (as
					 bk_request_init() leaves it): the client's */
} bk_request;

/* Lay out a request of method carrying req and data_len bytes of data, which the caller writes at
 * *data (NULL when data_len is 0) before bk_request_call(). Nothing to free on error. */
int bk_request_init(bk_client *c, bk_request *rq, const char *method, const ProtobufCMessage *req, size_t data_len,
		    uint8_t **data, bk_status *st);
/* Free a request that is not going to be sent. rq->msg may be NULL. */
void bk_request_drop(bk_request *rq);

/* The data an answer carried, where it arrived, with its SHA-256 (computed once, for the MAC). */
typedef struct bk_answer_data {
	nng_msg *msg;
	const uint8_t *data;          /* len bytes in msg; NULL when the answer had none */
	size_t len;
	bk_digest digest;
} bk_answer_data;
void bk_answer_data_free(bk_answer_data *a);

/* bk_client_call() for a laid-out request: its data in place with digest `data` (NULL when it
 * has none), the answer's data in *answer (may be NULL: an answer with data is refused then;
 * else to be freed with bk_answer_data_free(), also after an error). Sends rq whatever happens
 * (rq->msg is NULL afterwards). */
int bk_request_call(bk_client *c, bk_request *rq, const bk_digest *data, const ProtobufCMessageDescriptor *resp_desc,
		    ProtobufCMessage **resp, int timeout_ms, bool *verified, bk_answer_data *answer, bk_status *st);

/* Free a decoded response (any message type) when it goes out of scope. */
static inline void bk_response_freep(void *p)
{
	ProtobufCMessage *m = *(ProtobufCMessage **)p;

	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}
#define _cleanup_response_ _cleanup_(bk_response_freep)

/* The command of an Exec or a ProcessStart (client/lib/exec.c): exactly one of argv (NULL-terminated)
 * and shell, and n env variables as the wire's, in vars and their pointer array ptrs (both NULL
 * when n is 0; free both). *argc receives argv's length. */
int bk_command_pb(const char *const *argv, const char *shell, const bk_env_var *env, size_t n, size_t *argc,
		  Boxkite__V1__EnvVar **vars, Boxkite__V1__EnvVar ***ptrs, bk_status *st);

/* The client's default per-call timeout in ms. */
int bk_client_timeout(const bk_client *c);

/* Whether the client's transport keeps what it carries private (ipc://, inproc://, tls+tcp://):
 * not a plain tcp:// connection, which anyone on the path can read. */
bool bk_client_private(const bk_client *c);

/* Take *key over as the client's key from now on (the old one is wiped, *key zeroed). Must not
 * race with calls in progress. */
void bk_client_set_key(bk_client *c, bk_key *key);

#endif
