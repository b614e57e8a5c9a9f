/* The front's state machines against a stub executor and file worker (stub.h), through
 * libboxkite, without root: exec (output, stdin, limits, timeouts, the output budget, a failed
 * spawn), uploads (chunks, commit, hashes, an offset that would wrap, the quota), downloads, and
 * the channels' back-pressure — a file worker that stops reading wedges nothing else. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "boxkite/boxkite.h"
#include "contenthash.h"
#include "fixture.h"

#define MiB (1u << 20)

static const char *const flags_small_budget[] = { "--exec-output", "1M", "--exec-output-budget", "3M", NULL };
static const char *const flags_quota[] = { "--workspace-quota", "1M", NULL };

static int setup(void **state)
{
	return wire_start_stubbed((wire **)state, NULL);
}

static int setup_small_budget(void **state)
{
	return wire_start_stubbed((wire **)state, flags_small_budget);
}

static int setup_quota(void **state)
{
	return wire_start_stubbed((wire **)state, flags_quota);
}

static void sha256(const void *data, size_t len, uint8_t out[32])
{
	assert_int_equal(EVP_Digest(data, len, out, NULL, EVP_sha256(), NULL), 1);
}

/* --- exec ------------------------------------------------------------------------------------ */

static int run(bk_client *c, const char *const *argv, const bk_exec_request *extra, bk_exec_result *res,
	       bk_status *st)
{
	bk_exec_request rq = extra ? *extra : (bk_exec_request){ 0 };

	rq.argv = argv;
	return bk_exec(c, &rq, res, st);
}

static void test_exec_output_and_exit(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	bk_exec_result res;
	bk_status st;

	assert_int_equal(run(c, (const char *const[]){ "echo", "hello", "there", NULL }, NULL, &res, &st), BK_OK);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(res.stdout_len, 12);
	assert_memory_equal(res.stdout_data, "hello there\n", 12);
	assert_string_equal(res.isolation_profile, "stub-profile");
	bk_exec_result_free(&res);
	assert_int_equal(run(c, (const char *const[]){ "exit", "3", NULL }, NULL, &res, &st), BK_OK);
	assert_int_equal(res.exit_code, 3);
	bk_exec_result_free(&res);
	bk_client_close(c);
}

static void test_exec_stdin_reaches_the_command(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	size_t len = 3 * MiB; /* more than a pipe holds: written as the command reads */
	uint8_t *in = malloc(len);
	bk_exec_request rq = { .stdin_data = in, .stdin_len = len, .stdout_limit = 4 * MiB };
	bk_exec_result res;
	bk_status st;

	for (size_t i = 0; i < len; i++)
		in[i] = (uint8_t)(i * 131);
	assert_int_equal(run(c, (const char *const[]){ "cat", NULL }, &rq, &res, &st), BK_OK);
	assert_int_equal(res.stdout_len, len);
	assert_memory_equal(res.stdout_data, in, len);
	bk_exec_result_free(&res);
	free(in);
	bk_client_close(c);
}

static void test_exec_output_past_its_limit_is_counted_not_kept(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	bk_exec_request rq = { .stdout_limit = MiB };
	bk_exec_result res;
	bk_status st;

	assert_int_equal(run(c, (const char *const[]){ "flood", "3145728", NULL }, &rq, &res, &st), BK_OK);
	assert_int_equal(res.stdout_len, MiB);
	assert_true(res.stdout_truncated);
	assert_int_equal(res.stdout_dropped, 2 * MiB);
	bk_exec_result_free(&res);
	bk_client_close(c);
}

static void test_exec_timeout_kills_it(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	bk_exec_request rq = { .timeout_ms = 100 };
	bk_exec_result res;
	bk_status st;
	unsigned kills = atomic_load(&stub_state(w->stub)->kills);

	assert_int_equal(run(c, (const char *const[]){ "sleep", NULL }, &rq, &res, &st), BK_OK);
	assert_true(res.timed_out);
	assert_int_equal(res.signal, 9);
	assert_int_equal(atomic_load(&stub_state(w->stub)->kills), kills + 1);
	bk_exec_result_free(&res);
	bk_client_close(c);
}

static void test_exec_a_failed_step_is_an_error(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	bk_exec_result res;
	bk_status st;

	assert_int_equal(run(c, (const char *const[]){ "fail-chdir", NULL }, NULL, &res, &st), BK_NOT_FOUND);
	assert_non_null(strstr(st.message, "cwd"));
	bk_client_close(c);
}

struct held {
	wire *w;
	bk_exec_result res;
	int code;
};

static void *held_exec(void *arg)
{
	struct held *h = arg;
	bk_client *c = wire_client(h->w);
	bk_status st;

	h->code = run(c, (const char *const[]){ "hold", NULL }, NULL, &h->res, &st);
	bk_client_close(c);
	return NULL;
}

/* --exec-output 1M, --exec-output-budget 3M: an exec holds 2 MiB of the budget while it runs; a
 * second of the same is refused at once, RESOURCE_EXHAUSTED, before any order goes out; one
 * asking less fits; the budget comes back when the first ends. */
static void test_exec_output_budget(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	struct held h = { .w = w };
	bk_exec_request small = { .stdout_limit = 256 * 1024, .stderr_limit = 256 * 1024 };
	bk_exec_result res;
	bk_status st;
	pthread_t t;

	pthread_create(&t, NULL, held_exec, &h);
	/* Running once the stub has spawned it (a hang guard). */
	for (int i = 0; i < WIRE_TIMEOUT_MS && atomic_load(&stub_state(w->stub)->spawns) == 0; i++)
		usleep(1000);
	assert_int_equal(atomic_load(&stub_state(w->stub)->spawns), 1);
	assert_int_equal(run(c, (const char *const[]){ "echo", "x", NULL }, NULL, &res, &st), BK_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(st.message, "--exec-output-budget"));
	assert_int_equal(atomic_load(&stub_state(w->stub)->spawns), 1);
	assert_int_equal(run(c, (const char *const[]){ "echo", "small", NULL }, &small, &res, &st), BK_OK);
	bk_exec_result_free(&res);
	stub_release(w->stub);
	pthread_join(t, NULL);
	assert_int_equal(h.code, BK_OK);
	assert_int_equal(h.res.exit_code, 0);
	bk_exec_result_free(&h.res);
	/* Freed once answered (the I/O thread frees runs after its batch: a hang guard). */
	int code = BK_RESOURCE_EXHAUSTED;
	for (int i = 0; i < 100 && code == BK_RESOURCE_EXHAUSTED; i++) {
		code = run(c, (const char *const[]){ "echo", "fits", NULL }, NULL, &res, &st);
		if (code == BK_OK)
			bk_exec_result_free(&res);
		else
			usleep(10000);
	}
	assert_int_equal(code, BK_OK);
	bk_client_close(c);
}

/* --- uploads and downloads ------------------------------------------------------------------- */

static void test_upload_in_chunks_and_commit(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	size_t len = 9 * MiB + 12345;
	uint8_t *data = malloc(len), sum[32];
	bk_hash content;
	bk_blockhash bh;
	bk_upload_state up;
	bk_file_info info;
	bk_status st;
	uint64_t confirmed = 0;

	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i ^ (i >> 8));
	sha256(data, len, sum);
	assert_int_equal(bk_blockhash_init(&bh, len), 0);
	assert_int_equal(bk_blockhash_add(&bh, data, len, NULL), 0);
	assert_int_equal(bk_blockhash_final(&bh, content), 0);
	bk_blockhash_fini(&bh);
	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "big.bin", .size = len, .sha256 = sum, .mode = 0640 },
					 &up, &st),
			 BK_OK);
	while (confirmed < len) {
		size_t n = len - confirmed < up.max_chunk ? len - confirmed : up.max_chunk;
		assert_int_equal(bk_upload_chunk(c, up.upload_id, confirmed, data + confirmed, n, confirmed == 0, &confirmed,
						 &st),
				 BK_OK);
	}
	assert_int_equal(bk_upload_commit(c, up.upload_id, content, &info, &st), BK_OK);
	bk_file_info_free(&info);
	struct stub_state *ss = stub_state(w->stub);
	pthread_mutex_lock(&ss->lock);
	assert_int_equal(ss->committed_len, len);
	assert_memory_equal(ss->committed, data, len);
	assert_int_equal(ss->committed_mode, 0640);
	assert_string_equal(ss->committed_path, "/workspace/big.bin");
	pthread_mutex_unlock(&ss->lock);
	free(data);
	bk_client_close(c);
}

/* A file of at most one block goes whole in its Begin; a boxkited from before that refuses data
 * in a Begin (3, BAD_BODY: emulated by taking the row's data limit away), and libboxkite sends the
 * same file in chunks to it instead. */
static void test_upload_of_one_block_whole_or_in_chunks_to_an_older_server(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	bk_method *begin = wire_method(w, "FileUploadBegin"), *chunk = wire_method(w, "FileUploadChunk");
	char src[160];
	uint8_t data[5000];
	bk_status st;
	int fd;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	snprintf(src, sizeof(src), "%s/small.src", w->dir);
	fd = open(src, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	for (int older = 0; older < 2; older++) {
		unsigned long begins = atomic_load(&begin->calls), chunks = atomic_load(&chunk->calls);
		size_t max_data = begin->max_data;

		if (older)
			begin->max_data = 0;
		assert_int_equal(bk_upload_fd(c, fd, older ? "older.bin" : "whole.bin", &(bk_transfer_options){ .mode = 0600 },
					      NULL, NULL, &st),
				 BK_OK);
		begin->max_data = max_data;
		assert_int_equal(atomic_load(&begin->calls) - begins, 1);
		assert_int_equal(atomic_load(&chunk->calls) - chunks, older ? 1 : 0);
		struct stub_state *ss = stub_state(w->stub);
		pthread_mutex_lock(&ss->lock);
		assert_int_equal(ss->committed_len, sizeof(data));
		assert_memory_equal(ss->committed, data, sizeof(data));
		assert_string_equal(ss->committed_path, older ? "/workspace/older.bin" : "/workspace/whole.bin");
		pthread_mutex_unlock(&ss->lock);
	}
	close(fd);
	unlink(src);
	bk_client_close(c);
}

static void test_upload_hash_mismatch_commits_nothing(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	uint8_t wrong[32] = { 1 };
	bk_upload_state up;
	bk_file_info info;
	bk_status st;
	uint64_t confirmed;

	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "bad.bin", .size = 4 }, &up, &st), BK_OK);
	assert_int_equal(bk_upload_chunk(c, up.upload_id, 0, "abcd", 4, false, &confirmed, &st), BK_OK);
	assert_int_equal(bk_upload_commit(c, up.upload_id, wrong, &info, &st), BK_DATA_LOSS);
	assert_int_equal(atomic_load(&stub_state(w->stub)->commits), 0);
	bk_client_close(c);
}

/* A chunk whose offset + length would wrap past 2^64: out of the file's range, not taken for a
 * chunk that is merely early. */
static void test_upload_offset_that_wraps_is_out_of_range(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	uint8_t sum[32];
	uint8_t *data = calloc(1, 4 * MiB);
	bk_upload_state up;
	bk_status st;
	uint64_t confirmed;

	sha256(data, 4 * MiB, sum);
	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "w.bin", .size = 8 * MiB, .sha256 = sum }, &up, &st),
			 BK_OK);
	assert_int_equal(bk_upload_chunk(c, up.upload_id, UINT64_MAX - 4 * MiB + 1, data, 4 * MiB, false, &confirmed, &st),
			 BK_OUT_OF_RANGE);
	assert_int_equal(bk_upload_chunk(c, up.upload_id, UINT64_MAX, data, 2, false, &confirmed, &st), BK_OUT_OF_RANGE);
	assert_int_equal(bk_upload_abort(c, up.upload_id, &st), BK_OK);
	free(data);
	bk_client_close(c);
}

/* --workspace-quota 1M, the workspace holding 900 KiB (the stub's Usage): 200 KiB does not fit,
 * 50 KiB does; /tmp is not the workspace. */
static void test_upload_quota(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	uint8_t sum[32] = { 0 };
	bk_upload_state up;
	bk_status st;

	atomic_store(&stub_state(w->stub)->usage, 900 * 1024);
	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "a", .size = 200 * 1024, .sha256 = sum }, &up, &st),
			 BK_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(st.message, "quota"));
	assert_int_equal(atomic_load(&stub_state(w->stub)->usages), 1);
	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "b", .size = 50 * 1024, .sha256 = sum }, &up, &st),
			 BK_OK);
	assert_int_equal(bk_upload_abort(c, up.upload_id, &st), BK_OK);
	assert_int_equal(bk_upload_start(c, &(bk_upload_begin){ .path = "/tmp/c", .size = 5 * MiB, .sha256 = sum }, &up, &st),
			 BK_OK);
	assert_int_equal(bk_upload_abort(c, up.upload_id, &st), BK_OK);
	bk_client_close(c);
}

static void test_download(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	size_t len = 5 * MiB + 7;
	uint8_t *data = malloc(len), *got;
	char path[128], out[128];
	bk_file_info info;
	bk_status st;
	int fd;

	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7);
	snprintf(path, sizeof(path), "%s/down.bin", w->dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	snprintf(out, sizeof(out), "%s/got.bin", w->dir);
	fd = open(out, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
	assert_int_equal(bk_download_fd(c, "down.bin", fd, NULL, &info, &st), BK_OK);
	assert_int_equal(info.size, len);
	bk_file_info_free(&info);
	got = malloc(len);
	assert_int_equal(pread(fd, got, len, 0), (ssize_t)len);
	assert_memory_equal(got, data, len);
	close(fd);
	unlink(out);
	unlink(path);
	free(got);
	free(data);
	assert_int_equal(bk_download_fd(c, "missing.bin", 1, NULL, &info, &st), BK_NOT_FOUND);
	bk_client_close(c);
}

/* --- back-pressure --------------------------------------------------------------------------- */

struct lister {
	wire *w;
	int code;
	size_t n;
};

static void *list_once(void *arg)
{
	struct lister *l = arg;
	bk_client *c = wire_client(l->w);
	bk_file_info *entries = NULL;
	char next[4096];
	bk_status st;

	l->code = bk_file_list(c, "dir", 1000, NULL, &entries, &l->n, next, &st);
	bk_file_list_free(entries, l->n);
	bk_client_close(c);
	return NULL;
}

/* The file worker stops reading while many large List answers and orders are on their way: the
 * front queues what does not fit, and meanwhile Health, execs and their timeouts go on. Then the
 * worker reads again, and every list is answered. */
static void test_a_stalled_file_worker_wedges_nothing_else(void **state)
{
	wire *w = *state;
	struct stub_state *ss = stub_state(w->stub);
	struct lister l[16];
	pthread_t t[16];
	bk_client *c = wire_client(w);
	bk_exec_request rq = { .timeout_ms = 50 };
	bk_exec_result res;
	bk_health_info h;
	bk_status st;

	atomic_store(&ss->list_entries, 1000);
	atomic_store(&ss->list_name_len, 150); /* ~150 KiB an answer */
	atomic_store(&ss->files_stalled, true);
	for (int i = 0; i < 16; i++) {
		l[i] = (struct lister){ .w = w };
		pthread_create(&t[i], NULL, list_once, &l[i]);
	}
	/* Their orders reach the front's channel, which the worker does not read. */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(bk_health(c, &h, &st), BK_OK);
		assert_int_equal(run(c, (const char *const[]){ "echo", "still", NULL }, NULL, &res, &st), BK_OK);
		bk_exec_result_free(&res);
	}
	assert_int_equal(run(c, (const char *const[]){ "sleep", NULL }, &rq, &res, &st), BK_OK);
	assert_true(res.timed_out);
	bk_exec_result_free(&res);
	atomic_store(&ss->files_stalled, false);
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(l[i].code, BK_OK);
		assert_int_equal(l[i].n, 1000);
	}
	bk_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exec_output_and_exit, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_exec_stdin_reaches_the_command, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_exec_output_past_its_limit_is_counted_not_kept, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_exec_timeout_kills_it, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_exec_a_failed_step_is_an_error, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_exec_output_budget, setup_small_budget, wire_teardown),
		cmocka_unit_test_setup_teardown(test_upload_in_chunks_and_commit, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_upload_of_one_block_whole_or_in_chunks_to_an_older_server, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_upload_hash_mismatch_commits_nothing, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_upload_offset_that_wraps_is_out_of_range, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_upload_quota, setup_quota, wire_teardown),
		cmocka_unit_test_setup_teardown(test_download, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_a_stalled_file_worker_wedges_nothing_else, setup, wire_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
