/* Inside libboxkite: the one generic call every typed function goes through. */
#ifndef BK_CLIENT_CALL_H
#define BK_CLIENT_CALL_H

#include "boxkite/boxkite.h"
#include "envelope.h"

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

#endif
