/* gen_corpus ENVELOPE_DIR ORDER_DIR: write the generated seeds (gen-* files) of fuzz_envelope's
 * corpus (tests/fuzz/corpus/envelope) and of fuzz_order's (tests/fuzz/corpus/order).
 * Deterministic: a fixed clock and fixed nonces, so `make test-fuzz` can check that the
 * committed seeds are what this program writes.
 *
 * Each seed is the harness's flag byte and a message (see fuzz_envelope.c, fuzz_order.c).
 * Envelope seeds meant to get past the MAC carry FUZZ_RESEAL, since their fixed stamp is long
 * out of any window; the rest stop where their name says. Order seeds are one of each kind the
 * executor and the file worker serve, accepted, and a refused variant of each check. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boxkite/executor/order.pb-c.h"
#include "envelope.h"
#include "fuzz_key.h"

/* 2023-11-14T22:13:20Z: any fixed time will do. */
#define SEED_TIME_MS 1700000000000LL

static const char *out_dir, *order_dir;
static const bk_key *key;
static unsigned nonce_counter;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put_in(const char *dir, const char *name, unsigned flags, const uint8_t *msg, size_t len)
{
	char path[4096];
	uint8_t flag = (uint8_t)flags;
	_cleanup_close_ int fd = -1;

	snprintf(path, sizeof(path), "%s/gen-%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, &flag, 1) != 1 || (len && write(fd, msg, len) != (ssize_t)len))
		die(path);
}

static void put(const char *name, unsigned flags, const uint8_t *msg, size_t len)
{
	put_in(out_dir, name, flags, msg, len);
}

/* --- orders (fuzz_order.c: flag bits 0-1 descriptors, 2-3 the table) -------------------------- */

enum { TABLE_EXECUTOR = 0, TABLE_FILES = 1 << 2, TABLE_FIRST = 2 << 2 };

static void order(const char *name, unsigned flags, Boxkite__Executor__Order *o)
{
	uint8_t buf[65536];
	size_t len;

	if (!o->id)
		o->id = 7;
	len = protobuf_c_message_pack(&o->base, buf);
	put_in(order_dir, name, flags, buf, len);
}

static void seeds_orders(void)
{
	char *argv[] = { "sh", "-c", "echo hi" }, *env[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8" };
	char *bad_env[] = { "NO_EQUALS" };
	Boxkite__Executor__Root r1 = BOXKITE__EXECUTOR__ROOT__INIT, r2 = BOXKITE__EXECUTOR__ROOT__INIT;
	Boxkite__Executor__Root *roots[] = { &r1, &r2 };
	Boxkite__Executor__Order o = BOXKITE__EXECUTOR__ORDER__INIT;

	Boxkite__Executor__Configure c = BOXKITE__EXECUTOR__CONFIGURE__INIT;
	r1.path = "/workspace";
	r2.path = "/data";
	r2.read_only = true;
	c.workspace = "/var/lib/boxkite/workspace";
	c.home = "/var/lib/boxkite/home";
	c.init_path = "/usr/libexec/boxkite/boxkite-init";
	c.sandbox_uid = 1001;
	c.tmp_size = 1 << 20;
	c.shm_size = 1 << 20;
	c.exec_memory = 1 << 28;
	c.exec_pids = 64;
	c.sandbox_memory = 1 << 30;
	c.sandbox_pids = 256;
	c.front_uid = 65532;
	c.exec_nofile = 256;
	c.exec_nproc = 1024;
	c.exec_fsize = 1 << 30;
	c.n_roots = 2;
	c.roots = roots;
	c.key_file = "/etc/boxkite/key";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE;
	o.configure = &c;
	order("configure", TABLE_FIRST, &o);
	c.sandbox_uid = 0;
	order("configure-uid-0", TABLE_FIRST, &o);
	c.sandbox_uid = 1001;
	r1.path = "/workspace/../etc";
	order("configure-root-dotdot", TABLE_FIRST, &o);
	r1.path = "/workspace";
	order("configure-again", TABLE_EXECUTOR, &o);

	Boxkite__Executor__Spawn sp = BOXKITE__EXECUTOR__SPAWN__INIT;
	sp.exec_id = 42;
	sp.n_argv = 3;
	sp.argv = argv;
	sp.n_env = 2;
	sp.env = env;
	sp.cwd = "/workspace/src";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SPAWN;
	o.spawn = &sp;
	order("spawn", TABLE_EXECUTOR, &o);
	order("spawn-with-fds", TABLE_EXECUTOR | 3, &o);
	order("spawn-to-the-file-worker", TABLE_FILES, &o);
	sp.cwd = "/etc";
	order("spawn-cwd-outside", TABLE_EXECUTOR, &o);
	sp.cwd = "src/../../etc";
	order("spawn-cwd-dotdot", TABLE_EXECUTOR, &o);
	sp.cwd = "/workspace";
	sp.n_env = 1;
	sp.env = bad_env;
	order("spawn-bad-env", TABLE_EXECUTOR, &o);
	sp.n_env = 0;
	sp.exec_id = 0;
	order("spawn-id-0", TABLE_EXECUTOR, &o);

	Boxkite__Executor__Kill k = BOXKITE__EXECUTOR__KILL__INIT;
	k.exec_id = 42;
	k.signal = 9;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL;
	o.kill = &k;
	order("kill", TABLE_EXECUTOR, &o);
	k.signal = 65;
	order("kill-bad-signal", TABLE_EXECUTOR, &o);

	Boxkite__Executor__Ping ping = BOXKITE__EXECUTOR__PING__INIT;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_PING;
	o.ping = &ping;
	order("ping", TABLE_EXECUTOR, &o);
	order("ping-first", TABLE_FIRST, &o);
	Boxkite__Executor__OpenKeyFile okf = BOXKITE__EXECUTOR__OPEN_KEY_FILE__INIT;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE;
	o.open_key_file = &okf;
	order("open-key-file", TABLE_EXECUTOR, &o);

	Boxkite__Executor__Stat st = BOXKITE__EXECUTOR__STAT__INIT;
	st.path = "/workspace/a.txt";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_STAT;
	o.stat = &st;
	order("stat", TABLE_FILES, &o);
	order("stat-to-the-executor", TABLE_EXECUTOR, &o);
	st.path = "/etc/shadow";
	order("stat-outside", TABLE_FILES, &o);
	Boxkite__Executor__List ls = BOXKITE__EXECUTOR__LIST__INIT;
	ls.path = "/workspace";
	ls.after = "f0099";
	ls.limit = 100;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_LIST;
	o.list = &ls;
	order("list", TABLE_FILES, &o);
	ls.after = "../x";
	order("list-token-path", TABLE_FILES, &o);
	Boxkite__Executor__OpenRead rd = BOXKITE__EXECUTOR__OPEN_READ__INIT;
	rd.path = "/data/in.bin";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ;
	o.open_read = &rd;
	order("open-read", TABLE_FILES, &o);
	Boxkite__Executor__CreateTemp ct = BOXKITE__EXECUTOR__CREATE_TEMP__INIT;
	ct.path = "/workspace/new/file";
	ct.make_parents = true;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP;
	o.create_temp = &ct;
	order("create-temp", TABLE_FILES, &o);
	Boxkite__Executor__Commit cm = BOXKITE__EXECUTOR__COMMIT__INIT;
	cm.path = "/workspace/new/file";
	cm.mode = 0644;
	cm.overwrite = true;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_COMMIT;
	o.commit = &cm;
	order("commit", TABLE_FILES | 1, &o);
	order("commit-without-its-file", TABLE_FILES, &o);
	cm.mode = 04755;
	order("commit-setuid", TABLE_FILES | 1, &o);
	Boxkite__Executor__Mkdir mk = BOXKITE__EXECUTOR__MKDIR__INIT;
	mk.path = "/tmp/a/b";
	mk.parents = true;
	mk.mode = 0700;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_MKDIR;
	o.mkdir = &mk;
	order("mkdir", TABLE_FILES, &o);
	Boxkite__Executor__Symlink ln = BOXKITE__EXECUTOR__SYMLINK__INIT;
	ln.path = "/workspace/d/link";
	ln.target = "../f";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK;
	o.symlink = &ln;
	order("symlink", TABLE_FILES, &o);
	ln.target = "../../etc/passwd";
	order("symlink-out-of-its-root", TABLE_FILES, &o);
	ln.target = "";
	order("symlink-no-target", TABLE_FILES, &o);
	Boxkite__Executor__Remove rm = BOXKITE__EXECUTOR__REMOVE__INIT;
	rm.path = "/workspace/tree";
	rm.recursive = true;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_REMOVE;
	o.remove = &rm;
	order("remove", TABLE_FILES, &o);
	rm.path = "";
	order("remove-empty-path", TABLE_FILES, &o);
	Boxkite__Executor__Rename mv = BOXKITE__EXECUTOR__RENAME__INIT;
	mv.from = "/workspace/a";
	mv.to = "/tmp/b";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_RENAME;
	o.rename = &mv;
	order("rename", TABLE_FILES, &o);
	mv.to = "/root/b";
	order("rename-outside", TABLE_FILES, &o);
	Boxkite__Executor__Usage us = BOXKITE__EXECUTOR__USAGE__INIT;
	us.path = "/workspace";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_USAGE;
	o.usage = &us;
	order("usage", TABLE_FILES, &o);
	Boxkite__Executor__Watch wa = BOXKITE__EXECUTOR__WATCH__INIT;
	wa.watch = 1;
	wa.path = "/workspace/src";
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_WATCH;
	o.watch = &wa;
	order("watch", TABLE_FILES, &o);
	wa.path = "/etc";
	order("watch-outside", TABLE_FILES, &o);
	wa.path = "/workspace";
	wa.watch = 0;
	order("watch-id-0", TABLE_FILES, &o);
	Boxkite__Executor__Unwatch uw = BOXKITE__EXECUTOR__UNWATCH__INIT;
	uw.watch = 1;
	o.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_UNWATCH;
	o.unwatch = &uw;
	order("unwatch", TABLE_FILES, &o);
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

	if (argc != 3) {
		fprintf(stderr, "usage: gen_corpus ENVELOPE_DIR ORDER_DIR\n");
		return 2;
	}
	out_dir = argv[1];
	order_dir = argv[2];
	if (bk_keyring_parse(FUZZ_KEY_FILE, strlen(FUZZ_KEY_FILE), "fuzz key", &ring, NULL) < 0)
		die("key");
	key = &ring->keys[0];
	seeds_valid();
	seeds_refused();
	seeds_raw();
	seeds_orders();
	bk_keyring_free(ring);
	return 0;
}
