/* The dispatch table's limits (server/rpc/methods.c): what a request may carry, per method, and the
 * largest legal request message they add up to. docs/PROTOCOL.md's limits table is printed from
 * the table itself (make docs; make test fails when it is stale). */
#ifndef BK_METHODS_H
#define BK_METHODS_H

#include <stddef.h>

#include "rpc/server.h"

#define BK_KiB ((size_t)1 << 10)
#define BK_MiB ((size_t)1 << 20)

/* The largest body of any method (Exec and ProcessWrite: a command's stdin) and the largest data
 * field (FileUploadChunk: a chunk, compressed or not — zstd's worst case adds under 0.5 %). No
 * method takes both. */
#define BK_BODY_MAX (8 * BK_MiB)
#define BK_DATA_MAX (4 * BK_MiB + 64 * BK_KiB)
/* Every other field of a request Envelope at its largest (a 64-character key id, the nonce, the
 * longest method name, the MAC, tags and lengths come to under 200 bytes), with room to spare. */
#define BK_ENVELOPE_FIELDS_MAX (1 * BK_KiB)
/* The largest legal request message (the Envelope; nng's request id comes on top): the receive
 * limit sized to it refuses nothing that would be served. bk_methods_init() checks every row
 * against it. */
#define BK_REQUEST_MAX (BK_BODY_MAX + BK_ENVELOPE_FIELDS_MAX)

int bk_methods_init(bk_server *srv, bk_error **err);

/* The rows in the service's order, for docs/PROTOCOL.md's table (bk-limits-doc): row i of n, or
 * NULL past the end. */
const bk_method *bk_methods_row(size_t i);

#endif
