/* Unit tests of common/egresspolicy.c: the HOST:PORT patterns of grants and of the ceiling, how
 * one covers another, how a host as a request names it is normalized (every spelling of an
 * address is that address), and which addresses are never dialled unless the ceiling opens them. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egresspolicy.h"

static bk_egress_pattern pat(const char *text)
{
	_cleanup_error_ bk_error *err = NULL;
	bk_egress_pattern p;

	if (bk_egress_pattern_parse(text, &p, &err) < 0)
		fail_msg("pattern '%s' refused: %s", text, bk_error_msg(err));
	return p;
}

static void pattern_refused(const char *text, const char *why_has)
{
	_cleanup_error_ bk_error *err = NULL;
	bk_egress_pattern p;

	if (bk_egress_pattern_parse(text, &p, &err) == 0)
		fail_msg("pattern '%s' accepted", text);
	assert_non_null(err);
	assert_int_equal(err->status, BK_INVALID_ARGUMENT);
	if (why_has && !strstr(bk_error_msg(err), why_has))
		fail_msg("pattern '%s' refused with '%s', not '%s'", text, bk_error_msg(err), why_has);
}

static void formats_as(const char *text, const char *want)
{
	bk_egress_pattern p = pat(text);
	char out[BK_EGRESS_PATTERN_TEXT_MAX + 16];

	bk_egress_pattern_format(&p, out, sizeof(out));
	assert_string_equal(out, want);
	/* The canonical text parses back to the same pattern. */
	bk_egress_pattern q = pat(out);
	assert_memory_equal(&p, &q, sizeof(p));
}

static void test_pattern_forms(void **state)
{
	(void)state;
	formats_as("pkg.example:443", "pkg.example:443");
	formats_as("PKG.Example.:443", "pkg.example:443");
	formats_as("*.example:*", "*.example:*");
	formats_as("*:80", "*:80");
	formats_as("192.0.2.7:80", "192.0.2.7:80");
	formats_as("10.0.0.0/8:*", "10.0.0.0/8:*");
	formats_as("0.0.0.0/0:443", "0.0.0.0/0:443");
	formats_as("[2001:db8::1]:443", "[2001:db8::1]:443");
	formats_as("[2001:DB8::/32]:443", "[2001:db8::/32]:443");
	formats_as("[::ffff:192.0.2.7]:80", "192.0.2.7:80"); /* a mapped address is the IPv4 one */
	formats_as("git_host-1.example:22", "git_host-1.example:22");
	assert_int_equal(pat("a.example:65535").port, 65535);
	assert_int_equal(pat("a.example:*").port, 0);
}

static void test_pattern_refusals(void **state)
{
	char big[400];

	(void)state;
	pattern_refused("", "empty");
	pattern_refused("pkg.example", "HOST:PORT");
	pattern_refused("pkg.example:", "port");
	pattern_refused("pkg.example:0", "port");
	pattern_refused("pkg.example:65536", "port");
	pattern_refused("pkg.example:+80", "port");
	pattern_refused("pkg.example:80x", "port");
	pattern_refused("pkg.example:123456", "port");
	pattern_refused(":80", "empty");
	pattern_refused("**.example:80", "wildcard");
	pattern_refused("*example:80", "wildcard");
	pattern_refused("a.*.example:80", "letters");
	pattern_refused("*.:80", "empty");
	pattern_refused("*.10.0.0.1:80", "number");
	pattern_refused("a..example:80", "empty label");
	pattern_refused(".example:80", "empty label");
	pattern_refused("exa mple:80", "letters");
	pattern_refused("exämple:80", "letters");
	pattern_refused("2001:db8::1:443", "brackets");
	pattern_refused("[2001:db8::1]443", "[ADDRESS]");
	pattern_refused("[2001:db8::1%eth0]:443", "IPv6");
	pattern_refused("[192.0.2.1]:80", "IPv6");
	pattern_refused("[2001:db8::/129]:443", "prefix");
	pattern_refused("[2001:db8::1/32]:443", "bits set");
	pattern_refused("10.0.0.1/8:80", "bits set");
	pattern_refused("10.0.0.0/33:80", "prefix");
	pattern_refused("10.0.0.0/08:80", "prefix");
	pattern_refused("10.0.0.0/:80", "prefix");
	/* Operators write addresses one way: the forms inet_aton also takes are refused here. */
	pattern_refused("127.1:80", "IPv4");
	pattern_refused("0177.0.0.1:80", "IPv4");
	pattern_refused("2130706433:80", "IPv4");
	pattern_refused("1.2.3.4.5:80", "IPv4");
	pattern_refused("example.0x10:80", "number");
	pattern_refused("example.123:80", "number");
	memset(big, 'a', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	pattern_refused(big, "300");
	memset(big, 'a', 70);
	strcpy(big + 70, ".example:80");
	pattern_refused(big, "63");
}

static void test_patterns_parse(void **state)
{
	char *ok[] = { "a.example:80", "*.b.example:443" };
	char *bad[] = { "a.example:80", "nope" };
	bk_egress_pattern *v = NULL;
	_cleanup_error_ bk_error *err = NULL;

	(void)state;
	assert_int_equal(bk_egress_patterns_parse(ok, 2, &v, NULL), 0);
	assert_int_equal(v[1].kind, BK_EGRESS_SUBDOMAINS);
	free(v);
	assert_int_equal(bk_egress_patterns_parse(bad, 2, &v, &err), -EINVAL);
	/* The refusal names the pattern refused. */
	assert_non_null(strstr(bk_error_msg(err), "'nope'"));
	assert_null(v);
	assert_int_equal(bk_egress_patterns_parse(NULL, 0, &v, NULL), 0);
	assert_null(v);
}

static bool covers(const char *outer, const char *inner)
{
	bk_egress_pattern o = pat(outer), i = pat(inner);

	return bk_egress_pattern_covers(&o, &i);
}

static void test_covers(void **state)
{
	(void)state;
	assert_true(covers("*:*", "a.example:80"));
	assert_true(covers("*:*", "10.0.0.0/8:80"));
	assert_true(covers("*:443", "*.example:443"));
	assert_false(covers("*:443", "a.example:80"));
	assert_false(covers("*:443", "a.example:*"));
	assert_true(covers("a.example:*", "a.example:443"));
	assert_false(covers("a.example:443", "a.example:*"));
	assert_false(covers("a.example:443", "b.example:443"));
	/* *.domain is its subdomains, at any depth, and never the domain itself. */
	assert_true(covers("*.example:443", "a.example:443"));
	assert_true(covers("*.example:443", "a.b.example:443"));
	assert_true(covers("*.example:443", "*.b.example:443"));
	assert_true(covers("*.example:443", "*.example:443"));
	assert_false(covers("*.example:443", "example:443"));
	assert_false(covers("*.example:443", "evilexample:443"));
	assert_false(covers("*.example:443", "a.example.evil:443"));
	assert_false(covers("*.b.example:443", "*.example:443"));
	assert_false(covers("a.example:443", "*.a.example:443"));
	/* Names and addresses never cover each other. */
	assert_false(covers("*.example:443", "192.0.2.1:443"));
	assert_false(covers("192.0.2.1:443", "a.example:443"));
	assert_true(covers("192.0.2.0/24:443", "192.0.2.7:443"));
	assert_true(covers("192.0.2.0/24:443", "192.0.2.128/25:443"));
	assert_false(covers("192.0.2.0/25:443", "192.0.2.0/24:443"));
	assert_false(covers("192.0.2.0/24:443", "198.51.100.1:443"));
	assert_true(covers("[2001:db8::/32]:*", "[2001:db8:1::1]:443"));
	assert_false(covers("[2001:db8::/32]:*", "192.0.2.1:443"));
	assert_true(covers("0.0.0.0/0:*", "10.1.2.3:80"));
	assert_false(covers("0.0.0.0/0:*", "[2001:db8::1]:80"));
}

static void test_grant_beyond(void **state)
{
	bk_egress_pattern ceiling[2] = { pat("*.example:443"), pat("192.0.2.0/24:*") };
	bk_egress_pattern grant[3] = { pat("a.example:443"), pat("192.0.2.9:80"), pat("b.example:80") };

	(void)state;
	assert_int_equal(bk_egress_grant_beyond(grant, 2, ceiling, 2), -1);
	assert_int_equal(bk_egress_grant_beyond(grant, 3, ceiling, 2), 2);
	/* No ceiling: nothing is within it. */
	assert_int_equal(bk_egress_grant_beyond(grant, 1, ceiling, 0), 0);
	assert_int_equal(bk_egress_grant_beyond(grant, 0, ceiling, 0), -1);
}

static bk_egress_host host(const char *text)
{
	_cleanup_error_ bk_error *err = NULL;
	bk_egress_host h;

	if (bk_egress_host_parse(text, strlen(text), &h, &err) < 0)
		fail_msg("host '%s' refused: %s", text, bk_error_msg(err));
	return h;
}

static void host_is_addr(const char *text, const char *want)
{
	bk_egress_host h = host(text);
	char out[BK_EGRESS_ADDR_TEXT_MAX];

	if (!h.is_addr)
		fail_msg("host '%s' read as the name '%s'", text, h.name);
	bk_egress_addr_format(h.addr, 0, out, sizeof(out));
	assert_string_equal(out, want);
}

static void host_refused(const char *text)
{
	_cleanup_error_ bk_error *err = NULL;
	bk_egress_host h;

	if (bk_egress_host_parse(text, strlen(text), &h, &err) == 0)
		fail_msg("host '%s' accepted (%s)", text, h.is_addr ? "an address" : h.name);
	assert_non_null(err);
}

static void test_host_normalization(void **state)
{
	(void)state;
	/* Every spelling of the loopback address is the loopback address. */
	host_is_addr("127.0.0.1", "127.0.0.1");
	host_is_addr("127.0.0.1.", "127.0.0.1");
	host_is_addr("2130706433", "127.0.0.1");
	host_is_addr("0177.0.0.1", "127.0.0.1");
	host_is_addr("0x7f.1", "127.0.0.1");
	host_is_addr("0x7F000001", "127.0.0.1");
	host_is_addr("127.1", "127.0.0.1");
	host_is_addr("127.0.1", "127.0.0.1");
	host_is_addr("017700000001", "127.0.0.1");
	host_is_addr("[::ffff:127.0.0.1]", "127.0.0.1");
	host_is_addr("[::ffff:7f00:1]", "127.0.0.1");
	host_is_addr("[0:0:0:0:0:ffff:7f00:1]", "127.0.0.1");
	host_is_addr("[::1]", "::1");
	host_is_addr("[2001:DB8::1]", "2001:db8::1");
	host_is_addr("169.254.169.254", "169.254.169.254");
	host_is_addr("0xa9fea9fe", "169.254.169.254");
	host_is_addr("0", "0.0.0.0");

	bk_egress_host h = host("PKG.Example.");
	assert_false(h.is_addr);
	assert_string_equal(h.name, "pkg.example");
	assert_string_equal(host("localhost").name, "localhost");

	host_refused("");
	host_refused(".");
	host_refused("a..example");
	host_refused("..");
	host_refused("a.example..");
	host_refused("[::1%lo]");
	host_refused("[::1");
	host_refused("[]");
	host_refused("[127.0.0.1]");
	host_refused("::1");
	host_refused("a example");
	host_refused("a.example/x");
	host_refused("user@a.example");
	host_refused("a.example:80");
	host_refused("1.2.3.4.5");
	host_refused("256.0.0.1");
	host_refused("0x7g.0.0.1");
	host_refused("08.0.0.1");
	host_refused("a.0x10");
	host_refused("a\x01.example");
	host_refused("a.example\xc3\xa4");
	char big[300];
	memset(big, 'a', sizeof(big));
	assert_int_equal(bk_egress_host_parse(big, sizeof(big), &h, NULL), -EINVAL);
}

static bool matches(const char *pattern, const char *h, uint16_t port)
{
	bk_egress_pattern p = pat(pattern);
	bk_egress_host x = host(h);

	return bk_egress_pattern_matches(&p, &x, port);
}

static void test_matches(void **state)
{
	(void)state;
	assert_true(matches("pkg.example:443", "pkg.example", 443));
	assert_true(matches("pkg.example:443", "PKG.EXAMPLE.", 443));
	assert_false(matches("pkg.example:443", "pkg.example", 80));
	assert_false(matches("pkg.example:443", "evilpkg.example", 443));
	assert_false(matches("pkg.example:443", "pkg.example.evil", 443));
	assert_false(matches("pkg.example:443", "a.pkg.example", 443));
	assert_true(matches("*.example:*", "a.example", 1));
	assert_true(matches("*.example:*", "a.b.example", 65535));
	assert_false(matches("*.example:*", "example", 80));
	assert_false(matches("*.example:*", "evilexample", 80));
	assert_false(matches("*.example:*", "example.evil", 80));
	assert_false(matches("*.example:*", "a.example.evil", 80));
	/* An address never matches a name pattern, whatever name it might have. */
	assert_false(matches("*:80", "a.example", 81));
	assert_true(matches("*:80", "a.example", 80));
	assert_true(matches("*:80", "192.0.2.1", 80));
	assert_false(matches("localhost:80", "127.0.0.1", 80));
	assert_true(matches("192.0.2.0/24:80", "192.0.2.200", 80));
	assert_true(matches("192.0.2.0/24:80", "3221225985", 80)); /* 192.0.2.1 */
	assert_true(matches("192.0.2.0/24:80", "[::ffff:192.0.2.1]", 80));
	assert_false(matches("192.0.2.0/24:80", "198.51.100.1", 80));
	assert_false(matches("192.0.2.0/24:80", "192.0.2", 80)); /* 192.0.0.2 */

	bk_egress_pattern v[2] = { pat("a.example:80"), pat("b.example:443") };
	bk_egress_host b = host("b.example");
	assert_true(bk_egress_patterns_match(v, 2, &b, 443));
	assert_false(bk_egress_patterns_match(v, 2, &b, 80));
	assert_false(bk_egress_patterns_match(v, 0, &b, 443));
}

static void addr(const char *text, uint8_t out[16])
{
	bk_egress_host h = host(text);

	assert_true(h.is_addr);
	memcpy(out, h.addr, 16);
}

static const char *refusal(const char *a, uint16_t port, const bk_egress_pattern *ceiling, size_t n)
{
	uint8_t x[16];

	addr(a, x);
	return bk_egress_addr_refusal(x, port, ceiling, n, NULL, 0);
}

static void refused_as(const char *a, const char *class)
{
	const char *got = refusal(a, 80, NULL, 0);

	if (!got)
		fail_msg("%s may be dialled", a);
	if (strcmp(got, class) != 0)
		fail_msg("%s refused as %s, not %s", a, got, class);
}

static void test_never_dialled(void **state)
{
	(void)state;
	refused_as("127.0.0.1", "loopback");
	refused_as("127.255.255.254", "loopback");
	refused_as("[::1]", "loopback");
	refused_as("[::ffff:127.0.0.1]", "loopback");
	refused_as("169.254.169.254", "link-local");
	refused_as("[fe80::1]", "link-local");
	refused_as("[febf::1]", "link-local");
	refused_as("0.0.0.0", "unspecified");
	refused_as("[::]", "unspecified");
	refused_as("224.0.0.1", "multicast");
	refused_as("239.255.255.250", "multicast");
	refused_as("[ff02::1]", "multicast");
	refused_as("255.255.255.255", "reserved");
	refused_as("10.1.2.3", "private");
	refused_as("172.16.0.1", "private");
	refused_as("172.31.255.255", "private");
	refused_as("192.168.1.1", "private");
	refused_as("100.64.0.1", "private");
	refused_as("[fd00::1]", "private");
	refused_as("[fc00::1]", "private");
	refused_as("[::127.0.0.1]", "reserved");
	refused_as("[::ffff:0:7f00:1]", "reserved");
	refused_as("[64:ff9b::127.0.0.1]", "translated special");
	refused_as("[64:ff9b::a9fe:a9fe]", "translated special");
	refused_as("[2002:7f00:1::1]", "translated special");
	refused_as("[2001::1]", "reserved"); /* Teredo */
	/* Public, and the documentation ranges the tests use. */
	assert_null(refusal("192.0.2.10", 80, NULL, 0));
	assert_null(refusal("198.51.100.1", 80, NULL, 0));
	assert_null(refusal("8.8.8.8", 53, NULL, 0));
	assert_null(refusal("172.32.0.1", 80, NULL, 0));
	assert_null(refusal("[2001:db8::1]", 443, NULL, 0));
	assert_null(refusal("[64:ff9b::808:808]", 443, NULL, 0)); /* NAT64 of a public address */
	assert_null(refusal("[2002:808:808::1]", 443, NULL, 0));

	assert_string_equal(bk_egress_addr_class((uint8_t[16]){ [15] = 1 }), "loopback");
	assert_null(bk_egress_addr_class((uint8_t[16]){ 0x20, 0x01, 0x0d, 0xb8, [15] = 1 }));
}

static void test_ceiling_opens(void **state)
{
	bk_egress_pattern c[4] = { pat("10.1.0.0/16:5432"), pat("127.0.0.1:8080"), pat("0.0.0.0/0:*"),
				   pat("*.example:*") };

	(void)state;
	/* Named by an address pattern within the range, for that port. */
	assert_null(refusal("10.1.2.3", 5432, c, 4));
	assert_string_equal(refusal("10.1.2.3", 5433, c, 4), "private");
	assert_string_equal(refusal("10.2.0.1", 5432, c, 4), "private");
	assert_null(refusal("127.0.0.1", 8080, c, 4));
	assert_null(refusal("[::ffff:127.0.0.1]", 8080, c, 4));
	assert_string_equal(refusal("127.0.0.2", 8080, c, 4), "loopback");
	/* A pattern wider than the range (0.0.0.0/0) or a name opens nothing special. */
	assert_string_equal(refusal("169.254.169.254", 80, c, 4), "link-local");
	assert_string_equal(refusal("192.168.0.1", 80, c, 4), "private");
	/* Translated forms never. */
	bk_egress_pattern t = pat("[64:ff9b::/96]:*");
	assert_string_equal(refusal("[64:ff9b::7f00:1]", 80, &t, 1), "translated special");

	/* The sidecar's own addresses: only when named exactly. */
	uint8_t own[2][16], x[16];
	addr("192.0.2.1", own[0]);
	addr("[2001:db8::1]", own[1]);
	addr("192.0.2.1", x);
	assert_string_equal(bk_egress_addr_refusal(x, 80, NULL, 0, own, 2), "the sidecar's own");
	bk_egress_pattern wide = pat("192.0.2.0/24:*"), exact = pat("192.0.2.1:80");
	assert_string_equal(bk_egress_addr_refusal(x, 80, &wide, 1, own, 2), "the sidecar's own");
	assert_null(bk_egress_addr_refusal(x, 80, &exact, 1, own, 2));
	addr("192.0.2.2", x);
	assert_null(bk_egress_addr_refusal(x, 80, NULL, 0, own, 2));
}

static void test_addr_format(void **state)
{
	uint8_t a[16];
	char out[BK_EGRESS_ADDR_TEXT_MAX];

	(void)state;
	addr("192.0.2.1", a);
	bk_egress_addr_format(a, 443, out, sizeof(out));
	assert_string_equal(out, "192.0.2.1:443");
	assert_true(bk_egress_addr_is_v4(a));
	addr("[2001:db8::1]", a);
	bk_egress_addr_format(a, 443, out, sizeof(out));
	assert_string_equal(out, "[2001:db8::1]:443");
	assert_false(bk_egress_addr_is_v4(a));
	memset(a, 0xff, sizeof(a));
	bk_egress_addr_format(a, 65535, out, sizeof(out));
	assert_string_equal(out, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pattern_forms),
		cmocka_unit_test(test_pattern_refusals),
		cmocka_unit_test(test_patterns_parse),
		cmocka_unit_test(test_covers),
		cmocka_unit_test(test_grant_beyond),
		cmocka_unit_test(test_host_normalization),
		cmocka_unit_test(test_matches),
		cmocka_unit_test(test_never_dialled),
		cmocka_unit_test(test_ceiling_opens),
		cmocka_unit_test(test_addr_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
