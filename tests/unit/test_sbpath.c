/* Unit tests of sandbox paths (common/sbpath.c): lexical normalization under the roots, and the
 * rule for a symlink's target (bk_symlink_contained), which FileSymlink enforces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sbpath.h"

static void paths_normalize_under_a_root(void **state)
{
	static const char *const ok[][2] = {
		{ "a/b", "/workspace/a/b" },         { "./a//b/", "/workspace/a/b" },
		{ "/tmp/x", "/tmp/x" },              { "/workspace", "/workspace" },
		{ ".", "/workspace" },               { "/workspace/./x/.", "/workspace/x" },
	};
	static const char *const refused[] = { "../etc", "a/../../b", "/etc/passwd", "/", "/workspacex", "/tmp/.." };
	bk_roots roots;
	char out[256];
	const bk_root *root;
	const char *why;

	(void)state;
	bk_roots_default(&roots);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(bk_sandbox_path(&roots, ok[i][0], out, sizeof(out), &root, &why), 0);
		assert_string_equal(out, ok[i][1]);
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(bk_sandbox_path(&roots, refused[i], out, sizeof(out), &root, &why), -22);
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
		cmocka_unit_test(paths_normalize_under_a_root),
		cmocka_unit_test(symlink_targets_stay_in_their_root),
	};

	return cmocka_run_group_tests_name("sbpath", tests, NULL, NULL);
}
