/* Unit tests of common/sbpath.c: the lexical normalization of sandbox paths and the roots they
 * must lie under — what the front and the executor both check before anything touches a file —
 * and the rule for a symlink's target (bk_symlink_contained), which FileSymlink enforces. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sbpath.h"

static void ok(const bk_roots *roots, const char *in, const char *want, const char *want_root)
{
	char out[4096];
	const bk_root *root = NULL;
	_cleanup_error_ bk_error *err = NULL;

	if (bk_sandbox_path(roots, in, out, sizeof(out), &root, &err) < 0)
		fail_msg("'%s' refused: %s", in, bk_error_msg(err));
	assert_null(err);
	assert_string_equal(out, want);
	assert_string_equal(root->path, want_root);
}

/* The reason a path is refused (valid until the next call): INVALID_ARGUMENT, EINVAL, and a
 * message that is the reason alone. */
static const char *refused(const bk_roots *roots, const char *in, size_t size)
{
	static char why[256];
	char out[4096];
	_cleanup_error_ bk_error *err = NULL;

	assert_true(size <= sizeof(out));
	if (bk_sandbox_path(roots, in, out, size, NULL, &err) == 0)
		fail_msg("'%s' accepted as '%s'", in, out);
	assert_non_null(err);
	assert_int_equal(err->status, BK_INVALID_ARGUMENT);
	assert_int_equal(err->errnum, EINVAL);
	assert_null(strstr(err->msg, strerror(EINVAL)));
	snprintf(why, sizeof(why), "%s", err->msg);
	return why;
}

static void test_normalization(void **state)
{
	bk_roots roots;

	(void)state;
	bk_roots_default(&roots);
	ok(&roots, "a.txt", "/workspace/a.txt", "/workspace");
	ok(&roots, "./a//b/./c/", "/workspace/a/b/c", "/workspace");
	ok(&roots, "", "/workspace", "/workspace");
	ok(&roots, ".", "/workspace", "/workspace");
	ok(&roots, "/workspace", "/workspace", "/workspace");
	ok(&roots, "//workspace///x", "/workspace/x", "/workspace");
	ok(&roots, "/tmp/x", "/tmp/x", "/tmp");
	/* Names that only look like dots. */
	ok(&roots, "...", "/workspace/...", "/workspace");
	ok(&roots, "..a/.b", "/workspace/..a/.b", "/workspace");
}

static void test_refusals(void **state)
{
	bk_roots roots;
	char longest[4200];

	(void)state;
	bk_roots_default(&roots);
	assert_non_null(strstr(refused(&roots, "..", 4096), ".."));
	refused(&roots, "a/../../etc", 4096);
	refused(&roots, "/workspace/..", 4096);
	refused(&roots, "/tmp/x/../..", 4096);
	assert_non_null(strstr(refused(&roots, "/", 4096), "root"));
	refused(&roots, "/etc/passwd", 4096);
	/* A prefix of a root is not under it. */
	refused(&roots, "/workspacex", 4096);
	refused(&roots, "/tm", 4096);
	/* Too long for the buffer: refused, never cut. */
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	assert_non_null(strstr(refused(&roots, longest, 4096), "too long"));
	refused(&roots, "x", 8);
}

static void test_roots(void **state)
{
	bk_roots roots;

	(void)state;
	bk_roots_default(&roots);
	assert_int_equal(bk_roots_add(&roots, "/data:ro", NULL), 0);
	assert_int_equal(bk_roots_add(&roots, "/workspace/shared/", NULL), 0);
	/* The longest root a path lies under is its root: its read-only flag is the one. */
	ok(&roots, "/workspace/shared/x", "/workspace/shared/x", "/workspace/shared");
	ok(&roots, "shared", "/workspace/shared", "/workspace/shared");
	ok(&roots, "/workspace/sharedx", "/workspace/sharedx", "/workspace");
	ok(&roots, "/data/y", "/data/y", "/data");
	assert_true(roots.root[2].read_only);
	/* Added again: its flag changes, no second entry. */
	assert_int_equal(bk_roots_add(&roots, "/data", NULL), 0);
	assert_int_equal(roots.n, 4);
	assert_false(roots.root[2].read_only);
	assert_int_equal(bk_roots_add(&roots, "relative", NULL), -EINVAL);
	assert_int_equal(bk_roots_add(&roots, "/a/../b", NULL), -EINVAL);
	assert_int_equal(bk_roots_add(&roots, "/", NULL), -EINVAL);
	for (int i = roots.n; i < BK_ROOTS_MAX; i++) {
		char spec[32];
		snprintf(spec, sizeof(spec), "/r%d", i);
		assert_int_equal(bk_roots_add(&roots, spec, NULL), 0);
	}
	assert_int_equal(bk_roots_add(&roots, "/one-too-many", NULL), -EINVAL);
}

static void symlink_targets_stay_in_their_root(void **state)
{
	static const struct {
		const char *link, *target;
		bool contained;
	} cases[] = {
		{ "/workspace/a", "b", true },
		{ "/workspace/a", "./b/../c", true },
		{ "/workspace/d/l", "../x", true },         /* /workspace/x */
		{ "/workspace/d/e/l", "../../x", true },    /* /workspace/x */
		{ "/workspace/d/e/l", "../../../x", false }, /* above /workspace */
		{ "/workspace/a", "..", false },
		{ "/workspace/d/l", "../a/../../y", false },
		{ "/workspace/d/l", "/workspace/d/f", true },
		{ "/workspace/d/l", "/workspace", true },
		{ "/workspace/d/l", "/workspace/../etc", false },
		{ "/workspace/d/l", "/workspacex/f", false },
		{ "/workspace/d/l", "/etc/passwd", false },
		{ "/workspace/d/l", "/tmp/x", false },       /* another root is still out of this one */
		{ "/workspace/d/l", "", false },
		{ "/workspace", "x", false },                /* the root itself is no link */
	};
	bk_roots roots;

	(void)state;
	bk_roots_default(&roots);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (bk_symlink_contained(&roots.root[0], cases[i].link, cases[i].target) != cases[i].contained)
			fail_msg("%s -> %s: expected %s", cases[i].link, cases[i].target,
				 cases[i].contained ? "contained" : "refused");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalization),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_roots),
		cmocka_unit_test(symlink_targets_stay_in_their_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
