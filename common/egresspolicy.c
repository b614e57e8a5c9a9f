#include "egresspolicy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* IPv4 addresses live in the IPv4-mapped range, ::ffff:0:0/96. */
static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool bk_egress_addr_is_v4(const uint8_t addr[16])
{
	return memcmp(addr, v4_mapped, sizeof(v4_mapped)) == 0;
}

static void addr_from_v4(uint8_t addr[16], const struct in_addr *in)
{
	memcpy(addr, v4_mapped, sizeof(v4_mapped));
	memcpy(addr + 12, &in->s_addr, 4);
}

/* Whether the first `bits` bits of a and b are equal. */
static bool prefix_equal(const uint8_t a[16], const uint8_t b[16], unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

/* Whether any bit of addr past `bits` is set. */
static bool host_bits_set(const uint8_t addr[16], unsigned bits)
{
	for (unsigned i = bits; i < 128; i++)
		if (addr[i / 8] & (0x80 >> (i % 8)))
			return true;
	return false;
}

/* --- names ----------------------------------------------------------------------------------- */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

/* The length of a name without its one trailing dot (the root's label): "a.example." is
 * "a.example", "a.example.." stays malformed. */
static size_t without_root_dot(const char *text, size_t len)
{
	return len > 1 && text[len - 1] == '.' ? len - 1 : len;
}

/* A DNS name in out (lowercase, without_root_dot() already applied): labels of 1-63 bytes of letters,
 * digits, '-' and '_', at most BK_EGRESS_NAME_MAX bytes, and a last label that is not a number
 * (a resolver might take "1.2.3.09" or "0x10" for an address). */
static int name_normalize(const char *text, size_t len, char out[BK_EGRESS_NAME_MAX + 1], const char **why)
{
	size_t label = 0, last = 0;
	bool numeric = true;

	if (len == 0 || len > BK_EGRESS_NAME_MAX) {
		*why = len ? "a name is at most 253 bytes" : "an empty name";
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!name_char(c)) {
			*why = "a name has only letters, digits, '-', '_' and '.'";
			return -EINVAL;
		}
		out[i] = c;
		if (c == '.') {
			if (label == 0) {
				*why = "a name has an empty label";
				return -EINVAL;
			}
			label = 0;
			last = i + 1;
			numeric = true;
			continue;
		}
		if (++label > 63) {
			*why = "a label of a name is at most 63 bytes";
			return -EINVAL;
		}
		if (!(c >= '0' && c <= '9'))
			numeric = false;
	}
	out[len] = '\0';
	if (label == 0) {
		*why = "a name has an empty label";
		return -EINVAL;
	}
	/* "0x7f" is hex to inet_aton; "08" is neither octal nor a name. */
	if (numeric || (len - last > 1 && out[last] == '0' && out[last + 1] == 'x')) {
		*why = "neither an address nor a name (its last label is a number)";
		return -EINVAL;
	}
	return 0;
}

/* Whether name is strictly below domain ("a.b.c" below "b.c", "b.c" not). */
static bool name_below(const char *name, const char *domain)
{
	size_t n = strlen(name), d = strlen(domain);

	return n > d + 1 && name[n - d - 1] == '.' && memcmp(name + n - d, domain, d) == 0;
}

/* --- patterns -------------------------------------------------------------------------------- */

static int parse_port(const char *s, uint16_t *port, const char **why)
{
	unsigned long v = 0;

	if (strcmp(s, "*") == 0) {
		*port = 0;
		return 0;
	}
	if (!*s || strlen(s) > 5)
		goto bad;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			goto bad;
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v < 1 || v > 65535)
		goto bad;
	*port = (uint16_t)v;
	return 0;
bad:
	*why = "a port is 1-65535 or *";
	return -EINVAL;
}

/* "/n" after an address: n in 0-max, no sign, no leading zero. */
static int parse_prefix(const char *s, unsigned max, unsigned *bits, const char **why)
{
	unsigned v = 0;

	if (!*s || strlen(s) > 3 || (s[0] == '0' && s[1]))
		goto bad;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			goto bad;
		v = v * 10 + (unsigned)(*c - '0');
	}
	if (v > max)
		goto bad;
	*bits = v;
	return 0;
bad:
	*why = max == 32 ? "an IPv4 prefix length is 0-32" : "an IPv6 prefix length is 0-128";
	return -EINVAL;
}

/* An address pattern's host: "a.b.c.d[/n]" or (inside brackets) "v6[/n]". */
static int parse_net(char *host, bool v6, bk_egress_pattern *p, const char **why)
{
	char *slash = strchr(host, '/');
	unsigned bits = v6 ? 128 : 32;

	if (slash) {
		*slash = '\0';
		if (parse_prefix(slash + 1, v6 ? 128 : 32, &bits, why) < 0)
			return -EINVAL;
	}
	if (v6) {
		struct in6_addr a;
		if (strchr(host, '%') || inet_pton(AF_INET6, host, &a) != 1) {
			*why = "not an IPv6 address";
			return -EINVAL;
		}
		memcpy(p->addr, &a, 16);
	} else {
		struct in_addr a;
		/* Four decimal parts only: an operator's pattern says exactly one thing. */
		if (inet_pton(AF_INET, host, &a) != 1) {
			*why = "not an IPv4 address (a.b.c.d)";
			return -EINVAL;
		}
		addr_from_v4(p->addr, &a);
		bits += 96;
	}
	if (host_bits_set(p->addr, bits)) {
		*why = "an address pattern has bits set past its prefix length";
		return -EINVAL;
	}
	p->kind = BK_EGRESS_NET;
	p->prefix = (uint8_t)bits;
	return 0;
}

static int pattern_parse(const char *text, bk_egress_pattern *p, const char **why)
{
	char buf[BK_EGRESS_PATTERN_TEXT_MAX + 1], *host = buf, *colon;
	size_t len = strlen(text);

	memset(p, 0, sizeof(*p));
	if (len == 0 || len > BK_EGRESS_PATTERN_TEXT_MAX) {
		*why = len ? "a pattern is at most 300 bytes" : "an empty pattern";
		return -EINVAL;
	}
	memcpy(buf, text, len + 1);
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close || close[1] != ':') {
			*why = "an IPv6 pattern is [ADDRESS]:PORT or [ADDRESS/BITS]:PORT";
			return -EINVAL;
		}
		*close = '\0';
		colon = close + 1;
		host = buf + 1;
	} else {
		colon = strrchr(buf, ':');
		if (!colon) {
			*why = "a pattern is HOST:PORT";
			return -EINVAL;
		}
		*colon = '\0';
	}
	if (parse_port(colon + 1, &p->port, why) < 0)
		return -EINVAL;
	if (buf[0] == '[')
		return parse_net(host, true, p, why);
	if (strcmp(host, "*") == 0) {
		p->kind = BK_EGRESS_ANY;
		return 0;
	}
	if (strchr(host, ':')) {
		*why = "an IPv6 address goes in brackets: [ADDRESS]:PORT";
		return -EINVAL;
	}
	if (host[0] == '*') {
		if (host[1] != '.') {
			*why = "a wildcard is * or *.DOMAIN";
			return -EINVAL;
		}
		p->kind = BK_EGRESS_SUBDOMAINS;
		return name_normalize(host + 2, without_root_dot(host + 2, strlen(host + 2)), p->name, why);
	}
	if (!*host) {
		*why = "an empty host";
		return -EINVAL;
	}
	if (strspn(host, "0123456789./") == strlen(host))
		return parse_net(host, false, p, why);
	p->kind = BK_EGRESS_NAME;
	return name_normalize(host, without_root_dot(host, strlen(host)), p->name, why);
}

void bk_egress_addr_format(const uint8_t addr[16], uint16_t port, char *buf, size_t size)
{
	char text[INET6_ADDRSTRLEN];

	if (bk_egress_addr_is_v4(addr)) {
		inet_ntop(AF_INET, addr + 12, text, sizeof(text));
		if (port)
			snprintf(buf, size, "%s:%u", text, port);
		else
			snprintf(buf, size, "%s", text);
	} else {
		inet_ntop(AF_INET6, addr, text, sizeof(text));
		if (port)
			snprintf(buf, size, "[%s]:%u", text, port);
		else
			snprintf(buf, size, "%s", text);
	}
}

void bk_egress_pattern_format(const bk_egress_pattern *p, char *buf, size_t size)
{
	char host[BK_EGRESS_NAME_MAX + 8], port[8] = "*";

	if (p->port)
		snprintf(port, sizeof(port), "%u", p->port);
	switch (p->kind) {
	case BK_EGRESS_ANY:
		snprintf(host, sizeof(host), "*");
		break;
	case BK_EGRESS_NAME:
		snprintf(host, sizeof(host), "%s", p->name);
		break;
	case BK_EGRESS_SUBDOMAINS:
		snprintf(host, sizeof(host), "*.%s", p->name);
		break;
	case BK_EGRESS_NET: {
		char a[INET6_ADDRSTRLEN];
		if (bk_egress_addr_is_v4(p->addr)) {
			inet_ntop(AF_INET, p->addr + 12, a, sizeof(a));
			if (p->prefix < 128)
				snprintf(host, sizeof(host), "%s/%u", a, p->prefix - 96);
			else
				snprintf(host, sizeof(host), "%s", a);
		} else {
			inet_ntop(AF_INET6, p->addr, a, sizeof(a));
			if (p->prefix < 128)
				snprintf(host, sizeof(host), "[%s/%u]", a, p->prefix);
			else
				snprintf(host, sizeof(host), "[%s]", a);
		}
		break;
	}
	}
	snprintf(buf, size, "%s:%s", host, port);
}

int bk_egress_pattern_parse(const char *text, bk_egress_pattern *p, bk_error **err)
{
	const char *why = NULL;

	return pattern_parse(text, p, &why) < 0 ? bk_error_invalid(err, "%s", why) : 0;
}

int bk_egress_patterns_parse(char *const *texts, size_t n, bk_egress_pattern **out, bk_error **err)
{
	bk_egress_pattern *v = NULL;
	const char *why = NULL;

	*out = NULL;
	if (n == 0)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return bk_error_errno(err, ENOMEM, "patterns");
	for (size_t i = 0; i < n; i++) {
		if (pattern_parse(texts[i], &v[i], &why) < 0) {
			free(v);
			return bk_error_invalid(err, "'%.300s': %s", texts[i], why);
		}
	}
	*out = v;
	return 0;
}

bool bk_egress_pattern_covers(const bk_egress_pattern *outer, const bk_egress_pattern *inner)
{
	if (outer->port && outer->port != inner->port)
		return false;
	switch (outer->kind) {
	case BK_EGRESS_ANY:
		return true;
	case BK_EGRESS_NAME:
		return inner->kind == BK_EGRESS_NAME && strcmp(outer->name, inner->name) == 0;
	case BK_EGRESS_SUBDOMAINS:
		if (inner->kind == BK_EGRESS_NAME)
			return name_below(inner->name, outer->name);
		return inner->kind == BK_EGRESS_SUBDOMAINS &&
		       (strcmp(inner->name, outer->name) == 0 || name_below(inner->name, outer->name));
	case BK_EGRESS_NET:
		return inner->kind == BK_EGRESS_NET && inner->prefix >= outer->prefix &&
		       prefix_equal(inner->addr, outer->addr, outer->prefix);
	}
	return false;
}

long bk_egress_grant_beyond(const bk_egress_pattern *grant, size_t n_grant, const bk_egress_pattern *ceiling,
			    size_t n_ceiling)
{
	for (size_t i = 0; i < n_grant; i++) {
		bool covered = false;
		for (size_t j = 0; j < n_ceiling && !covered; j++)
			covered = bk_egress_pattern_covers(&ceiling[j], &grant[i]);
		if (!covered)
			return (long)i;
	}
	return -1;
}

int bk_egress_destination_parse(const char *text, bk_egress_host *host, uint16_t *port, bk_error **err)
{
	bk_egress_pattern p;
	const char *why = NULL;

	if (pattern_parse(text, &p, &why) < 0)
		return bk_error_invalid(err, "%s", why);
	if (!p.port || p.kind == BK_EGRESS_ANY || p.kind == BK_EGRESS_SUBDOMAINS ||
	    (p.kind == BK_EGRESS_NET && p.prefix != 128))
		return bk_error_invalid(err, "a destination is one host and one port, no wildcard or range");
	memset(host, 0, sizeof(*host));
	host->is_addr = p.kind == BK_EGRESS_NET;
	memcpy(host->addr, p.addr, sizeof(p.addr));
	memcpy(host->name, p.name, sizeof(p.name));
	*port = p.port;
	return 0;
}

/* --- hosts as asked -------------------------------------------------------------------------- */

static int host_parse(const char *text, size_t len, bk_egress_host *h, const char **why)
{
	char buf[BK_EGRESS_NAME_MAX + 2];
	struct in_addr a4;

	memset(h, 0, sizeof(*h));
	if (len == 0) {
		*why = "an empty host";
		return -EINVAL;
	}
	if (text[0] == '[') {
		struct in6_addr a6;
		if (len < 3 || text[len - 1] != ']' || len - 2 >= INET6_ADDRSTRLEN) {
			*why = "not an IPv6 address in brackets";
			return -EINVAL;
		}
		memcpy(buf, text + 1, len - 2);
		buf[len - 2] = '\0';
		/* A zone id names an interface of the sidecar's: never a destination. */
		if (strchr(buf, '%') || inet_pton(AF_INET6, buf, &a6) != 1) {
			*why = "not an IPv6 address in brackets";
			return -EINVAL;
		}
		h->is_addr = true;
		memcpy(h->addr, &a6, 16);
		return 0;
	}
	if (len > BK_EGRESS_NAME_MAX + 1) {
		*why = "a name is at most 253 bytes";
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (!name_char(c) && !(c >= 'A' && c <= 'Z')) {
			*why = "a host has only letters, digits, '-', '_' and '.'";
			return -EINVAL;
		}
	}
	/* The trailing dot first: "127.0.0.1." is the loopback address too. */
	len = without_root_dot(text, len);
	memcpy(buf, text, len);
	buf[len] = '\0';
	/* Every form the resolver would take for an address is that address: inet_aton is what
	 * getaddrinfo itself uses for numeric hosts (decimal, octal, hex, 1 to 4 parts). */
	if (inet_aton(buf, &a4) == 1) {
		h->is_addr = true;
		addr_from_v4(h->addr, &a4);
		return 0;
	}
	return name_normalize(buf, len, h->name, why);
}

bool bk_egress_pattern_matches(const bk_egress_pattern *p, const bk_egress_host *h, uint16_t port)
{
	if (p->port && p->port != port)
		return false;
	switch (p->kind) {
	case BK_EGRESS_ANY:
		return true;
	case BK_EGRESS_NAME:
		return !h->is_addr && strcmp(p->name, h->name) == 0;
	case BK_EGRESS_SUBDOMAINS:
		return !h->is_addr && name_below(h->name, p->name);
	case BK_EGRESS_NET:
		return h->is_addr && prefix_equal(h->addr, p->addr, p->prefix);
	}
	return false;
}

bool bk_egress_patterns_match(const bk_egress_pattern *v, size_t n, const bk_egress_host *h, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (bk_egress_pattern_matches(&v[i], h, port))
			return true;
	return false;
}

/* --- addresses never dialled ----------------------------------------------------------------- */

struct special_range {
	uint8_t addr[16];
	uint8_t prefix;
	const char *class;
};

#define V4(a, b, c, d) { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d }

/* The special ranges (IANA's special-purpose registries), most specific first where they nest.
 * The documentation ranges are not here: the tests' hosts live in them. */
static const struct special_range special[] = {
	{ V4(0, 0, 0, 0), 96 + 8, "unspecified" },
	{ V4(10, 0, 0, 0), 96 + 8, "private" },
	{ V4(100, 64, 0, 0), 96 + 10, "private" }, /* shared address space (carrier NAT) */
	{ V4(127, 0, 0, 0), 96 + 8, "loopback" },
	{ V4(169, 254, 0, 0), 96 + 16, "link-local" }, /* the cloud metadata endpoint */
	{ V4(172, 16, 0, 0), 96 + 12, "private" },
	{ V4(192, 0, 0, 0), 96 + 24, "reserved" },
	{ V4(192, 168, 0, 0), 96 + 16, "private" },
	{ V4(198, 18, 0, 0), 96 + 15, "reserved" }, /* benchmarking */
	{ V4(224, 0, 0, 0), 96 + 4, "multicast" },
	{ V4(240, 0, 0, 0), 96 + 4, "reserved" }, /* and the broadcast address */
	{ { 0 }, 128, "unspecified" },
	{ { [15] = 1 }, 128, "loopback" },
	{ { 0 }, 96, "reserved" }, /* IPv4-compatible (deprecated) */
	{ { [8] = 0xff, [9] = 0xff }, 96, "reserved" },            /* IPv4-translated, ::ffff:0:0:0/96 */
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "private" }, /* local-use NAT64 */
	{ { 0x01, 0x00 }, 64, "reserved" },                        /* discard-only */
	{ { 0x20, 0x01, 0x00, 0x00 }, 23, "reserved" },           /* IETF protocol assignments, Teredo */
	{ { 0xfc }, 7, "private" },                                 /* unique local */
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xfe, 0xc0 }, 10, "private" },                          /* site-local (deprecated) */
	{ { 0xff }, 8, "multicast" },
};

static const struct special_range *special_range_of(const uint8_t addr[16])
{
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (prefix_equal(addr, special[i].addr, special[i].prefix))
			return &special[i];
	return NULL;
}

/* The IPv4 address inside a translation prefix (NAT64 64:ff9b::/96, 6to4 2002::/16), as
 * ::ffff:a.b.c.d in v4; false when addr is none of those. */
static bool translated_v4(const uint8_t addr[16], uint8_t v4[16])
{
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };

	memcpy(v4, v4_mapped, sizeof(v4_mapped));
	if (memcmp(addr, nat64, sizeof(nat64)) == 0) {
		memcpy(v4 + 12, addr + 12, 4);
		return true;
	}
	if (addr[0] == 0x20 && addr[1] == 0x02) {
		memcpy(v4 + 12, addr + 2, 4);
		return true;
	}
	return false;
}

const char *bk_egress_addr_class(const uint8_t addr[16])
{
	const struct special_range *r = special_range_of(addr);
	uint8_t v4[16];

	if (r)
		return r->class;
	/* A translation of a special IPv4 address reaches it through a gateway. */
	if (translated_v4(addr, v4) && special_range_of(v4))
		return "translated special";
	return NULL;
}

/* Whether the ceiling has an address pattern for this port that contains addr and lies within
 * [range/bits]. */
static bool ceiling_names(const uint8_t addr[16], uint16_t port, const uint8_t range[16], unsigned bits,
			  const bk_egress_pattern *ceiling, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const bk_egress_pattern *p = &ceiling[i];
		if (p->kind != BK_EGRESS_NET || (p->port && p->port != port) || p->prefix < bits)
			continue;
		if (prefix_equal(p->addr, range, bits) && prefix_equal(addr, p->addr, p->prefix))
			return true;
	}
	return false;
}

const char *bk_egress_addr_refusal(const uint8_t addr[16], uint16_t port, const bk_egress_pattern *ceiling,
				   size_t n_ceiling, const uint8_t (*own)[16], size_t n_own)
{
	const struct special_range *r = special_range_of(addr);
	uint8_t v4[16];

	/* The class first (loopback says more than "ours"), then the sidecar's own addresses, which
	 * only an exact address pattern opens, whatever range they are in. */
	if (r && !ceiling_names(addr, port, r->addr, r->prefix, ceiling, n_ceiling))
		return r->class;
	if (!r && translated_v4(addr, v4) && special_range_of(v4))
		return "translated special";
	for (size_t i = 0; i < n_own; i++)
		if (memcmp(addr, own[i], 16) == 0 && !ceiling_names(addr, port, own[i], 128, ceiling, n_ceiling))
			return "the sidecar's own";
	return NULL;
}

int bk_egress_host_parse(const char *text, size_t len, bk_egress_host *h, bk_error **err)
{
	const char *why = NULL;

	return host_parse(text, len, h, &why) < 0 ? bk_error_invalid(err, "%s", why) : 0;
}
