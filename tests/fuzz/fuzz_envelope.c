/* fuzz_envelope: what a peer sends, run through the server's real pipeline with no transport —
 * bk_server_dispatch(): envelope decode → version/kind/nonce/method → method row → key → MAC →
 * window → replay → body limit → body decode → handler → sealed answer.
 *
 * An input is one flag byte (enum fuzz_flag, fuzz_key.h), then the message:
 *   RESEAL      if the message decodes as an Envelope, stamp it with the current time and, when
 *               it names a key or carries a MAC, MAC it again (its data too) with the harness
 *               key under that key's id, then repack it. Without this no mutated input gets past the MAC, and no
 *               seed past the window once its stamp is old; with it the fuzzer reaches the
 *               window, replay, body limit, body decode and the handlers deterministically. An
 *               input that does not decode goes as it is.
 *   KEEP_TIME   with RESEAL: MAC again but keep the input's timestamp, so that the window check
 *               meets times the fuzzer chose.
 *   TWICE       deliver the message twice: the second meets the replay cache.
 *   NO_ANSWERS  keep no answers for re-sent requests (the REPLAYED path).
 *   CACHE_FULL  a replay cache with no room (the REPLAY_CACHE_FULL path).
 * Other bits are ignored. Every input gets a fresh replay cache: its outcome does not depend on
 * the inputs before it, so a crash reproduces on its own.
 *
 * Handlers: Health keeps its real one (pure); Reset keeps none (the UNIMPLEMENTED path); every
 * other row gets a checking handler that answers an empty response, so the harness does not
 * depend on handlers that need the executor.
 *
 * Oracles beside the sanitizers: a call ends exactly once, before dispatch returns (no handler
 * here defers); its answer is a canonically encoded (libboxkite takes nothing else) RESPONSE
 * Envelope of our version (of the request's, for a BAD_VERSION refusal) whose MAC, when it has
 * one, verifies under the harness key; a handler of an rpc that needs a key runs only after a
 * verified MAC.
 *
 * Blind spots: protobuf-c is the system library, so libFuzzer gets no coverage from inside the
 * decoder; and the request arena (common/envelope.c) carves its allocations out of larger
 * blocks, so ASan cannot see an overrun from one decoded field into the next.
 *
 * Built for libFuzzer (make fuzz), or linked with replay.c, whose main() replays the files and
 * directories named on the command line (make test-fuzz). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_key.h"
#include "rpc/call.h"
#include "rpc/methods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bk_server srv;
static bk_keyring *ring; /* the harness key, for re-sealing and checking answers */

static void die(const char *fmt, ...) BK_PRINTF(1, 2) __attribute__((noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fuzz_envelope: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* Any rpc but Health and Reset: reached only through the whole pipeline, answers empty. */
static void checking_handler(bk_call *call, const ProtobufCMessage *request)
{
	const ProtobufCMethodDescriptor *desc = call->method->desc;
	ProtobufCMessage *resp;

	if (!(call->method->flags & BK_METHOD_UNKEYED) && !call->key)
		die("%s ran without a verified MAC", call->method->name);
	if (request->descriptor != desc->input)
		die("%s got a %s", call->method->name, request->descriptor->name);
	resp = calloc(1, desc->output->sizeof_message);
	if (!resp)
		die("out of memory");
	protobuf_c_message_init(desc->output, resp);
	bk_call_reply(call, resp);
	free(resp);
}

/* The server, once: a key file in a private temp dir (removed as soon as it is loaded), the
 * handlers above. It never listens; --listen only satisfies the parser. A 64 KiB decode cap
 * (the default is 32 MiB) lets inputs of a few KiB reach the over-the-cap paths of both the
 * envelope and the body decoder. */
static void harness_init(void)
{
	char dir[] = "/tmp/bk-fuzz-XXXXXX", path[sizeof(dir) + 8];
	char *argv[] = { "fuzz_envelope", "--listen", "inproc://fuzz-envelope", "--key-file", path,
			 "--decode-cap", "64K", NULL };
	static bk_config cfg;
	bk_error *err = NULL;
	int fd;

	if (!mkdtemp(dir))
		die("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/key", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, FUZZ_KEY_FILE, strlen(FUZZ_KEY_FILE)) != (ssize_t)strlen(FUZZ_KEY_FILE))
		die("cannot write %s: %s", path, strerror(errno));
	close(fd);
	if (bk_config_parse(&cfg, (int)BK_ARRAY_SIZE(argv) - 1, argv, &err) != 0)
		die("config: %s", bk_error_msg(err));
	/* No replay log: the fuzzer's inputs need not survive it, and a write per input would slow
	 * it down (the wire tier runs the server with one). */
	free(cfg.state_dir);
	cfg.state_dir = NULL;
	if (bk_server_init(&srv, &cfg, &err) < 0 || bk_methods_init(&srv, &err) < 0)
		die("server: %s", bk_error_msg(err));
	unlink(path);
	rmdir(dir);
	if (bk_keyring_parse(FUZZ_KEY_FILE, strlen(FUZZ_KEY_FILE), "fuzz key", &ring, &err) < 0)
		die("key: %s", bk_error_msg(err));
	for (size_t i = 0; i < srv.nmethods; i++) {
		bk_method *m = &srv.methods[i];
		if (strcmp(m->name, "Health") == 0)
			continue;
		m->handler = strcmp(m->name, "Reset") == 0 ? NULL : checking_handler;
	}
}

/* The transport's completion: check the answer, free it. */
static void call_done(bk_call *call, nng_msg *answer)
{
	int *ended = call->transport;
	const bk_key *key = &ring->keys[0];
	bk_envelope *env;

	if ((*ended)++)
		die("a call ended twice");
	if (!answer)
		die("a call ended without an answer, but nothing here is in flight");
	env = boxkite__v1__envelope__unpack(NULL, nng_msg_len(answer), nng_msg_body(answer));
	if (!env)
		die("the answer is not an Envelope");
	if (protobuf_c_message_get_packed_size(&env->base) != nng_msg_len(answer) || env->base.n_unknown_fields)
		die("the answer is not canonically encoded");
	if ((env->version != BK_ENVELOPE_VERSION && env->detail != BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_BAD_VERSION) ||
	    env->kind != BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE)
		die("the answer has version %u, kind %d", env->version, env->kind);
	if (env->version != BK_ENVELOPE_VERSION && env->mac.len)
		die("a BAD_VERSION refusal carries a MAC");
	if (env->mac.len && (strcmp(env->key_id, key->id) != 0 || !bk_envelope_mac_ok(key, env, NULL)))
		die("the answer carries a MAC that does not verify");
	boxkite__v1__envelope__free_unpacked(env, NULL);
	nng_msg_free(answer);
}

/* The message to deliver: the input's bytes, re-sealed when asked (see the top of the file). */
static nng_msg *input_message(const uint8_t *data, size_t size, unsigned flags)
{
	bk_envelope *env = NULL, out;
	uint8_t mac[BK_MAC_LEN];
	nng_msg *msg = NULL;
	size_t len = size;

	if (flags & FUZZ_RESEAL)
		env = boxkite__v1__envelope__unpack(NULL, size, data);
	if (env) {
		out = *env;
		if (!(flags & FUZZ_KEEP_TIME))
			out.timestamp_ms = bk_clock_realtime_ms();
		if (out.key_id[0] || out.mac.len) {
			out.key_id = ring->keys[0].id;
			if (bk_envelope_mac(&ring->keys[0], &out, out.body.data, out.body.len, NULL, mac) < 0)
				die("cannot MAC");
			out.mac.data = mac;
			out.mac.len = sizeof(mac);
		}
		len = protobuf_c_message_get_packed_size(&out.base);
	}
	if (nng_msg_alloc(&msg, len) != 0)
		die("out of memory");
	if (env)
		protobuf_c_message_pack(&out.base, nng_msg_body(msg));
	else
		memcpy(nng_msg_body(msg), data, size);
	boxkite__v1__envelope__free_unpacked(env, NULL);
	return msg;
}

static void deliver(const uint8_t *data, size_t size, unsigned flags)
{
	bk_call call;
	int ended = 0;

	memset(&call, 0, sizeof(call));
	call.done = call_done;
	call.transport = &ended;
	bk_server_dispatch(&srv, &call, input_message(data, size, flags));
	if (ended != 1)
		die("dispatch returned with the call %s", ended ? "ended more than once" : "not ended");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned flags;

	if (!ring)
		harness_init();
	if (size < 1)
		return 0;
	flags = data[0];
	bk_replay_free(srv.replay);
	srv.replay = bk_replay_new((flags & FUZZ_CACHE_FULL) ? 0 : srv.cfg.replay_capacity, srv.cfg.window_ms,
				   (flags & FUZZ_NO_ANSWERS) ? 1 : srv.cfg.replay_answer_cap);
	if (!srv.replay)
		die("out of memory");
	deliver(data + 1, size - 1, flags);
	if (flags & FUZZ_TWICE)
		deliver(data + 1, size - 1, flags);
	return 0;
}
