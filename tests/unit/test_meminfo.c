/* Unit tests of sidecar/exec/meminfo.c, the /proc/meminfo an exec sees under a memory limit: the
 * kernel's layout, in kB, what free(1) and psutil read, and what is free never more than the
 * total. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "exec/meminfo.h"

/* The value of field in text, in kB (-1 when absent). */
static long long field(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	long long v;
	char unit[4];

	if (!p || sscanf(p + strlen(name), ": %lld %3s", &v, unit) != 2 || strcmp(unit, "kB") != 0)
		return -1;
	return v;
}

static void the_limit_is_the_total(void **state)
{
	char text[BK_MEMINFO_MAX];

	(void)state;
	bk_meminfo_text(512ull << 20, 500ull << 20, text);
	assert_int_equal(field(text, "MemTotal"), 512 * 1024);
	assert_int_equal(field(text, "MemFree"), 500 * 1024);
	assert_int_equal(field(text, "MemAvailable"), 500 * 1024);
	for (const char *const *f = (const char *const[]){ "Buffers", "Cached", "SwapTotal", "SwapFree", "Shmem",
							   "SReclaimable", NULL };
	     *f; f++)
		assert_int_equal(field(text, *f), 0);
	/* Lines as the kernel lays them out: "Name:" then the value right-aligned, " kB". */
	assert_non_null(strstr(text, "MemTotal:         524288 kB\n"));
	assert_int_equal(text[strlen(text) - 1], '\n');
}

static void free_is_never_more_than_the_total(void **state)
{
	char text[BK_MEMINFO_MAX];

	(void)state;
	bk_meminfo_text(64ull << 20, 1ull << 40, text);
	assert_int_equal(field(text, "MemFree"), 64 * 1024);
	bk_meminfo_text(1ull << 50, 0, text); /* a petabyte fits the field */
	assert_int_equal(field(text, "MemTotal"), 1ll << 40);
	assert_int_equal(field(text, "MemAvailable"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_limit_is_the_total),
		cmocka_unit_test(free_is_never_more_than_the_total),
	};

	return cmocka_run_group_tests_name("meminfo", tests, NULL, NULL);
}
