/* The one error convention (docs/ARCHITECTURE.md, "Errors"):
 *
 *   int bk_thing_do(..., bk_error **err);
 *
 * returns 0 on success or a negative errno, and on failure leaves a bk_error in *err that
 * carries a gRPC status, the errno (0 if none) and a message. Callers add context with
 * bk_error_prefix() and pass the error up; only the top level (a handler, main) reports it.
 * err may be NULL when the caller only wants the return code.
 *
 * Two places report otherwise, each for a reason, and nowhere else does:
 *   - a child of the executor between clone and execve (sidecar/exec/child.h) shares the
 *     executor's memory and may not allocate: its steps return -1 with errno (or the step that
 *     failed) as system calls do, and it reports {step, errno} over its CLOEXEC pipe, which the
 *     parent turns into a bk_error (bk_step_report_read);
 *   - the file worker's operations (sidecar/files/fsops.h, bk_fs_error) report an errno and the
 *     sandbox path it concerns, not a sentence: the path crosses the channel as data (the
 *     Reply's message) and the front words the message for its rpc (server/files/files.c gives
 *     its own reasons and shows a deep path's end). */
#ifndef BK_ERROR_H
#define BK_ERROR_H

#include "cleanup.h"
#include "boxkite/status.h"

#define BK_PRINTF(a, b) __attribute__((format(printf, a, b)))

typedef struct bk_error {
	int status; /* enum bk_code */
	int errnum; /* errno that caused it, 0 if none */
	char *msg;
} bk_error;

/* Record a new error (unless *err already holds one) and return -errnum, or -EIO when errnum is
 * 0. With errnum != 0 the message ends in ": strerror(errnum)". */
int bk_error_set(bk_error **err, int status, int errnum, const char *fmt, ...) BK_PRINTF(4, 5);

/* bk_error_set() with the status derived from errnum (bk_status_from_errno). */
int bk_error_errno(bk_error **err, int errnum, const char *fmt, ...) BK_PRINTF(3, 4);

/* A request or order refused for what it says: INVALID_ARGUMENT with errnum EINVAL, and the
 * message is the whole reason (no ": Invalid argument" after it). Returns -EINVAL. */
int bk_error_invalid(bk_error **err, const char *fmt, ...) BK_PRINTF(2, 3);

/* Prefix the message of *err with context ("ctx: old message"); returns ret unchanged. */
int bk_error_prefix(bk_error **err, int ret, const char *fmt, ...) BK_PRINTF(3, 4);

/* The message of an error, or "" for NULL. */
const char *bk_error_msg(const bk_error *e);

void bk_error_free(bk_error *e);
BK_DEFINE_PTR_CLEANUP(bk_error_freep, bk_error, bk_error_free)
#define _cleanup_error_ _cleanup_(bk_error_freep)

/* The status an errno from a file or process operation maps to (common/status.c). */
int bk_status_from_errno(int errnum);

#endif
