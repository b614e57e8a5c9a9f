/* TLS for the destinations with brokered credentials (docs/ARCHITECTURE.md, "Egress"): the proxy
 * terminates the command's TLS with a certificate for the destination from a CA it made at
 * start-up, whose key never leaves this process, and makes its own TLS connection to the
 * destination, verified against the system's trust store. The CA is name-constrained to the
 * credentialed destinations: trusting it vouches for nothing else. Destinations without a
 * credential are never terminated: their bytes are tunnelled as they are. */
#ifndef BK_EGRESS_MITM_H
#define BK_EGRESS_MITM_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "egresspolicy.h"
#include "error.h"

typedef struct bk_mitm bk_mitm;

/* The CA for these hosts (names or addresses), the leaf key, both contexts, the trust store
 * loaded from the system's default file. 0 or -errno. */
int bk_mitm_new(bk_mitm **out, const bk_egress_host *hosts, size_t n, bk_error **err);
void bk_mitm_free(bk_mitm *m);

/* What the sandbox is told to trust: the system's roots and the CA, one PEM file (malloc'd). */
int bk_mitm_bundle(const bk_mitm *m, char **pem, size_t *len, bk_error **err);

/* An SSL on fd (non-blocking) for the command's side, presenting a certificate for host and
 * choosing http/1.1 by ALPN. NULL when it cannot be made. */
SSL *bk_mitm_accepting(bk_mitm *m, const bk_egress_host *host, int fd);

/* An SSL on fd (non-blocking) to the destination: its certificate must chain to the system's
 * roots and name host; SNI set for names, ALPN offers http/1.1 only. NULL when it cannot be
 * made. */
SSL *bk_mitm_connecting(bk_mitm *m, const bk_egress_host *host, int fd);

#endif
