/* Linked into every cmocka program of the unit and wire tiers: `make test-<tier> T=NAME` runs only
 * the tests whose names hold NAME (tests/tests.mk exports it as BOXKITE_TEST_FILTER) — all of a
 * program whose own name holds it —, as the Python tiers' -k matches a test's module, class and
 * name; a pattern with * or ? is cmocka's own glob, taken as it is. Set before main() runs, so
 * that no test program has to remember it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

__attribute__((constructor)) static void test_filter_from_environment(void)
{
	static char pattern[512];
	const char *t = getenv("BOXKITE_TEST_FILTER");

	if (!t || !*t || strstr(program_invocation_short_name, t))
		return;
	snprintf(pattern, sizeof(pattern), strpbrk(t, "*?") ? "%s" : "*%s*", t);
	cmocka_set_test_filter(pattern);
}
