/* Unit tests of server/store*.c without a server: which URLs a request may name given the
 * configured stores, and the file:// store's keys — written whole (a reader never sees a
 * temporary name), read back, listed, absent keys told apart from errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include "support.h"
#include "sync/store.h"

static void only_configured_stores_and_prefixes_under_them(void **state)
{
	char *stores[] = { "file:///srv/snap", "s3://bucket/pre/" };
	bk_error *err = NULL;
	const char *ok[] = { "file:///srv/snap", "file:///srv/snap/session-1", "file:///srv/snap/a/b",
			     "s3://bucket/pre", "s3://bucket/pre/x" };
	const char *refused[] = { "file:///srv/snapshot", "file:///srv/snap/../x", "file:///srv/snap/./x",
				  "file:///srv/snap//x", "file:///srv/snap/", "file:///srv", "s3://bucket/prefix",
				  "s3://bucket", "s3://other/pre", "file:///srv/snap/%2e%2e", "file:///srv/snap/a?b",
				  "http://bucket/pre" };

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(bk_store_url_allowed(ok[i], stores, 2, &err), 0);
		assert_null(err);
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_true(bk_store_url_allowed(refused[i], stores, 2, &err) < 0);
		assert_non_null(err);
		bk_error_free(err);
		err = NULL;
	}
	/* No store configured: sync is off, whatever the URL. */
	assert_true(bk_store_url_allowed("file:///srv/snap", stores, 0, &err) < 0);
	assert_int_equal(err->status, BK_FAILED_PRECONDITION);
	bk_error_free(err);
}

/* A tenant's URL is the same place under its prefix, in the most specific store that holds it;
 * what it may not name it may not name under its prefix either. */
static void a_tenant_names_only_places_under_its_prefix(void **state)
{
	char *stores[] = { "file:///srv/snap", "s3://bucket/pre/", "file:///srv/snap/nested" };
	static const char *const cases[][2] = {
		{ "file:///srv/snap", "file:///srv/snap/t-1" },
		{ "file:///srv/snap/a/b", "file:///srv/snap/t-1/a/b" },
		{ "file:///srv/snap/t-2", "file:///srv/snap/t-1/t-2" },
		{ "s3://bucket/pre", "s3://bucket/pre/t-1" },
		{ "s3://bucket/pre/x", "s3://bucket/pre/t-1/x" },
		{ "file:///srv/snap/nested", "file:///srv/snap/nested/t-1" },
		{ "file:///srv/snap/nested/x", "file:///srv/snap/nested/t-1/x" },
	};
	char out[256];
	bk_error *err = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(bk_store_url_scope(cases[i][0], stores, 3, "t-1", out, sizeof(out), &err), 0);
		assert_string_equal(out, cases[i][1]);
		/* The operator's own URL (--restore-from) is the store's. */
		assert_int_equal(bk_store_url_scope(cases[i][0], stores, 3, NULL, out, sizeof(out), &err), 0);
		assert_string_equal(out, cases[i][0]);
	}
	assert_null(err);
	for (const char *const *u = (const char *const[]){ "file:///srv/snap/../x", "file:///srv", "s3://bucket", NULL };
	     *u; u++) {
		assert_true(bk_store_url_scope(*u, stores, 3, "t-1", out, sizeof(out), &err) < 0);
		assert_int_equal(err->status, BK_PERMISSION_DENIED);
		bk_error_free(err);
		err = NULL;
	}
}

static void a_file_store_writes_whole_keys(void **state)
{
	char dir[] = "/tmp/bk-store-unit-XXXXXX", url[128], cmd[160];
	bk_store *s = NULL;
	bk_error *err = NULL;
	uint8_t *data = NULL;
	char **names = NULL;
	size_t len = 0, n = 0;
	struct dirent *de;
	DIR *d;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(url, sizeof(url), "file://%s/", dir);
	assert_int_equal(bk_store_open(url, NULL, &s, &err), 0);
	assert_int_equal(s->ops->has(s, "blobs/ab/abcd", &err), 0);
	assert_int_equal(s->ops->put(s, "blobs/ab/abcd", (const uint8_t *)"hello", 5, &err), 0);
	assert_int_equal(s->ops->put(s, "snapshots/one", (const uint8_t *)"1", 1, &err), 0);
	assert_int_equal(s->ops->put(s, "snapshots/two", (const uint8_t *)"22", 2, &err), 0);
	assert_int_equal(s->ops->has(s, "blobs/ab/abcd", &err), 1);
	assert_int_equal(s->ops->get(s, "blobs/ab/abcd", 64, &data, &len, &err), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(data, "hello", 5);
	free(data);
	/* Larger than asked for: refused, not truncated. */
	assert_true(s->ops->get(s, "blobs/ab/abcd", 4, &data, &len, &err) < 0);
	assert_int_equal(err->status, BK_DATA_LOSS);
	bk_error_free(err);
	err = NULL;
	assert_int_equal(s->ops->get(s, "snapshots/none", 64, &data, &len, &err), -ENOENT);
	assert_int_equal(err->status, BK_NOT_FOUND);
	bk_error_free(err);
	err = NULL;
	assert_int_equal(s->ops->list(s, "snapshots", &names, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_true((strcmp(names[0], "one") == 0 && strcmp(names[1], "two") == 0) ||
		    (strcmp(names[0], "two") == 0 && strcmp(names[1], "one") == 0));
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	/* Nothing left under a temporary name, and the barrier syncs. */
	snprintf(cmd, sizeof(cmd), "%s/blobs/ab", dir);
	assert_non_null(d = opendir(cmd));
	while ((de = readdir(d)))
		assert_true(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
			    strcmp(de->d_name, "abcd") == 0);
	closedir(d);
	assert_int_equal(s->ops->barrier(s, &err), 0);
	assert_int_equal(s->ops->list(s, "nothing-here", &names, &n, &err), 0);
	assert_int_equal(n, 0);
	bk_store_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void store_urls_are_checked_when_opened(void **state)
{
	const char *bad[] = { "file://relative/x", "s3://UPPER/x", "s3://ab/x", "s3://under_score/x", "ftp://x" };
	bk_store *s = NULL;
	bk_error *err = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(bk_store_open(bad[i], NULL, &s, &err) < 0);
		assert_int_equal(err->status, BK_INVALID_ARGUMENT);
		bk_error_free(err);
		err = NULL;
	}
	assert_int_equal(bk_store_open("s3://my-bucket.example/a/b/", NULL, &s, &err), 0);
	bk_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(only_configured_stores_and_prefixes_under_them),
		cmocka_unit_test(a_tenant_names_only_places_under_its_prefix),
		cmocka_unit_test(a_file_store_writes_whole_keys),
		cmocka_unit_test(store_urls_are_checked_when_opened),
	};

	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
