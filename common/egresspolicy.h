/* Egress policy (DESIGN.md §6b, docs/PROTOCOL.md "Egress"): which destinations an exec may reach
 * through the sidecar's egress proxy, and which addresses are never dialled.
 *
 * A destination pattern is HOST:PORT. HOST is `*` (any), a name (`pkg.example`), `*.domain` (its
 * subdomains at any depth, not the domain itself), an IPv4 address or CIDR (`192.0.2.7`,
 * `10.0.0.0/8`), or an IPv6 one in brackets (`[2001:db8::1]`, `[2001:db8::/32]`). PORT is 1-65535
 * or `*`. Patterns are what the operator's ceiling (--egress-allow) and a request's grant are made
 * of: the front refuses a grant with a pattern no ceiling pattern covers, the executor checks the
 * same again, and the proxy matches every request against the grant.
 *
 * Hosts as a request names them are normalized before any check, so that one address has one
 * form: every IPv4 spelling inet_aton(3) takes (decimal `2130706433`, octal `0177.0.0.1`, hex,
 * short `127.1`) is that address, an IPv4-mapped IPv6 address is the IPv4 one (both are kept as
 * ::ffff:a.b.c.d), names are lowercased with one trailing dot removed, and anything else — a name
 * whose last label is numeric, a zone id, a byte outside letters, digits, '-', '_' and '.' — is
 * refused. A name never matches an address pattern, nor an address a name pattern.
 *
 * Addresses are never dialled when they are special (loopback, link-local, unspecified,
 * multicast, private, reserved, an IPv4 one inside an IPv6 translation prefix) or the sidecar's
 * own, whatever a grant or a name's answer says — unless the ceiling has an address pattern for
 * the port that contains the address and lies within the special range (`10.1.0.0/16` opens
 * those addresses of 10/8; `0.0.0.0/0` opens nothing special). Translated forms never are. */
#ifndef BK_EGRESSPOLICY_H
#define BK_EGRESSPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define BK_EGRESS_NAME_MAX 253     /* a DNS name, without its trailing dot */
#define BK_EGRESS_PATTERN_TEXT_MAX 300
#define BK_EGRESS_GRANT_MAX 64     /* patterns in one request's grant */
#define BK_EGRESS_CEILING_MAX 256  /* patterns in the operator's ceiling */
/* "[ffff:...:255.255.255.255]:65535" and a NUL */
#define BK_EGRESS_ADDR_TEXT_MAX 56

/* Where a granted command finds the proxy: this port on the loopback address of its own network
 * namespace, as its environment says (HTTP_PROXY and the others). */
#define BK_EGRESS_PROXY_PORT 3128
#define BK_EGRESS_PROXY_URL "http://127.0.0.1:3128"
/* Where it finds what to trust when its grant reaches a brokered destination: the system's roots
 * and the proxy's CA, in a read-only tmpfs mounted on this directory of the sandbox, in the
 * exec's own mount namespace. */
#define BK_EGRESS_CA_DIR "/run/boxkite"
#define BK_EGRESS_CA_NAME "egress-ca.pem"
#define BK_EGRESS_CA_FILE BK_EGRESS_CA_DIR "/" BK_EGRESS_CA_NAME

typedef enum bk_egress_host_kind {
	BK_EGRESS_ANY,        /* `*` */
	BK_EGRESS_NAME,       /* exactly this name */
	BK_EGRESS_SUBDOMAINS, /* `*.domain`: names ending in ".domain" */
	BK_EGRESS_NET,        /* an address, or a CIDR */
} bk_egress_host_kind;

typedef struct bk_egress_pattern {
	bk_egress_host_kind kind;
	char name[BK_EGRESS_NAME_MAX + 1]; /* NAME: the name; SUBDOMAINS: the domain after "*." */
	uint8_t addr[16];                  /* NET: IPv6; IPv4 as ::ffff:a.b.c.d */
	uint8_t prefix;                    /* NET: bits of addr that count, 0-128 */
	uint16_t port;                     /* 0: any port */
} bk_egress_pattern;

/* A host as a request names it, normalized. */
typedef struct bk_egress_host {
	bool is_addr;
	char name[BK_EGRESS_NAME_MAX + 1]; /* !is_addr */
	uint8_t addr[16];                  /* is_addr: IPv6; IPv4 as ::ffff:a.b.c.d */
} bk_egress_host;

/* Parse one pattern (NUL-terminated text). 0, or -EINVAL with *err saying why. */
int bk_egress_pattern_parse(const char *text, bk_egress_pattern *p, bk_error **err);

/* The pattern's canonical text (what parsing it gives back). Truncated to size, NUL-terminated. */
void bk_egress_pattern_format(const bk_egress_pattern *p, char *buf, size_t size);

/* Parse n texts into a new array (*out, freed by the caller; NULL when n is 0). 0, or -EINVAL with
 * *err naming the text refused and why, or -ENOMEM. */
int bk_egress_patterns_parse(char *const *texts, size_t n, bk_egress_pattern **out, bk_error **err);

/* Whether every destination inner matches is one outer matches too. */
bool bk_egress_pattern_covers(const bk_egress_pattern *outer, const bk_egress_pattern *inner);

/* The index of the first grant pattern no ceiling pattern covers, or -1 when the ceiling covers
 * the whole grant (an empty ceiling covers nothing). */
long bk_egress_grant_beyond(const bk_egress_pattern *grant, size_t n_grant, const bk_egress_pattern *ceiling,
			    size_t n_ceiling);

/* A single destination, HOST:PORT with a name or one address and a port, no wildcard or range
 * (a brokered credential's). 0, or -EINVAL with *err. */
int bk_egress_destination_parse(const char *text, bk_egress_host *host, uint16_t *port, bk_error **err);

/* Normalize a host as a request names it (len bytes, not NUL-terminated: a name, an IPv4
 * address in any inet_aton form, or an IPv6 one in brackets). 0, or -EINVAL with *err. */
int bk_egress_host_parse(const char *text, size_t len, bk_egress_host *h, bk_error **err);

/* Whether the pattern matches this host and port. */
bool bk_egress_pattern_matches(const bk_egress_pattern *p, const bk_egress_host *h, uint16_t port);

/* Whether any of the n patterns matches. */
bool bk_egress_patterns_match(const bk_egress_pattern *v, size_t n, const bk_egress_host *h, uint16_t port);

/* NULL when addr may be dialled on port; otherwise the class that keeps it from being dialled
 * ("loopback", "link-local", "private", "the sidecar's own", ...). own: the sidecar's own
 * addresses (n_own of them); ceiling: the operator's patterns, whose address patterns may open a
 * special range (see above). */
const char *bk_egress_addr_refusal(const uint8_t addr[16], uint16_t port, const bk_egress_pattern *ceiling,
				   size_t n_ceiling, const uint8_t (*own)[16], size_t n_own);

/* The class of a special address, or NULL for one that is not ("public"). */
const char *bk_egress_addr_class(const uint8_t addr[16]);

/* Whether addr is an IPv4 address (::ffff:a.b.c.d). */
bool bk_egress_addr_is_v4(const uint8_t addr[16]);

/* "a.b.c.d:port" or "[v6]:port" (port 0: the address alone), into buf of at least
 * BK_EGRESS_ADDR_TEXT_MAX bytes. */
void bk_egress_addr_format(const uint8_t addr[16], uint16_t port, char *buf, size_t size);

#endif
