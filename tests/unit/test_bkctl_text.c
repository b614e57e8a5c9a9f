/* Unit tests of what bkctl shows a person or a program of text the sandbox chose (client/cli/quote.c,
 * client/cli/json.c), and of its small parsers (client/cli/main.c, client/cli/files.c): names quoted
 * exactly as GNU ls quotes them (checked against the ls on this machine), JSON that tells bytes
 * that are not UTF-8 from characters, seconds and sizes as the options take them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bkctl.h"
#include "json.h"
#include "mkdir.h"

#define CAPTURE(buf, write)                                                                        \
	do {                                                                                       \
		size_t capture_len;                                                                \
		FILE *out = open_memstream(&(buf), &capture_len);                                  \
		assert_non_null(out);                                                              \
		write;                                                                             \
		assert_int_equal(fclose(out), 0);                                                  \
	} while (0)

static char *quoted(const char *name)
{
	char *got = NULL;

	CAPTURE(got, bkctl_quote_name(out, name));
	return got;
}

/* Names a sandbox could make, each with a trap: shell syntax, quotes, escape sequences, newlines,
 * bytes that are not UTF-8, C1 controls, printable multibyte text. */
static const char *const names[] = {
	"plain", "a b", "a'b", "a'b c", "'", "\nb", "a\nb", "a\033[31mb", "x\377", "\303\251t\303\251", "~a",
	"a~", "#a", "a#", "a=b", "=a", "a\\b", "a\"b", "a$b", "\177", "a\tb", "a{b}", "a,b", "a^b", "a]b",
	"-a", "a%b", "a+b", "a@b", "a:b", "a?b", "a*b", "a[b", "a!b", "a&b", "a(b", "a;b", "a<b", "a|b",
	"a`b", "a'b$", "a'b\\", "a'b!", "a'b\"", "a'\nb", "\303\251\n", "a'b`", ".hidden", "a\001b\002",
	"\342\200\213", "\357\273\277", "\314\201", "\360\237\230\200", "\355\240\200", "\300\257", "\302\233",
	"a\a", "a\b", "a\v", "a\f", "a\r", "a\037", "\342\200\250", "\342\200\256evil",
};

/* Every name, created in a directory and listed by GNU ls --quoting-style=shell-escape (its
 * default on a terminal), comes out of bkctl_quote_name the same. */
static void names_quoted_as_gnu_ls(void **state)
{
	char dir[] = "/tmp/bkctl-quote-XXXXXX", cmd[256], line[1024];
	size_t n = sizeof(names) / sizeof(names[0]), seen = 0;
	FILE *ls;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < n; i++) {
		char path[512];
		FILE *f;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "w");
		assert_non_null(f);
		fclose(f);
	}
	/* One line per name: a name with a newline is quoted onto one. */
	snprintf(cmd, sizeof(cmd), "LC_ALL=C.UTF-8 ls -1 -A --quoting-style=shell-escape %s", dir);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	while (fgets(line, sizeof(line), ls)) {
		bool found = false;
		line[strcspn(line, "\n")] = '\0';
		for (size_t i = 0; i < n && !found; i++) {
			char *q = quoted(names[i]);
			found = strcmp(q, line) == 0;
			free(q);
		}
		if (!found)
			fail_msg("ls printed %s, which bkctl_quote_name gives for none of the names", line);
		seen++;
	}
	assert_int_equal(pclose(ls), 0);
	assert_int_equal(seen, n);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The cases spelled out, so that a change of this machine's ls cannot pass unnoticed. */
static void names_quoted_known_forms(void **state)
{
	static const char *const cases[][2] = {
		{ "plain", "plain" },
		{ "a b", "'a b'" },
		{ "a'b", "\"a'b\"" },
		{ "a'b!", "'a'\\''b!'" },
		{ "\nb", "''$'\\n''b'" },
		{ "a\033[31mb", "'a'$'\\033''[31mb'" },
		{ "x\377", "'x'$'\\377'" },
		{ "\303\251t\303\251", "\303\251t\303\251" },
		{ "", "''" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *q = quoted(cases[i][0]);
		assert_string_equal(q, cases[i][1]);
		free(q);
	}
}

static void put_name_raw_off_a_terminal(void **state)
{
	char *got = NULL;

	(void)state;
	CAPTURE(got, bkctl_put_name(out, "a\nb", false));
	assert_string_equal(got, "a\nb"); /* as ls into a pipe; -o json is for programs */
	free(got);
	CAPTURE(got, bkctl_put_name(out, "a\nb", true));
	assert_string_equal(got, "'a'$'\\n''b'");
	free(got);
}

static void text_escapes_unprintable_bytes(void **state)
{
	char *got = NULL;

	(void)state;
	CAPTURE(got, bkctl_put_text(out, "cannot open 'x\033]0;owned\007\n': \303\251 \377 \302\233"));
	assert_string_equal(got, "cannot open 'x\\033]0;owned\\a\\n': \303\251 \\377 \\302\\233");
	free(got);
}

/* A name that is not UTF-8 and one holding the character its byte would stand for in Latin-1
 * come out differently; the first as a lone surrogate, as Python's surrogateescape. */
static void json_tells_bytes_from_characters(void **state)
{
	static const uint8_t raw[] = { 'a', 0xe9, 'b' };         /* Latin-1 é: not UTF-8 */
	static const uint8_t utf8[] = { 'a', 0xc3, 0xa9, 'b' };  /* U+00E9 in UTF-8 */
	char *a = NULL, *b = NULL;

	(void)state;
	CAPTURE(a, {
		bk_json j = { .out = out };
		bk_json_bytes(&j, NULL, raw, sizeof(raw));
	});
	CAPTURE(b, {
		bk_json j = { .out = out };
		bk_json_bytes(&j, NULL, utf8, sizeof(utf8));
	});
	assert_string_equal(a, "\"a\\udce9b\"");
	assert_string_equal(b, "\"a\303\251b\"");
	assert_string_not_equal(a, b);
	free(a);
	free(b);
	CAPTURE(a, {
		bk_json j = { .out = out };
		bk_json_bytes(&j, NULL, (const uint8_t *)"\x01\x7f\"\\\n\xff", 6);
	});
	assert_string_equal(a, "\"\\u0001\\u007f\\\"\\\\\\n\\udcff\"");
	free(a);
}

/* What bkctl_term_write hands a terminal, for writes in the given pieces. */
static char *on_terminal(const char *const *pieces, const size_t *lens, size_t n)
{
	int p[2];
	bkctl_term t;
	static char got[4096];
	ssize_t len;

	assert_int_equal(pipe(p), 0);
	bkctl_term_init(&t, p[1], false);
	t.escape = true; /* as on a terminal: a pipe stands for one here */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(bkctl_term_write(&t, (const uint8_t *)pieces[i], lens[i]), 0);
	assert_int_equal(bkctl_term_flush(&t), 0);
	close(p[1]);
	len = read(p[0], got, sizeof(got) - 1);
	close(p[0]);
	assert_true(len >= 0);
	got[len] = '\0';
	return got;
}

/* Output on a terminal (bkctl logs, exec without -t): no control sequence reaches it — OSC 52's
 * clipboard write, a title change, a report request (CSI 6n, DECRQSS) whose answer the terminal
 * would type back, 8-bit C1 controls raw or UTF-8 encoded — while text, line breaks, tabs,
 * carriage returns and backspaces pass as they are, and a character split between two writes
 * arrives whole. */
static void output_on_a_terminal_has_no_control_sequence(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07" },
		{ "\x1b]0;title\x1b\\", "\\x1b]0;title\\x1b\\" },
		{ "\x1b[6n", "\\x1b[6n" },
		{ "\x1bP$q\"p\x1b\\", "\\x1bP$q\"p\\x1b\\" },
		{ "\x9b" "6n", "\\x9b6n" },
		{ "\xc2\x9b" "6n", "\\xc2\\x9b6n" },
		{ "a\tb\r\nc\bd\x7f\x01", "a\tb\r\nc\bd\\x7f\\x01" },
		{ "caf\xc3\xa9 \xe2\x9c\x93 \xff", "caf\xc3\xa9 \xe2\x9c\x93 \\xff" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(on_terminal(&cases[i].in, (size_t[]){ strlen(cases[i].in) }, 1), cases[i].want);
	/* A character split between writes, and a lone start of one at the end. */
	const char *split[] = { "x\xe2", "\x9c", "\x93y\xe2\x9c" };
	const size_t split_len[] = { 2, 1, 4 };
	assert_string_equal(on_terminal(split, split_len, 3), "x\xe2\x9c\x93y\\xe2\\x9c");
	/* Off a terminal, the bytes as they are. */
	int p[2];
	bkctl_term t;
	char got[16];
	assert_int_equal(pipe(p), 0);
	bkctl_term_init(&t, p[1], false);
	assert_false(t.escape);
	assert_int_equal(bkctl_term_write(&t, (const uint8_t *)"\x1b[6n", 4), 0);
	close(p[1]);
	assert_int_equal(read(p[0], got, sizeof(got)), 4);
	assert_memory_equal(got, "\x1b[6n", 4);
	close(p[0]);
}

static void seconds_round_up_to_a_millisecond(void **state)
{
	uint32_t ms = 99;

	(void)state;
	assert_int_equal(bkctl_parse_seconds("0.0004", &ms), 0);
	assert_int_equal(ms, 1);
	assert_int_equal(bkctl_parse_seconds("700", &ms), 0);
	assert_int_equal(ms, 700000);
	assert_int_equal(bkctl_parse_seconds("1.5", &ms), 0);
	assert_int_equal(ms, 1500);
	assert_int_equal(bkctl_parse_seconds("86400", &ms), 0);
	assert_int_equal(ms, 86400000);
	for (size_t i = 0; i < 7; i++)
		assert_int_equal(bkctl_parse_seconds((const char *[]){ "0", "-1", "", "5s", "86401", "nan", "inf" }[i], &ms),
				 -1);
}

static void sizes_with_binary_suffixes(void **state)
{
	uint64_t b = 0;

	(void)state;
	assert_int_equal(bkctl_parse_size("4096", &b), 0);
	assert_int_equal(b, 4096);
	assert_int_equal(bkctl_parse_size("64K", &b), 0);
	assert_int_equal(b, 64 << 10);
	assert_int_equal(bkctl_parse_size("16m", &b), 0);
	assert_int_equal(b, 16 << 20);
	assert_int_equal(bkctl_parse_size("1G", &b), 0);
	assert_int_equal(b, 1ull << 30);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(bkctl_parse_size((const char *[]){ "0", "-1", "", "1T", "2048G", "1.5M" }[i], &b), -1);
}

static void path_dir_and_mkdir_p(void **state)
{
	char out[64], dir[] = "/tmp/bkctl-mkdir-XXXXXX", path[128], cmd[160], failed[160];
	struct stat sb;

	(void)state;
	bkctl_path_dir("a/b/c", out, sizeof(out));
	assert_string_equal(out, "a/b");
	bkctl_path_dir("c", out, sizeof(out));
	assert_string_equal(out, ".");
	bkctl_path_dir("/c", out, sizeof(out));
	assert_string_equal(out, "/");

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x/y", dir);
	assert_int_equal(bk_mkdir_p(path, 0700, 0700, false, NULL, 0), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(bk_mkdir_p(path, 0700, 0700, false, NULL, 0), 0); /* existing: no error */
	/* Exact modes whatever the umask (022 here), or the umask applied. */
	snprintf(path, sizeof(path), "%s/exact/z", dir);
	assert_int_equal(bk_mkdir_p(path, 0775, 0777, true, NULL, 0), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0777);
	snprintf(path, sizeof(path), "%s/masked", dir);
	assert_int_equal(bk_mkdir_p(path, 0777, 0777, false, NULL, 0), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);
	/* A file in the way: the directory that could not be made is named. */
	snprintf(path, sizeof(path), "%s/f", dir);
	fclose(fopen(path, "w"));
	assert_int_equal(bk_mkdir_p(path, 0700, 0700, false, NULL, 0), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/f/sub/x", dir);
	assert_int_equal(bk_mkdir_p(path, 0700, 0700, false, failed, sizeof(failed)), -ENOTDIR);
	snprintf(cmd, sizeof(cmd), "%s/f/sub", dir);
	assert_string_equal(failed, cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* bkctl logs --timestamps: RFC 3339 in UTC with milliseconds, also before 1970. */
static void times_as_rfc3339(void **state)
{
	char out[BKCTL_TIME_LEN];

	(void)state;
	bkctl_format_time(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00.000Z");
	bkctl_format_time(1764670830123, out);
	assert_string_equal(out, "2025-12-02T10:20:30.123Z");
	bkctl_format_time(-1, out);
	assert_string_equal(out, "1969-12-31T23:59:59.999Z");
}

/* bkctl logs --since: a time ago or an RFC 3339 time; anything else refused. */
static void since_ago_or_rfc3339(void **state)
{
	const int64_t now = 1764670830123;
	int64_t ms;

	(void)state;
	assert_int_equal(bkctl_parse_since("90", now, &ms), 0);
	assert_int_equal(ms, now - 90000);
	assert_int_equal(bkctl_parse_since("1.5s", now, &ms), 0);
	assert_int_equal(ms, now - 1500);
	assert_int_equal(bkctl_parse_since("10m", now, &ms), 0);
	assert_int_equal(ms, now - 600000);
	assert_int_equal(bkctl_parse_since("2h", now, &ms), 0);
	assert_int_equal(ms, now - 7200000);
	assert_int_equal(bkctl_parse_since("1d", now, &ms), 0);
	assert_int_equal(ms, now - 86400000);
	assert_int_equal(bkctl_parse_since("2025-12-02T10:20:30Z", now, &ms), 0);
	assert_int_equal(ms, 1764670830000);
	assert_int_equal(bkctl_parse_since("2025-12-02T10:20:30.1Z", now, &ms), 0);
	assert_int_equal(ms, 1764670830100);
	assert_int_equal(bkctl_parse_since("2025-12-02T11:20:30.123+01:00", now, &ms), 0);
	assert_int_equal(ms, 1764670830123);
	assert_int_equal(bkctl_parse_since("2025-12-02T09:20:30-01:00", now, &ms), 0);
	assert_int_equal(ms, 1764670830000);
	for (const char *const *bad = (const char *const[]){ "", "x", "10x", "10mm", "-5", "2025-12-02T10:20:30",
							     "2025-12-02T10:20:30Zjunk", "2025-12-02T10:20:30+1", NULL };
	     *bad; bad++)
		assert_int_equal(bkctl_parse_since(*bad, now, &ms), -1);
}

/* The last lines of what t kept, as bkctl logs --tail writes them. */
static char *tail_text(const bkctl_tail *t)
{
	size_t skip, k = bkctl_tail_start(t, &skip), len = 0;
	char *out = NULL;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	for (; k < t->n; k++, skip = 0)
		fwrite(t->v[k].data + skip, 1, t->v[k].len - skip, f);
	assert_int_equal(fclose(f), 0);
	return out;
}

static void tail_keeps_the_last_lines(void **state)
{
	static const char *const pieces[] = { "a\nb", "\nc\n", "d\ne\nf", "\n", "g" };
	const struct {
		uint64_t lines;
		size_t upto;   /* pieces fed */
		const char *want;
	} cases[] = {
		{ 2, 2, "b\nc\n" },  { 1, 2, "c\n" },        { 0, 5, "" },        { 9, 5, "a\nb\nc\nd\ne\nf\ng" },
		{ 2, 5, "f\ng" },      { 3, 4, "d\ne\nf\n" }, { 1, 1, "b" },       { 1, 4, "f\n" },
	};

	(void)state;
	for (size_t c = 0; c < BK_ARRAY_SIZE(cases); c++) {
		bkctl_tail t;
		char *got;

		bkctl_tail_init(&t, cases[c].lines);
		for (size_t i = 0; i < cases[c].upto; i++)
			bkctl_tail_add(&t, BK_STREAM_STDOUT, (int64_t)i, (const uint8_t *)pieces[i], strlen(pieces[i]));
		got = tail_text(&t);
		assert_string_equal(got, cases[c].want);
		free(got);
		bkctl_tail_free(&t);
	}
}

/* What is kept stays about the last lines however much comes. */
static void tail_lets_go_of_what_it_will_not_show(void **state)
{
	bkctl_tail t;
	char *got;

	(void)state;
	bkctl_tail_init(&t, 3);
	for (int i = 0; i < 100000; i++) {
		char line[32];
		snprintf(line, sizeof(line), "line %d\n", i);
		bkctl_tail_add(&t, i % 2 ? BK_STREAM_STDERR : BK_STREAM_STDOUT, i, (const uint8_t *)line, strlen(line));
		assert_true(t.n - t.head <= 5);
	}
	got = tail_text(&t);
	assert_string_equal(got, "line 99997\nline 99998\nline 99999\n");
	free(got);
	bkctl_tail_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_quoted_as_gnu_ls),
		cmocka_unit_test(names_quoted_known_forms),
		cmocka_unit_test(put_name_raw_off_a_terminal),
		cmocka_unit_test(text_escapes_unprintable_bytes),
		cmocka_unit_test(output_on_a_terminal_has_no_control_sequence),
		cmocka_unit_test(json_tells_bytes_from_characters),
		cmocka_unit_test(seconds_round_up_to_a_millisecond),
		cmocka_unit_test(sizes_with_binary_suffixes),
		cmocka_unit_test(path_dir_and_mkdir_p),
		cmocka_unit_test(times_as_rfc3339),
		cmocka_unit_test(since_ago_or_rfc3339),
		cmocka_unit_test(tail_keeps_the_last_lines),
		cmocka_unit_test(tail_lets_go_of_what_it_will_not_show),
	};

	umask(022);
	return cmocka_run_group_tests_name("bkctl_text", tests, NULL, NULL);
}
