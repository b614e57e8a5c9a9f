/* gen_corpus DIR: write the generated seeds of fuzz_envelope's corpus (the gen-* files of
 * tests/fuzz/corpus/envelope) into DIR. Deterministic: a fixed clock and fixed nonces, so
 * `make test-fuzz` can check that the committed seeds are what this program writes.
 *
 * Each seed is the harness's flag byte and a message (see fuzz_envelope.c). Seeds meant to get
 * past the MAC carry FUZZ_RESEAL, since their fixed stamp is long out of any window; the rest
 * stop where their name says. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envelope.h"
#include "fuzz_key.h"

/* 2023-11-14T22:13:20Z: any fixed time will do. */
#define SEED_TIME_MS 1700000000000LL

static const char *out_dir;
static const bk_key *key;
static unsigned nonce_counter;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put(const char *name, unsigned flags, const uint8_t *msg, size_t len)
{
	char path[4096];
	uint8_t flag = (uint8_t)flags;
	_cleanup_close_ int fd = -1;

	snprintf(path, sizeof(path), "%s/gen-%s", out_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, &flag, 1) != 1 || (len && write(fd, msg, len) != (ssize_t)len))
		die(path);
}

/* A request header as a client makes it, with the next fixed nonce. */
static void header(bk_envelope *hdr, uint8_t nonce[BK_NONCE_LEN], const char *method, const char *key_id)
{
	bk_envelope init = BOXKITE__V1__ENVELOPE__INIT;

	*hdr = init;
	nonce_counter++;
	for (int i = 0; i < BK_NONCE_LEN; i++)
		nonce[i] = (uint8_t)(nonce_counter * 16 + (unsigned)i);
	hdr->version = BK_ENVELOPE_VERSION;
	hdr->kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_REQUEST;
	hdr->key_id = (char *)key_id;
	hdr->timestamp_ms = SEED_TIME_MS;
	hdr->nonce.data = nonce;
	hdr->nonce.len = BK_NONCE_LEN;
	hdr->method = (char *)method;
}

/* hdr (with its data, if any) with body bytes, MAC'd under k unless NULL, packed; written as seed
 * `name`. Returns the packed length (the bytes stay in buf for variations). */
static size_t forge(const char *name, unsigned flags, const bk_envelope *hdr, const uint8_t *body, size_t body_len,
		    const bk_key *k, uint8_t *buf)
{
	bk_envelope env = *hdr;
	uint8_t mac[BK_MAC_LEN];
	size_t len;

	env.body.data = (uint8_t *)body;
	env.body.len = body_len;
	if (k) {
		if (bk_envelope_mac(k, &env, body, body_len, NULL, mac) < 0)
			die("mac");
		env.mac.data = mac;
		env.mac.len = sizeof(mac);
	}
	len = protobuf_c_message_pack(&env.base, buf);
	if (name)
		put(name, flags, buf, len);
	return len;
}

/* Scratch space for a packed message and a packed request body. */
static uint8_t wire_buf[1 << 16], body_buf[1 << 16];

/* A keyed request of method with the given body, re-sealed by the harness. */
static void keyed(const char *name, unsigned flags, const char *method, const uint8_t *b, size_t blen)
{
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];

	header(&hdr, nonce, method, FUZZ_KEY_ID);
	forge(name, flags, &hdr, b, blen, key, wire_buf);
}

static void seeds_valid(void)
{
	static char *argv[] = { "sh", "-c", "echo hi" };
	Boxkite__V1__EnvVar env0 = BOXKITE__V1__ENV_VAR__INIT, *envp[1] = { &env0 };
	Boxkite__V1__ExecRequest exec = BOXKITE__V1__EXEC_REQUEST__INIT;
	Boxkite__V1__FileUploadChunkRequest chunk = BOXKITE__V1__FILE_UPLOAD_CHUNK_REQUEST__INIT;
	Boxkite__V1__FileUploadBeginRequest begin = BOXKITE__V1__FILE_UPLOAD_BEGIN_REQUEST__INIT;
	Boxkite__V1__ProcessStartRequest start = BOXKITE__V1__PROCESS_START_REQUEST__INIT;
	Boxkite__V1__FileListRequest list = BOXKITE__V1__FILE_LIST_REQUEST__INIT;
	Boxkite__V1__FileUploadCommitRequest commit = BOXKITE__V1__FILE_UPLOAD_COMMIT_REQUEST__INIT;
	Boxkite__V1__FileDownloadRequest download = BOXKITE__V1__FILE_DOWNLOAD_REQUEST__INIT;
	static uint8_t sha[32] = { 0xab };
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t blen, len;

	header(&hdr, nonce, "Health", "");
	forge("health-unkeyed", 0, &hdr, NULL, 0, NULL, wire_buf);
	keyed("health-keyed", FUZZ_RESEAL, "Health", NULL, 0);
	header(&hdr, nonce, "Health", FUZZ_KEY_ID);
	forge("health-keyed-stale", 0, &hdr, NULL, 0, key, wire_buf);

	env0.name = "LANG";
	env0.value = "C.UTF-8";
	exec.n_argv = BK_ARRAY_SIZE(argv);
	exec.argv = argv;
	exec.cwd = "sub/dir";
	exec.n_env = 1;
	exec.env = envp;
	exec.stdin.data = (uint8_t *)"input";
	exec.stdin.len = 5;
	exec.timeout_ms = 1000;
	exec.stdout_limit = 4096;
	blen = protobuf_c_message_pack(&exec.base, body_buf);
	keyed("exec-keyed", FUZZ_RESEAL, "Exec", body_buf, blen);
	keyed("exec-twice", FUZZ_RESEAL | FUZZ_TWICE, "Exec", body_buf, blen);
	keyed("exec-replayed", FUZZ_RESEAL | FUZZ_TWICE | FUZZ_NO_ANSWERS, "Exec", body_buf, blen);
	keyed("exec-cache-full", FUZZ_RESEAL | FUZZ_CACHE_FULL, "Exec", body_buf, blen);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	hdr.timestamp_ms = INT64_MAX;
	forge("exec-keep-time-future", FUZZ_RESEAL | FUZZ_KEEP_TIME, &hdr, body_buf, blen, key, wire_buf);

	/* Truncations of a valid keyed Exec. */
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, body_buf, blen, key, wire_buf);
	for (size_t cut = 1; cut < len; cut += len / 7) {
		char name[48];
		snprintf(name, sizeof(name), "exec-truncated-%zu", cut);
		put(name, FUZZ_RESEAL, wire_buf, cut);
	}
	put("exec-truncated-last", FUZZ_RESEAL, wire_buf, len - 1);

	/* A chunk: its bytes in the data field, the MAC over their SHA-256. */
	chunk.upload_id = "u1";
	chunk.offset = 1u << 20;
	chunk.compression = BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
	blen = protobuf_c_message_pack(&chunk.base, body_buf);
	header(&hdr, nonce, "FileUploadChunk", FUZZ_KEY_ID);
	hdr.data.data = (uint8_t *)"\x28\xb5\x2f\xfd";
	hdr.data.len = 4;
	forge("file-upload-chunk", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	commit.upload_id = "u1";
	commit.content_hash.data = sha;
	commit.content_hash.len = sizeof(sha);
	blen = protobuf_c_message_pack(&commit.base, body_buf);
	keyed("file-upload-commit", FUZZ_RESEAL, "FileUploadCommit", body_buf, blen);
	download.path = "a.txt";
	download.offset = 4096;
	download.sha256 = true;
	download.compression = BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
	blen = protobuf_c_message_pack(&download.base, body_buf);
	keyed("file-download", FUZZ_RESEAL, "FileDownload", body_buf, blen);
	begin.path = "/workspace/a.txt";
	begin.size = 12;
	begin.sha256.data = sha;
	begin.sha256.len = sizeof(sha);
	begin.mode = 0644;
	begin.make_parents = true;
	blen = protobuf_c_message_pack(&begin.base, body_buf);
	keyed("file-upload-begin", FUZZ_RESEAL, "FileUploadBegin", body_buf, blen);
	start.n_argv = BK_ARRAY_SIZE(argv);
	start.argv = argv;
	start.n_env = 1;
	start.env = envp;
	start.expose_port = 8080;
	blen = protobuf_c_message_pack(&start.base, body_buf);
	keyed("process-start", FUZZ_RESEAL, "ProcessStart", body_buf, blen);
	list.path = ".";
	list.page_size = 10;
	list.page_token = "t";
	blen = protobuf_c_message_pack(&list.base, body_buf);
	keyed("file-list", FUZZ_RESEAL, "FileList", body_buf, blen);

	/* Every rpc with an empty request: Reset's row has no handler in the harness. */
	for (size_t i = 0; i < boxkite__v1__sandbox__descriptor.n_methods; i++) {
		char name[96];
		snprintf(name, sizeof(name), "empty-%s", boxkite__v1__sandbox__descriptor.methods[i].name);
		keyed(name, FUZZ_RESEAL, boxkite__v1__sandbox__descriptor.methods[i].name, NULL, 0);
	}
}

static void seeds_refused(void)
{
	static const uint8_t stranger_secret[32] = { 0x5e };
	static char *argv[] = { "true" };
	Boxkite__V1__ExecRequest exec = BOXKITE__V1__EXEC_REQUEST__INIT;
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN], big[1100];
	size_t blen, len;
	bk_key stranger;

	exec.n_argv = 1;
	exec.argv = argv;
	blen = protobuf_c_message_pack(&exec.base, body_buf);

	header(&hdr, nonce, "Exec", "");
	forge("exec-unkeyed", 0, &hdr, body_buf, blen, NULL, wire_buf);
	if (bk_key_init(&stranger, "stranger", stranger_secret, sizeof(stranger_secret), NULL) < 0)
		die("key");
	header(&hdr, nonce, "Exec", "stranger");
	forge("exec-unknown-key", 0, &hdr, body_buf, blen, &stranger, wire_buf);
	bk_key_clear(&stranger);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, body_buf, blen, key, wire_buf);
	wire_buf[len - 1] ^= 1;
	put("exec-bad-mac", 0, wire_buf, len);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	forge("exec-stale", 0, &hdr, body_buf, blen, key, wire_buf);

	keyed("exec-bad-body", FUZZ_RESEAL, "Exec", (const uint8_t *)"\x0a\x05\x61", 3);
	keyed("exec-bad-nested-body", FUZZ_RESEAL, "Exec", (const uint8_t *)"\x22\x02\xff\xff", 4);
	big[0] = 0x7a; /* field 15, length-delimited: unknown to HealthRequest */
	big[1] = 0xc5;
	big[2] = 0x08; /* 1093 */
	memset(big + 3, 'x', sizeof(big) - 3);
	keyed("health-oversized", FUZZ_RESEAL, "Health", big, sizeof(big) - 4);
	header(&hdr, nonce, "Health", "");
	forge("health-unkeyed-oversized", 0, &hdr, big, sizeof(big) - 4, NULL, wire_buf);

	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	hdr.version = 1;
	forge("bad-version", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	/* Data where it is not taken, where it is but tampered with, and in forms sealing never
	 * writes: empty, not last. */
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	hdr.data.data = (uint8_t *)"data";
	hdr.data.len = 4;
	forge("exec-with-data", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	header(&hdr, nonce, "FileUploadChunk", FUZZ_KEY_ID);
	hdr.data.data = (uint8_t *)"data";
	hdr.data.len = 4;
	len = forge(NULL, 0, &hdr, NULL, 0, key, wire_buf);
	wire_buf[len - 1] ^= 1;
	put("chunk-data-bad-mac", 0, wire_buf, len);
	header(&hdr, nonce, "FileUploadChunk", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, NULL, 0, key, wire_buf);
	memcpy(wire_buf + len, "\x62\x00", 2);
	put("chunk-data-empty", FUZZ_RESEAL, wire_buf, len + 2);
	memmove(wire_buf + len - BK_MAC_LEN - 2 + 4, wire_buf + len - BK_MAC_LEN - 2, BK_MAC_LEN + 2);
	memcpy(wire_buf + len - BK_MAC_LEN - 2, "\x62\x02" "ab", 4);
	put("chunk-data-before-mac", FUZZ_RESEAL, wire_buf, len + 4);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	hdr.kind = BOXKITE__V1__ENVELOPE_KIND__ENVELOPE_KIND_RESPONSE;
	forge("kind-response", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	hdr.nonce.len = BK_NONCE_LEN - 1;
	forge("short-nonce", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	header(&hdr, nonce, "", FUZZ_KEY_ID);
	forge("no-method", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	header(&hdr, nonce, "Nope", FUZZ_KEY_ID);
	forge("unknown-method", FUZZ_RESEAL, &hdr, body_buf, blen, key, wire_buf);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, body_buf, blen, key, wire_buf);
	/* One byte more of MAC: rewrite the mac field's length and append a byte. */
	wire_buf[len - BK_MAC_LEN - 1] = BK_MAC_LEN + 1;
	wire_buf[len] = 0;
	put("long-mac", 0, wire_buf, len + 1);
}

/* Hand-written bytes: varints at their limits, duplicate fields, unknown wire types, nesting. */
static void seeds_raw(void)
{
	static const uint8_t huge_body_len[] = { 0x08, 0x01, 0x10, 0x01, 0x52, 0xff, 0xff, 0xff, 0xff, 0xff,
						 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t huge_tag[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00 };
	static const uint8_t eleven_byte_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
						      0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t wide_version[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t overlong_version[] = { 0x08, 0x81, 0x80, 0x80, 0x00, 0x10, 0x01 };
	static const uint8_t groups[] = { 0x0b, 0x08, 0x01, 0x0c, 0x08, 0x01 };
	static const uint8_t all_wire_types[] = { 0x78, 0x01, 0x79, 1, 2, 3, 4, 5, 6, 7, 8,
						  0x7a, 0x01, 0x00, 0x7d, 1, 2, 3, 4 };
	bk_envelope hdr;
	uint8_t nonce[BK_NONCE_LEN];
	size_t len, n;

	put("huge-body-length", 0, huge_body_len, sizeof(huge_body_len));
	put("huge-tag", 0, huge_tag, sizeof(huge_tag));
	put("eleven-byte-varint", 0, eleven_byte_varint, sizeof(eleven_byte_varint));
	put("wide-version", FUZZ_RESEAL, wide_version, sizeof(wide_version));
	put("overlong-version", FUZZ_RESEAL, overlong_version, sizeof(overlong_version));
	put("group-wire-types", 0, groups, sizeof(groups));
	put("unknown-fields-envelope", FUZZ_RESEAL, all_wire_types, sizeof(all_wire_types));
	put("empty", 0, NULL, 0);

	/* Unknown fields of every wire type inside a keyed Health body, and a group start. */
	keyed("unknown-fields-body", FUZZ_RESEAL, "Health", all_wire_types, sizeof(all_wire_types));
	keyed("group-in-body", FUZZ_RESEAL, "Health", groups, sizeof(groups));

	/* Duplicate fields: the last method and the last MAC win. */
	header(&hdr, nonce, "Health", "");
	len = forge(NULL, 0, &hdr, NULL, 0, NULL, wire_buf);
	memcpy(wire_buf + len, "\x32\x04" "Exec", 6);
	put("duplicate-method", 0, wire_buf, len + 6);
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, NULL, 0, key, wire_buf);
	memcpy(wire_buf + len, wire_buf + len - BK_MAC_LEN - 2, BK_MAC_LEN + 2);
	wire_buf[len + 2] ^= 1;
	put("duplicate-mac", 0, wire_buf, len + BK_MAC_LEN + 2);

	/* An Exec whose argv is a thousand strings and whose env nests garbage in each EnvVar. */
	n = 0;
	for (int i = 0; i < 1000; i++) {
		body_buf[n++] = 0x0a;
		body_buf[n++] = 0x01;
		body_buf[n++] = (uint8_t)('a' + i % 26);
	}
	for (int i = 0; i < 50; i++) {
		memcpy(body_buf + n, "\x22\x06\x0a\x01k\x7a\x01\x00", 8);
		n += 8;
	}
	keyed("exec-wide-nested", FUZZ_RESEAL, "Exec", body_buf, n);

	/* Past the harness's 64 KiB decode cap: an Envelope of eight thousand unknown fields, and an
	 * Exec body of eight thousand empty argv strings. */
	for (n = 0; n < 16000; n += 2) {
		wire_buf[n] = 0x78;
		wire_buf[n + 1] = 0x00;
		body_buf[n] = 0x0a;
		body_buf[n + 1] = 0x00;
	}
	put("envelope-over-decode-cap", 0, wire_buf, n);
	keyed("exec-body-over-decode-cap", FUZZ_RESEAL, "Exec", body_buf, n);

	/* An Envelope nested in an Envelope's body, as the body of Exec. */
	header(&hdr, nonce, "Exec", FUZZ_KEY_ID);
	len = forge(NULL, 0, &hdr, NULL, 0, key, body_buf);
	keyed("envelope-in-body", FUZZ_RESEAL, "Exec", body_buf, len);
}

int main(int argc, char **argv)
{
	bk_keyring *ring = NULL;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (bk_keyring_parse(FUZZ_KEY_FILE, strlen(FUZZ_KEY_FILE), "fuzz key", &ring, NULL) < 0)
		die("key");
	key = &ring->keys[0];
	seeds_valid();
	seeds_refused();
	seeds_raw();
	bk_keyring_free(ring);
	return 0;
}
