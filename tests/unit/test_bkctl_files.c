/* Unit tests of the parts of bkctl's file commands (client/cli/files.c) that need no server:
 * the colon that marks a sandbox path, which way cp copies, where a copy lands, the names and
 * numbers shown to people, the resume command, and cp's summaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bkctl.h"

/* What write(out) printed, as a string (freed by the caller). */
#define CAPTURE(buf, write)                                                                        \
	do {                                                                                       \
		size_t capture_len;                                                                \
		FILE *out = open_memstream(&(buf), &capture_len);                                  \
		assert_non_null(out);                                                              \
		write;                                                                             \
		assert_int_equal(fclose(out), 0);                                                  \
	} while (0)

static void path_colon_marks_the_sandbox(void **state)
{
	(void)state;
	assert_true(bkctl_path_parse(":in/data.csv").remote);
	assert_string_equal(bkctl_path_parse(":in/data.csv").path, "in/data.csv");
	assert_true(bkctl_path_parse(":/tmp/x").remote);
	assert_string_equal(bkctl_path_parse(":/tmp/x").path, "/tmp/x");
	/* ":" alone is the workspace. */
	assert_true(bkctl_path_parse(":").remote);
	assert_string_equal(bkctl_path_parse(":").path, ".");
	assert_false(bkctl_path_parse("data.csv").remote);
	assert_string_equal(bkctl_path_parse("data.csv").path, "data.csv");
	/* A local name with a colon inside, or behind ./, stays local and whole. */
	assert_false(bkctl_path_parse("a:b").remote);
	assert_string_equal(bkctl_path_parse("./:x").path, "./:x");
	assert_false(bkctl_path_parse("./:x").remote);
}

static void sandbox_arg_colon_is_optional(void **state)
{
	(void)state;
	assert_string_equal(bkctl_sandbox_arg(":out"), "out");
	assert_string_equal(bkctl_sandbox_arg("out"), "out");
	assert_string_equal(bkctl_sandbox_arg("/tmp/a:b"), "/tmp/a:b");
	assert_string_equal(bkctl_sandbox_arg(":"), ".");
	assert_string_equal(bkctl_sandbox_arg(""), ".");
}

static int direction(const char *why_has, int n, ...)
{
	char *args[8];
	const char *why = NULL;
	va_list ap;
	int d;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		args[i] = va_arg(ap, char *);
	va_end(ap);
	d = bkctl_cp_direction(n, args, &why);
	if (why_has) {
		assert_non_null(why);
		if (!strstr(why, why_has))
			fail_msg("\"%s\" does not say \"%s\"", why, why_has);
	}
	return d;
}

static void cp_direction_from_the_colons(void **state)
{
	(void)state;
	assert_int_equal(direction(NULL, 2, "data.csv", ":in/data.csv"), BKCTL_CP_UPLOAD);
	assert_int_equal(direction(NULL, 4, "a", "b", "c", ":in/"), BKCTL_CP_UPLOAD);
	assert_int_equal(direction(NULL, 2, ":out", "./out"), BKCTL_CP_DOWNLOAD);
	assert_int_equal(direction(NULL, 3, ":a", ":/tmp/b", "."), BKCTL_CP_DOWNLOAD);
	assert_int_equal(direction(NULL, 2, "x", ":"), BKCTL_CP_UPLOAD);
	assert_int_equal(direction("all be local or all in the sandbox", 3, "a", ":b", ":c"), -1);
	assert_int_equal(direction("all be local or all in the sandbox", 3, ":a", "b", "c"), -1);
	assert_int_equal(direction("neither side", 2, "a", "b"), -1);
	assert_int_equal(direction("both sides", 2, ":a", ":b"), -1);
	assert_int_equal(direction("a destination", 1, ":a"), -1);
	assert_int_equal(direction("a destination", 0), -1);
	assert_int_equal(direction("empty path", 2, ":a", ""), -1);
	assert_int_equal(direction("empty path", 2, "", ":a"), -1);
}

static void base(const char *path, const char *want)
{
	char out[64];

	bkctl_path_base(path, out, sizeof(out));
	assert_string_equal(out, want);
}

static void join(const char *dir, const char *name, const char *want)
{
	char *got = bkctl_path_join(dir, name);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void target(const char *dst, bool is_dir, const char *src, const char *want)
{
	char *got = bkctl_cp_target(dst, is_dir, src);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void paths_base_join_target(void **state)
{
	(void)state;
	base("a/b/c.txt", "c.txt");
	base("a/b/", "b");
	base("dir//", "dir");
	base("name", "name");
	base("/workspace", "workspace");
	base("/", "/");
	base(".", ".");
	base("", "");
	join("a", "b", "a/b");
	join("a/", "b", "a/b");
	join("a//", "b", "a/b");
	join("/", "b", "/b");
	join(".", "b", "./b");
	/* Onto a directory a copy goes inside it, under its own last name; else it is the name. */
	target("in", true, "data/x.csv", "in/x.csv");
	target("in/", true, "src/", "in/src");
	target("new.csv", false, "data/x.csv", "new.csv");
	target(".", true, "out", "./out");
}

static void mode_parse_octal_permission_bits(void **state)
{
	uint32_t m = 1;

	(void)state;
	assert_int_equal(bkctl_parse_mode("755", &m), 0);
	assert_int_equal(m, 0755);
	assert_int_equal(bkctl_parse_mode("0700", &m), 0);
	assert_int_equal(m, 0700);
	assert_int_equal(bkctl_parse_mode("0", &m), 0);
	assert_int_equal(m, 0);
	m = 42;
	assert_int_equal(bkctl_parse_mode("1777", &m), -1);
	assert_int_equal(bkctl_parse_mode("8", &m), -1);
	assert_int_equal(bkctl_parse_mode("75x", &m), -1);
	assert_int_equal(bkctl_parse_mode("-7", &m), -1);
	assert_int_equal(bkctl_parse_mode(" 7", &m), -1);
	assert_int_equal(bkctl_parse_mode("", &m), -1);
	assert_int_equal(m, 42);
}

static void mode(int type, uint32_t bits, const char *want)
{
	char out[11];

	bkctl_mode_string(type, bits, out);
	assert_string_equal(out, want);
}

static void mode_string_as_ls(void **state)
{
	(void)state;
	mode(BK_FILE_DIRECTORY, 0755, "drwxr-xr-x");
	mode(BK_FILE_REGULAR, 0644, "-rw-r--r--");
	mode(BK_FILE_SYMLINK, 0777, "lrwxrwxrwx");
	mode(BK_FILE_REGULAR, 0, "----------");
	mode(BK_FILE_REGULAR, 04755, "-rwsr-xr-x");
	mode(BK_FILE_REGULAR, 04644, "-rwSr--r--");
	mode(BK_FILE_REGULAR, 02755, "-rwxr-sr-x");
	mode(BK_FILE_DIRECTORY, 01777, "drwxrwxrwt");
	mode(BK_FILE_DIRECTORY, 01770, "drwxrwx--T");
	mode(BK_FILE_OTHER, 0600, "?rw-------");
	mode(BK_FILE_UNKNOWN, 0600, "?rw-------");
	mode(99, 0600, "?rw-------");
	mode(-1, 0600, "?rw-------");
}

static void bytes(uint64_t n, const char *want)
{
	char out[32];

	bkctl_human_bytes(n, out, sizeof(out));
	assert_string_equal(out, want);
}

static void human_bytes(void **state)
{
	(void)state;
	bytes(0, "0 B");
	bytes(1023, "1023 B");
	bytes(1024, "1.0 KiB");
	bytes(1536, "1.5 KiB");
	bytes(20952508, "20.0 MiB");
	bytes(1ull << 30, "1.0 GiB");
	bytes(3ull << 40, "3.0 TiB");
	bytes(UINT64_MAX, "16384.0 PiB");
}

static void progress_line(void **state)
{
	char out[160];

	(void)state;
	bkctl_progress_line(out, sizeof(out), 512ull << 20, 1ull << 30, 2.0, 3, 10);
	assert_string_equal(out, "[##########----------]  50%  512.0 MiB / 1.0 GiB  256.0 MiB/s  3/10 files");
	bkctl_progress_line(out, sizeof(out), 0, 0, 0, 0, 0);
	assert_string_equal(out, "[####################] 100%  0 B / 0 B  0 B/s  0/0 files");
	/* More than announced (a file grew, a symlink's target): never past 100%. */
	bkctl_progress_line(out, sizeof(out), 300, 200, 1.0, 1, 1);
	assert_string_equal(out, "[####################] 100%  300 B / 200 B  300 B/s  1/1 files");
	bkctl_progress_line(out, sizeof(out), 1, 1000, 1.0, 0, 1);
	assert_string_equal(out, "[--------------------]   0%  1 B / 1000 B  1 B/s  0/1 files");
}

static void resume_command_quotes_for_sh(void **state)
{
	char *cmd;

	(void)state;
	cmd = bkctl_cp_resume_command("", "66693b40", "big.bin", "in/big.bin");
	assert_string_equal(cmd, "bkctl cp --resume 66693b40 big.bin :in/big.bin");
	free(cmd);
	cmd = bkctl_cp_resume_command("-z -p", "ab", "my data/it's.csv", "/tmp/a b");
	assert_string_equal(cmd, "bkctl cp -z -p --resume ab 'my data/it'\\''s.csv' ':/tmp/a b'");
	free(cmd);
	cmd = bkctl_cp_resume_command("-n", "ab", "$HOME;rm", "x");
	assert_string_equal(cmd, "bkctl cp -n --resume ab '$HOME;rm' :x");
	free(cmd);
}

static bk_status status(int code, const char *message)
{
	bk_status st = { .code = code };

	snprintf(st.message, sizeof(st.message), "%s", message);
	return st;
}

static void failures_keep_the_worst_exit_code(void **state)
{
	bkctl ctl = { .prog = "bkctl cp", .json = true };
	bkctl_failures f = { 0 };
	bk_status st;

	(void)state;
	st = status(BK_NOT_FOUND, "a: No such file or directory");
	bkctl_failures_add(&ctl, &f, "a", &st, NULL, NULL);
	assert_int_equal(f.exit_code, BKCTL_EXIT_STATUS);
	st = status(BK_DATA_LOSS, "b: the SHA-256 of the bytes received is not the file's");
	bkctl_failures_add(&ctl, &f, "b", &st, NULL, NULL);
	assert_int_equal(f.exit_code, BKCTL_EXIT_UNREACHABLE);
	st = status(BK_PERMISSION_DENIED, "c: denied");
	bkctl_failures_add(&ctl, &f, "c", &st, "id1", strdup("bkctl cp --resume id1 c :c"));
	assert_int_equal(f.exit_code, BKCTL_EXIT_UNREACHABLE);
	st = status(BK_UNAUTHENTICATED, "bad MAC");
	bkctl_failures_add(&ctl, &f, "d", &st, NULL, NULL);
	assert_int_equal(f.exit_code, BKCTL_EXIT_AUTH);
	assert_int_equal(f.n, 4);
	assert_string_equal(f.v[2].path, "c");
	assert_string_equal(f.v[2].upload_id, "id1");
	assert_string_equal(f.v[2].resume, "bkctl cp --resume id1 c :c");
	assert_string_equal(f.v[1].st.message, "b: the SHA-256 of the bytes received is not the file's");
	bkctl_failures_free(&f);
	assert_int_equal(f.n, 0);
	assert_null(f.v);
}

/* A summary with one of everything; the caller frees it with summary_free. */
static bkctl_cp_summary summary(void)
{
	static bkctl_skip skipped[] = { { .path = "src/fifo", .reason = "not a regular file, directory or symlink" },
					{ .path = "src/\"odd\"\nname\033[2J", .reason = "not a regular file, directory or symlink" } };
	bkctl_cp_summary s = { .files = 3, .directories = 2, .symlinks = 1, .bytes = 1536, .skipped = skipped,
			       .n_skipped = 2, .seconds = 1.2345 };
	bkctl_failure *v = calloc(1, sizeof(*v));

	assert_non_null(v);
	v[0] = (bkctl_failure){ .path = strdup("big.bin"),
				.st = status(BK_UNAVAILABLE, "FileUploadChunk: Connection refused"),
				.resume = strdup("bkctl cp --resume 0f0f big.bin :big.bin") };
	strcpy(v[0].upload_id, "0f0f");
	s.failures = (bkctl_failures){ .v = v, .n = 1, .exit_code = BKCTL_EXIT_UNREACHABLE };
	return s;
}

static void cp_summary_json(void **state)
{
	bkctl_cp_summary s = summary();
	char *got = NULL;

	(void)state;
	CAPTURE(got, bkctl_cp_summary_json(out, &s));
	assert_string_equal(got,
			    "{\"files\":3,\"directories\":2,\"symlinks\":1,\"bytes\":1536,"
			    "\"skipped\":[{\"path\":\"src/fifo\",\"reason\":\"not a regular file, directory or symlink\"},"
			    "{\"path\":\"src/\\\"odd\\\"\\nname\\u001b[2J\",\"reason\":\"not a regular file, directory or symlink\"}],"
			    "\"errors\":[{\"path\":\"big.bin\",\"status\":\"UNAVAILABLE\",\"code\":14,"
			    "\"message\":\"FileUploadChunk: Connection refused\",\"upload_id\":\"0f0f\","
			    "\"resume\":\"bkctl cp --resume 0f0f big.bin :big.bin\"}],"
			    "\"seconds\":1.235}\n");
	free(got);
	bkctl_failures_free(&s.failures);

	/* Nothing done: empty arrays, and seconds keep three decimals. */
	s = (bkctl_cp_summary){ .seconds = 0.0004 };
	CAPTURE(got, bkctl_cp_summary_json(out, &s));
	assert_string_equal(got, "{\"files\":0,\"directories\":0,\"symlinks\":0,\"bytes\":0,\"skipped\":[],\"errors\":[],"
				 "\"seconds\":0.000}\n");
	free(got);
	s.seconds = 62.5;
	CAPTURE(got, bkctl_cp_summary_json(out, &s));
	assert_non_null(strstr(got, "\"seconds\":62.500}"));
	free(got);
}

static void cp_summary_text(void **state)
{
	bkctl_cp_summary s = summary();
	char *got = NULL;

	(void)state;
	CAPTURE(got, bkctl_cp_summary_text(out, &s));
	/* A name in the summary cannot start a line of its own nor reach the terminal raw. */
	assert_string_equal(got, "copied 3 files (1.5 KiB), 2 directories and 1 symlink in 1.23 s (1.2 KiB/s); "
				 "skipped 2; 1 failed\n"
				 "skipped src/fifo (not a regular file, directory or symlink)\n"
				 "skipped src/\"odd\"\\nname\\033[2J (not a regular file, directory or symlink)\n");
	free(got);
	bkctl_failures_free(&s.failures);
	s = (bkctl_cp_summary){ .files = 1, .directories = 1, .bytes = 6, .seconds = 0.5 };
	CAPTURE(got, bkctl_cp_summary_text(out, &s));
	assert_string_equal(got, "copied 1 file (6 B), 1 directory and 0 symlinks in 0.50 s (12 B/s)\n");
	free(got);
}

/* cp --sha256: each file's hash as sha256sum prints it (its name escaped like every name), and in
 * JSON as an array; no array without --sha256. */
static void cp_summary_digests(void **state)
{
	bkctl_digest digests[2] = { { .path = "a.txt" }, { .path = "odd\nname" } };
	bkctl_cp_summary s = { .files = 2, .bytes = 3, .seconds = 0.5, .digests = digests, .n_digests = 2 };
	char *got = NULL;

	(void)state;
	memset(digests[0].sha256, 0xab, 32);
	memset(digests[1].sha256, 0x01, 32);
	CAPTURE(got, bkctl_cp_summary_text(out, &s));
	assert_string_equal(got, "copied 2 files (3 B), 0 directories and 0 symlinks in 0.50 s (6 B/s)\n"
				 "abababababababababababababababababababababababababababababababab  a.txt\n"
				 "0101010101010101010101010101010101010101010101010101010101010101  odd\\nname\n");
	free(got);
	CAPTURE(got, bkctl_cp_summary_json(out, &s));
	assert_non_null(strstr(got, "\"sha256\":[{\"path\":\"a.txt\",\"sha256\":\"abab"));
	assert_non_null(strstr(got, "{\"path\":\"odd\\nname\",\"sha256\":\"0101"));
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(path_colon_marks_the_sandbox),
		cmocka_unit_test(sandbox_arg_colon_is_optional),
		cmocka_unit_test(cp_direction_from_the_colons),
		cmocka_unit_test(paths_base_join_target),
		cmocka_unit_test(mode_parse_octal_permission_bits),
		cmocka_unit_test(mode_string_as_ls),
		cmocka_unit_test(human_bytes),
		cmocka_unit_test(progress_line),
		cmocka_unit_test(resume_command_quotes_for_sh),
		cmocka_unit_test(failures_keep_the_worst_exit_code),
		cmocka_unit_test(cp_summary_json),
		cmocka_unit_test(cp_summary_text),
		cmocka_unit_test(cp_summary_digests),
	};

	return cmocka_run_group_tests_name("bkctl_files", tests, NULL, NULL);
}
