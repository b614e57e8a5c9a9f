/* Unit tests of egress/broker.c: the credential files the operator gives the egress proxy — their
 * lines, what is refused (without the refusal ever quoting the secret), the destinations they are
 * for, and the lookup. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker.h"

static void parsed(const char *text, const char *want_lines, size_t want_names)
{
	bk_broker_entry e = { 0 };
	const char *why = NULL;

	if (bk_broker_parse(text, strlen(text), &e, &why) < 0)
		fail_msg("refused: %s", why);
	assert_int_equal(e.n_names, want_names);
	assert_int_equal(e.len, strlen(want_lines));
	assert_memory_equal(e.lines, want_lines, e.len);
	bk_broker b = { .n = 1 };
	b.entries[0] = e;
	bk_broker_fini(&b);
}

static void refused(const char *text)
{
	bk_broker_entry e = { 0 };
	const char *why = NULL;

	if (bk_broker_parse(text, strlen(text), &e, &why) == 0)
		fail_msg("'%s' accepted", text);
	assert_non_null(why);
	/* The reason names the rule, never the file's bytes. */
	assert_null(strstr(why, "s3cret"));
	assert_null(e.lines);
}

static void test_parse(void **state)
{
	(void)state;
	parsed("Authorization: Bearer s3cret\n", "Authorization: Bearer s3cret\r\n", 1);
	parsed("# the index's token\r\nAuthorization:  Bearer s3cret  \r\n\r\nX-Api-Key: k\n",
	       "Authorization:  Bearer s3cret  \r\nX-Api-Key: k\r\n", 2);
	parsed("X-A: 1", "X-A: 1\r\n", 1);
	refused("");
	refused("# only a comment\n");
	refused("Authorization Bearer s3cret\n");
	refused(": s3cret\n");
	refused("Bad Name: s3cret\n");
	refused("Authorization:\n");
	refused("Authorization: s3cret\x01\n");
	refused("Authorization: s3cret\rInjected: 1\n");
	refused(" Folded: s3cret\n");
	char many[1024] = "";
	for (int i = 0; i < 17; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "X-%d: v\n", i);
	refused(many);
}

static void test_destination(void **state)
{
	bk_egress_host h;
	uint16_t port;

	(void)state;
	assert_int_equal(bk_egress_destination_parse("api.example:443", &h, &port, NULL), 0);
	assert_false(h.is_addr);
	assert_string_equal(h.name, "api.example");
	assert_int_equal(port, 443);
	assert_int_equal(bk_egress_destination_parse("192.0.2.7:8080", &h, &port, NULL), 0);
	assert_true(h.is_addr);
	assert_int_equal(bk_egress_destination_parse("[2001:db8::1]:443", &h, &port, NULL), 0);
	assert_int_equal(bk_egress_destination_parse("*.example:443", &h, &port, NULL), -EINVAL);
	assert_int_equal(bk_egress_destination_parse("*:443", &h, &port, NULL), -EINVAL);
	assert_int_equal(bk_egress_destination_parse("api.example:*", &h, &port, NULL), -EINVAL);
	assert_int_equal(bk_egress_destination_parse("192.0.2.0/24:443", &h, &port, NULL), -EINVAL);
	assert_int_equal(bk_egress_destination_parse("api.example", &h, &port, NULL), -EINVAL);
}

static int file_with(const char *text)
{
	char path[] = "/tmp/bk-broker-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static void test_add_and_find(void **state)
{
	bk_broker b = { .n = 0 };
	bk_error *err = NULL;
	bk_egress_host h;
	uint16_t port;
	int fd;

	(void)state;
	fd = file_with("Authorization: Bearer s3cret\n");
	assert_int_equal(bk_broker_add(&b, "api.example:443", fd, &err), 0);
	close(fd);
	fd = file_with("Authorization: Bearer other\n");
	assert_int_equal(bk_broker_add(&b, "api.example:443", fd, &err), -EEXIST);
	bk_error_free(err);
	err = NULL;
	close(fd);
	fd = file_with("no colon here s3cret\n");
	assert_int_equal(bk_broker_add(&b, "b.example:443", fd, &err), -EINVAL);
	assert_null(strstr(bk_error_msg(err), "s3cret"));
	bk_error_free(err);
	err = NULL;
	close(fd);
	char big[BK_BROKER_FILE_MAX + 10];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	fd = file_with(big);
	assert_int_equal(bk_broker_add(&b, "c.example:443", fd, &err), -EFBIG);
	bk_error_free(err);
	err = NULL;
	close(fd);
	assert_int_equal(b.n, 1);

	bk_egress_destination_parse("API.example.:443", &h, &port, NULL);
	const bk_broker_entry *e = bk_broker_find(&b, &h, port);
	assert_non_null(e);
	assert_string_equal(e->names[0], "Authorization");
	assert_null(bk_broker_find(&b, &h, 444));
	bk_egress_destination_parse("b.api.example:443", &h, &port, NULL);
	assert_null(bk_broker_find(&b, &h, port));
	bk_broker_fini(&b);
	assert_int_equal(b.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_destination),
		cmocka_unit_test(test_add_and_find),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
