/* The wire tier's fixture: the boxkited front started in-process on ipc:// in a private temp dir
 * (no executor: srv.executor stays NULL), a raw nng REQ peer that can send bytes no real client
 * would, and a forger that builds and seals envelopes with the server's own key.
 *
 * The fixture replaces the Exec row's handler with a counting one, so a test can prove which
 * requests reached a handler and which were refused before. */
#ifndef BK_WIRE_FIXTURE_H
#define BK_WIRE_FIXTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "rpc/call.h"
#include "stub.h"

#define WIRE_KEY_ID "wire"
/* Long enough for a loaded CI machine under ASan; only a failing test ever waits this long. */
#define WIRE_TIMEOUT_MS 10000

typedef struct wire {
	char dir[64];       /* private temp dir: socket, key file */
	char url[96];       /* ipc://<dir>/s.sock */
	char key_path[96];  /* <dir>/key, when keyed */
	bk_config cfg;
	bk_server srv;
	bool srv_up;
	bk_keyring *ring;   /* the server's key file, loaded again for forging; NULL when unkeyed */
	const bk_key *key;  /* the one key of ring */
	nng_socket req;     /* the raw REQ peer */
	bool req_open;
	stub *stub;         /* wire_start_stubbed: the stub executor and file worker */
	struct bk_link *links[2];
} wire;

/* Times the counting Exec handler ran, in this process. */
extern atomic_uint wire_exec_runs;

/* Start a server: keyed (a fresh key file named WIRE_KEY_ID) or not, with the extra flags of the
 * NULL-terminated list extra (may be NULL). Prints why and returns -1 on failure. */
int wire_start(wire **out, bool keyed, const char *const *extra);
/* wire_start(), keyed, its key file given as a warm pool's claim key (--claim-key-file). */
int wire_start_claim(wire **out);
/* wire_start(), keyed, with the real handlers and the front's exec and file machinery, its
 * channels to a stub executor and file worker (stub.h), files served from w->dir. */
int wire_start_stubbed(wire **out, const char *const *extra);
/* Stop the server, close the peer, remove the temp dir. Accepts NULL. */
void wire_stop(wire *w);
/* wire_stop() as a cmocka teardown of a test whose state is the wire. */
int wire_teardown(void **state);
/* A libboxkite client of w's server with its key (fails the test when it cannot open). */
struct bk_client *wire_client(wire *w);

/* Sum of every method row's `calls`: handlers dispatch has run so far. */
unsigned long wire_handler_runs(const wire *w);
bk_method *wire_method(wire *w, const char *name);

/* A request header as a real client makes it: version 2, kind REQUEST, the current time, a
 * fresh nonce (written to nonce, which hdr points into), method, key_id ("" for none). */
void wire_header(bk_envelope *hdr, uint8_t nonce[BK_NONCE_LEN], const char *method, const char *key_id);

/* hdr (with its data, if it has any) with body bytes and a MAC of mac_len bytes (mac may be
 * NULL), packed by protobuf-c: any field may hold anything. malloc'd; *len set. */
uint8_t *wire_pack(const bk_envelope *hdr, const uint8_t *body, size_t body_len, const uint8_t *mac, size_t mac_len,
		   size_t *len);
/* wire_pack() with the MAC of hdr (its data included) and body under key (no MAC when key is
 * NULL). */
uint8_t *wire_forge(const bk_envelope *hdr, const uint8_t *body, size_t body_len, const bk_key *key, size_t *len);
/* hdr with body sealed by bk_envelope_seal(), as libboxkite does. malloc'd; *len set. */
uint8_t *wire_seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, size_t *len);

/* Send bytes on the raw peer and wait up to timeout_ms for the answer. Returns 0 with *answer
 * (free it with nng_msg_free) or the nng error: NNG_ETIMEDOUT when nothing came back. */
int wire_send(wire *w, const uint8_t *req, size_t len, int timeout_ms, nng_msg **answer);
/* Send and decode the answer; fails the test when none comes or it is not an Envelope. */
bk_envelope *wire_call(wire *w, const uint8_t *req, size_t len);

/* Assert that ans answers the request (nonce, method) with status and detail, and that it is
 * MAC'd under key, or carries no MAC and no key id when key is NULL. nonce NULL: the request had
 * no usable nonce, so the answer must carry none. */
void wire_assert_answer(const bk_envelope *ans, int status, int detail, const uint8_t *nonce, const char *method,
			const bk_key *key);

/* Send req and assert the answer (as wire_assert_answer) and that no handler ran. */
void wire_expect_refusal(wire *w, const uint8_t *req, size_t len, int status, int detail, const uint8_t *nonce,
			 const char *method, const bk_key *key);
/* A keyed Exec stamped ts, with a valid MAC, refused with detail: MAC'd, as its sender holds
 * the key. */
void wire_expect_time_refusal(wire *w, int64_t ts, int detail);

/* The serialized ExecRequest that runs `true`. malloc'd; *len set. */
uint8_t *wire_exec_body(size_t *len);

void wire_envelope_free(bk_envelope *env);
BK_DEFINE_PTR_CLEANUP(wire_envelope_freep, bk_envelope, wire_envelope_free)

#endif
