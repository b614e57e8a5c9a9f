/* Inside libboxkite: the one generic call every typed function goes through, and how a
 * bk_status is filled (bkctl, linked with the static library, fills its own the same way). */
#ifndef BK_CLIENT_CALL_H
#define BK_CLIENT_CALL_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "boxkite/boxkite.h"
#include "envelope.h"
#include "error.h"

/* Seal req as `method`, send it, wait up to timeout_ms (0: the client's default), verify the
 * answer (kind, nonce, method, MAC) and decode its body as resp_desc into *resp (free with
 * protobuf_c_message_free_unpacked(*resp, NULL)). Returns the status code; fills st. */
int bk_client_call(bk_client *c, const char *method, const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp, int timeout_ms,
		   bool *verified, bk_status *st);

/* The client's default per-call timeout in ms. */
int bk_client_timeout(const bk_client *c);

/* Fill st (when not NULL) and return code. */
int bk_status_set(bk_status *st, int code, int detail, bool verified, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* A local operation failed with errnum (reading a file to upload, say): bk_status_set() with the
 * status bk_status_from_errno() gives and the message ending in ": strerror(errnum)", as
 * bk_error_errno() does for a bk_error. */
static inline int bk_status_errno(bk_status *st, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline int bk_status_errno(bk_status *st, int errnum, const char *fmt, ...)
{
	char what[sizeof(st->message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return bk_status_set(st, bk_status_from_errno(errnum), 0, false, "%s: %s", what, strerror(errnum));
}

#endif
