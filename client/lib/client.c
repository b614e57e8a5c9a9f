#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <openssl/crypto.h>

#include "request.h"
#include "clock.h"
#include "keys.h"
#include "nngclose.h"
#include "tls.h"
#include "version.h"

/* Answers can carry command output and file chunks; nng's 1 MiB default is far too small. */
#define CLIENT_RECV_MAX (1u << 30)
/* How long closing the connection may take (see bk_client_close). */
#define CLIENT_CLOSE_MS 2000
/* How long without a connection before the server counts as gone (a restart reconnects sooner). */
#define LOST_GRACE_MS 3000

/* A request waiting for its answer: what a lost connection ends. */
struct inflight {
	struct inflight *next;
	nng_aio *aio;
};

struct bk_client {
	nng_socket sock;
	bk_key key;
	bool keyed;
	bool private_transport;
	int timeout_ms;
	/* The connection, watched: nng re-sends a request over a new connection when one drops, and
	 * waits for one as long as the request's timeout — a minute and more for a long-poll, with
	 * boxkited gone. Once no connection has been there for LOST_GRACE_MS, what waits ends
	 * UNAVAILABLE, and so does what is asked until a connection is back. */
	pthread_mutex_t lock;     /* everything below */
	unsigned pipes;
	bool lost;                /* no connection for LOST_GRACE_MS */
	nng_aio *grace;           /* runs LOST_GRACE_MS after the last connection went */
	bool grace_armed;
	struct inflight *inflight;
};

BK_EXPORT int bk_status_set(bk_status *st, int code, int detail, bool verified, const char *fmt, ...)
{
	va_list ap;

	if (!st)
		return code;
	st->code = code;
	st->detail = detail;
	st->verified = verified;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
	return code;
}

BK_EXPORT int bk_status_errno(bk_status *st, int errnum, const char *fmt, ...)
{
	char what[sizeof(st->message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return bk_status_set(st, bk_status_from_errno(errnum), 0, false, "%s: %s", what, strerror(errnum));
}

static int status_from_error(bk_status *st, bk_error *err)
{
	int code = bk_status_set(st, err ? err->status : BK_INTERNAL, 0, false, "%s", bk_error_msg(err));

	bk_error_free(err);
	return code;
}

static int client_load_key(bk_client *c, const bk_client_options *o, bk_status *st)
{
	_cleanup_(bk_keyring_freep) bk_keyring *ring = NULL;
	const bk_key *k;
	bk_error *err = NULL;

	if (!o->key_file) {
		if (!o->key)
			return BK_OK;
		if (bk_key_init(&c->key, o->key_id ? o->key_id : "", o->key, o->key_len, &err) < 0)
			return status_from_error(st, err);
		c->keyed = true;
		return BK_OK;
	}
	if (bk_keyring_load(o->key_file, &ring, &err) < 0)
		return status_from_error(st, err);
	k = o->key_id ? bk_keyring_find(ring, o->key_id) : &ring->keys[0];
	if (!k)
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "key file %s has no key '%s'", o->key_file,
				     o->key_id);
	if (bk_key_init(&c->key, k->id, k->secret, k->len, &err) < 0)
		return status_from_error(st, err);
	c->keyed = true;
	return BK_OK;
}

static void grace_over(void *arg)
{
	bk_client *c = arg;

	pthread_mutex_lock(&c->lock);
	c->grace_armed = false;
	if (nng_aio_result(c->grace) == 0 && c->pipes == 0) {
		c->lost = true;
		for (struct inflight *r = c->inflight; r; r = r->next)
			nng_aio_cancel(r->aio);
	}
	pthread_mutex_unlock(&c->lock);
}

static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	bk_client *c = arg;

	(void)p;
	pthread_mutex_lock(&c->lock);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		c->pipes++;
		c->lost = false;
	} else if (c->pipes && --c->pipes == 0 && !c->grace_armed) {
		c->grace_armed = true;
		nng_sleep_aio(LOST_GRACE_MS, c->grace);
	}
	pthread_mutex_unlock(&c->lock);
}

int bk_client_open(bk_client **out, const char *url, const bk_client_options *opts, bk_status *st)
{
	bk_client_options none = { 0 };
	nng_tls_config *tls = NULL;
	bk_client *c;
	int rv, code;

	*out = NULL;
	if (!opts)
		opts = &none;
	if (!url)
		url = BK_DEFAULT_URL;
	/* nng says only "Invalid argument" to a bare path: say what a URL looks like. */
	if (!strstr(url, "://"))
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
				     "%s is not a URL: write ipc://%s for a Unix socket, or tcp://HOST:PORT", url, url);
	c = calloc(1, sizeof(*c));
	if (!c)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 30000;
	pthread_mutex_init(&c->lock, NULL);
	c->private_transport = bk_url_private(url);
	code = client_load_key(c, opts, st);
	if (code != BK_OK) {
		free(c);
		return code;
	}
	rv = nng_req0_open(&c->sock);
	if (rv == 0 && (rv = nng_aio_alloc(&c->grace, grace_over, c)) == 0 &&
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_event, c)) == 0)
		rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_event, c);
	if (rv) {
		bk_client_close(c);
		return bk_status_set(st, BK_INTERNAL, 0, false, "nng_req0_open: %s", nng_strerror(rv));
	}
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, CLIENT_RECV_MAX);
	/* No timed re-sends: a command may run for minutes, and a copy of its request sent after
	 * the time window would be answered STALE in its place. nng still re-sends at once over a
	 * new connection if one drops, which the server's replay cache answers correctly. */
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	/* A synchronous first dial, so an unreachable server is an error now rather than a
	 * timeout later; nng reconnects by itself afterwards. */
	if (bk_tls_url(url)) {
		bk_error *err = NULL;
		if (!opts->tls_cert) {
			bk_client_close(c);
			return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
					     "%s: a tls+tcp:// URL needs the server's certificate to pin", url);
		}
		if (bk_tls_client_config(opts->tls_cert, &tls, &err) < 0) {
			bk_client_close(c);
			return status_from_error(st, err);
		}
	}
	rv = bk_tls_dial(c->sock, url, tls);
	if (tls)
		nng_tls_config_free(tls); /* the dialer holds its own reference */
	if (rv) {
		bk_client_close(c);
		return bk_status_set(st, BK_UNAVAILABLE, 0, false, "cannot connect to %s: %s", url, nng_strerror(rv));
	}
	*out = c;
	return bk_status_set(st, BK_OK, 0, false, "connected");
}

const char *bk_version(void)
{
	return BK_VERSION;
}

void bk_client_close(bk_client *c)
{
	if (!c)
		return;
	/* Bounded (common/nngclose.h): libnng 1.5.2 can hang in its close; a client that is done
	 * goes on, leaving the socket — and what its callbacks use — to nng. */
	if (c->sock.id && bk_nng_close(c->sock, CLIENT_CLOSE_MS) < 0)
		return;
	if (c->grace) {
		nng_aio_stop(c->grace);
		nng_aio_free(c->grace);
	}
	pthread_mutex_destroy(&c->lock);
	if (c->keyed)
		bk_key_clear(&c->key);
	free(c);
}

int bk_client_timeout(const bk_client *c)
{
	return c->timeout_ms;
}

bool bk_client_private(const bk_client *c)
{
	return c->private_transport;
}

void bk_client_set_key(bk_client *c, bk_key *key)
{
	if (c->keyed)
		bk_key_clear(&c->key);
	c->key = *key;
	c->keyed = true;
	OPENSSL_cleanse(key, sizeof(*key));
}

/* Register a request's aio with the connection watch: false (nothing registered) when the
 * server is gone already. */
static bool inflight_add(bk_client *c, struct inflight *r)
{
	bool lost;

	pthread_mutex_lock(&c->lock);
	lost = c->lost;
	if (!lost) {
		r->next = c->inflight;
		c->inflight = r;
	}
	pthread_mutex_unlock(&c->lock);
	return !lost;
}

/* Unregister it: true when the connection watch ended it. */
static bool inflight_remove(bk_client *c, struct inflight *r)
{
	bool lost;

	pthread_mutex_lock(&c->lock);
	for (struct inflight **pp = &c->inflight; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	lost = c->lost;
	pthread_mutex_unlock(&c->lock);
	return lost;
}

/* Send msg and wait for the answer on a context of its own; NNG_ECONNSHUT when the connection
 * to the server was lost and did not come back. */
static int roundtrip(bk_client *c, nng_msg *msg, int timeout_ms, nng_msg **answer)
{
	nng_aio *aio = NULL;
	struct inflight r = { 0 };
	nng_ctx ctx;
	int rv;

	rv = nng_ctx_open(&ctx, c->sock);
	if (rv) {
		nng_msg_free(msg);
		return rv;
	}
	rv = nng_aio_alloc(&aio, NULL, NULL);
	if (rv) {
		nng_msg_free(msg);
		nng_ctx_close(ctx);
		return rv;
	}
	r.aio = aio;
	if (!inflight_add(c, &r)) {
		nng_msg_free(msg);
		rv = NNG_ECONNSHUT;
		goto out;
	}
	nng_aio_set_timeout(aio, timeout_ms);
	nng_aio_set_msg(aio, msg);
	nng_ctx_send(ctx, aio);
	nng_aio_wait(aio);
	rv = nng_aio_result(aio);
	if (rv) {
		nng_msg_free(nng_aio_get_msg(aio));
	} else {
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
		if (rv == 0)
			*answer = nng_aio_get_msg(aio);
	}
	if (inflight_remove(c, &r) && rv == NNG_ECANCELED)
		rv = NNG_ECONNSHUT;
out:
	nng_aio_free(aio);
	nng_ctx_close(ctx);
	return rv;
}

int bk_request_init(bk_client *c, bk_request *rq, const char *method, const ProtobufCMessage *req, size_t data_len,
		    uint8_t **data, bk_status *st)
{
	size_t size;

	memset(rq, 0, sizeof(*rq));
	if (data)
		*data = NULL;
	if (getrandom(rq->nonce, sizeof(rq->nonce), 0) != (ssize_t)sizeof(rq->nonce))
		return bk_status_set(st, BK_INTERNAL, 0, false, "cannot get random bytes for a nonce");
	boxkite__v1__envelope__init(&rq->hdr);
	rq->hdr.version = BK_ENVELOPE_VERSION;
	rq->hdr.kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST;
	rq->hdr.key_id = c->keyed ? c->key.id : "";
	rq->hdr.timestamp_ms = bk_clock_realtime_ms();
	rq->hdr.nonce.data = rq->nonce;
	rq->hdr.nonce.len = sizeof(rq->nonce);
	rq->hdr.method = (char *)method;
	size = bk_envelope_sealed_size(&rq->hdr, req, data_len, c->keyed);
	if (nng_msg_alloc(&rq->msg, size) != 0) {
		rq->msg = NULL;
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "cannot allocate a %zu-byte request", size);
	}
	bk_envelope_layout(&rq->hdr, req, data_len, c->keyed, nng_msg_body(rq->msg), &rq->layout);
	if (data && data_len)
		*data = (uint8_t *)nng_msg_body(rq->msg) + rq->layout.data_at;
	return BK_OK;
}

void bk_request_drop(bk_request *rq)
{
	nng_msg_free(rq->msg);
	rq->msg = NULL;
}

void bk_answer_data_free(bk_answer_data *a)
{
	if (!a)
		return;
	nng_msg_free(a->msg);
	*a = (bk_answer_data){ 0 };
}

/* The answer env, of another envelope version than ours, to the request of method and nonce:
 * a server of that version refusing ours says so in its version (fields every version has, no
 * MAC); anything else from it is not for us. */
static int other_version(const bk_envelope *env, const char *method, const uint8_t *nonce, bk_status *st)
{
	if (env->kind == BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE && env->nonce.len == BK_NONCE_LEN &&
	    CRYPTO_memcmp(env->nonce.data, nonce, BK_NONCE_LEN) == 0 && strcmp(env->method, method) == 0 &&
	    env->status != BK_OK && env->detail == BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_BAD_VERSION && !env->mac.len)
		return bk_status_set(st, env->status, env->detail, false,
				     "(unverified answer) %s: the server speaks envelope version %u, this client %d: %s",
				     method, env->version, BK_ENVELOPE_VERSION, env->message);
	return bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: the answer is an Envelope of version %u, not %d", method,
			     env->version, BK_ENVELOPE_VERSION);
}

int bk_request_call(bk_client *c, bk_request *rq, const bk_digest *data, const ProtobufCMessageDescriptor *resp_desc,
		    ProtobufCMessage **resp, int timeout_ms, bool *verified, bk_answer_data *answer, bk_status *st)
{
	const char *method = rq->hdr.method;
	nng_msg *msg = NULL;
	bk_envelope *env = NULL;
	bk_answer_data got = { 0 };
	size_t fields_len;
	bool mac_ok = false;
	int rv, code;

	*verified = false;
	if (answer)
		*answer = (bk_answer_data){ 0 };
	if (c->keyed && bk_envelope_sign(&rq->hdr, &c->key, data, nng_msg_body(rq->msg), &rq->layout) < 0) {
		bk_request_drop(rq);
		return bk_status_set(st, BK_INTERNAL, 0, false, "%s: cannot compute the request's MAC", method);
	}
	rv = roundtrip(c, rq->msg, timeout_ms > 0 ? timeout_ms : c->timeout_ms, &msg);
	rq->msg = NULL;
	if (rv == NNG_ETIMEDOUT)
		return bk_status_set(st, BK_DEADLINE_EXCEEDED, 0, false, "%s: no answer in time", method);
	if (rv == NNG_ECONNSHUT)
		return bk_status_set(st, BK_UNAVAILABLE, 0, false,
				     "%s: the connection to boxkited was lost and has not come back in %d s", method,
				     LOST_GRACE_MS / 1000);
	if (rv)
		return bk_status_set(st, BK_UNAVAILABLE, 0, false, "%s: %s", method, nng_strerror(rv));

	/* The data stays where it arrived; the decoder sees the fields before it. */
	if (bk_envelope_split(nng_msg_body(msg), nng_msg_len(msg), &fields_len, &got.data, &got.len) < 0 ||
	    !(env = boxkite__v1__envelope__unpack(NULL, fields_len, nng_msg_body(msg)))) {
		nng_msg_free(msg);
		return bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: the answer is not an Envelope", method);
	}
	got.msg = msg;
	/* As the server does: only a canonical encoding, whose strings the MAC covers whole. */
	if (protobuf_c_message_get_packed_size(&env->base) != fields_len || env->base.n_unknown_fields) {
		code = bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: the answer is not a canonical Envelope", method);
		goto out;
	}
	if (env->version != BK_ENVELOPE_VERSION) {
		code = other_version(env, method, rq->nonce, st);
		goto out;
	}
	/* The answer must be to this request: its kind, nonce and method, and — when keyed — a MAC
	 * under our key, which covers all of them. */
	if (env->kind != BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE || env->nonce.len != BK_NONCE_LEN ||
	    CRYPTO_memcmp(env->nonce.data, rq->nonce, BK_NONCE_LEN) != 0 || strcmp(env->method, method) != 0) {
		code = bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: the answer is not for this request", method);
		goto out;
	}
	if (env->mac.len) {
		/* The one hash of the answer's data on this side: the caller reuses it. */
		if (bk_digest_of(got.data, got.len, &got.digest) < 0) {
			code = bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
			goto out;
		}
		const bk_key *k = rq->answer_key ? rq->answer_key : c->keyed ? &c->key : NULL;
		mac_ok = k && strcmp(env->key_id, k->id) == 0 && bk_envelope_mac_ok(k, env, &got.digest);
		if (!mac_ok) {
			code = bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: the answer's MAC does not verify", method);
			goto out;
		}
	}
	if (env->status != BK_OK) {
		code = bk_status_set(st, env->status, env->detail, mac_ok, "%s%s", mac_ok ? "" : "(unverified answer) ",
				     env->message);
		goto out;
	}
	/* A keyed caller accepts success only with a MAC: anyone on the path could forge an
	 * unauthenticated "OK". */
	if ((c->keyed || rq->answer_key) && !mac_ok) {
		code = bk_status_set(st, BK_DATA_LOSS, 0, false, "%s: success answer without a MAC", method);
		goto out;
	}
	if (got.len && !answer) {
		code = bk_status_set(st, BK_DATA_LOSS, 0, mac_ok, "%s: an answer with data this call does not take", method);
		goto out;
	}
	*resp = protobuf_c_message_unpack(resp_desc, NULL, env->body.len, env->body.data);
	if (!*resp) {
		code = bk_status_set(st, BK_DATA_LOSS, 0, mac_ok, "%s: cannot decode the answer", method);
		goto out;
	}
	*verified = mac_ok;
	code = bk_status_set(st, BK_OK, 0, mac_ok, "OK");
	if (answer && got.len) {
		*answer = got;
		got = (bk_answer_data){ 0 };
	}
out:
	bk_answer_data_free(&got);
	protobuf_c_message_free_unpacked(&env->base, NULL);
	return code;
}

int bk_client_call(bk_client *c, const char *method, const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp, int timeout_ms,
		   bool *verified, bk_status *st)
{
	bk_request rq;
	int code;

	*verified = false;
	code = bk_request_init(c, &rq, method, req, 0, NULL, st);
	if (code != BK_OK)
		return code;
	return bk_request_call(c, &rq, NULL, resp_desc, resp, timeout_ms, verified, NULL, st);
}

int bk_health(bk_client *c, bk_health_info *out, bk_status *st)
{
	Boxkite__V1__HealthRequest req = BOXKITE__V1__HEALTH_REQUEST__INIT;
	Boxkite__V1__HealthResponse *resp = NULL;
	bool verified;
	int code;

	code = bk_client_call(c, "Health", &req.base, &boxkite__v1__health_response__descriptor,
			      (ProtobufCMessage **)&resp, 0, &verified, st);
	if (code != BK_OK)
		return code;
	memset(out, 0, sizeof(*out));
	snprintf(out->version, sizeof(out->version), "%s", resp->version);
	snprintf(out->mode, sizeof(out->mode), "%s", resp->mode);
	out->sandbox_ready = resp->sandbox_ready;
	out->auth_configured = resp->auth_configured;
	out->authenticated = verified;
	out->uptime_ms = resp->uptime_ms;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return BK_OK;
}

void bk_egress_ceiling_free(bk_egress_ceiling *ceiling)
{
	if (!ceiling)
		return;
	for (size_t i = 0; i < ceiling->n; i++)
		free(ceiling->patterns[i]);
	free(ceiling->patterns);
	ceiling->patterns = NULL;
	ceiling->n = 0;
}

int bk_egress_ceiling_get(bk_client *c, bk_egress_ceiling *out, bk_status *st)
{
	Boxkite__V1__HealthRequest req = BOXKITE__V1__HEALTH_REQUEST__INIT;
	Boxkite__V1__HealthResponse *resp = NULL;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	code = bk_client_call(c, "Health", &req.base, &boxkite__v1__health_response__descriptor,
			      (ProtobufCMessage **)&resp, 0, &verified, st);
	if (code != BK_OK)
		return code;
	/* An unverified answer's ceiling would be anyone's word; a server tells it only to a keyed
	 * caller anyway. */
	if (!verified) {
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		return bk_status_set(st, BK_UNAUTHENTICATED, 0, false,
				     "the egress ceiling is told only to a keyed caller (give the client a key)");
	}
	if (resp->n_egress_ceiling && !(out->patterns = calloc(resp->n_egress_ceiling, sizeof(*out->patterns))))
		code = bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	for (size_t i = 0; code == BK_OK && i < resp->n_egress_ceiling; i++, out->n++)
		if (!(out->patterns[i] = strdup(resp->egress_ceiling[i])))
			code = bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (code != BK_OK)
		bk_egress_ceiling_free(out);
	return code;
}
