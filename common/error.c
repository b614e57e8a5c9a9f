#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returned when the error itself cannot be allocated; never freed. */
static bk_error error_oom = { .status = BK_RESOURCE_EXHAUSTED, .errnum = ENOMEM, .msg = "out of memory" };

/* with_cause: append ": strerror(errnum)" to the message (when errnum is set). */
static int error_vset(bk_error **err, int status, int errnum, bool with_cause, const char *fmt, va_list ap)
{
	int ret = errnum > 0 ? -errnum : -EIO;
	char *msg = NULL;
	bk_error *e;

	if (!err || *err)
		return ret;
	if (vasprintf(&msg, fmt, ap) < 0) {
		*err = &error_oom;
		return ret;
	}
	if (errnum > 0 && with_cause) {
		char *full = NULL;
		if (asprintf(&full, "%s: %s", msg, strerror(errnum)) < 0) {
			free(msg);
			*err = &error_oom;
			return ret;
		}
		free(msg);
		msg = full;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(msg);
		*err = &error_oom;
		return ret;
	}
	e->status = status;
	e->errnum = errnum > 0 ? errnum : 0;
	e->msg = msg;
	*err = e;
	return ret;
}

int bk_error_set(bk_error **err, int status, int errnum, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = error_vset(err, status, errnum, true, fmt, ap);
	va_end(ap);
	return ret;
}

int bk_error_errno(bk_error **err, int errnum, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = error_vset(err, bk_status_from_errno(errnum), errnum, true, fmt, ap);
	va_end(ap);
	return ret;
}

int bk_error_invalid(bk_error **err, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = error_vset(err, BK_INVALID_ARGUMENT, EINVAL, false, fmt, ap);
	va_end(ap);
	return ret;
}

int bk_error_prefix(bk_error **err, int ret, const char *fmt, ...)
{
	char *ctx = NULL, *full = NULL;
	va_list ap;

	if (!err || !*err || *err == &error_oom)
		return ret;
	va_start(ap, fmt);
	if (vasprintf(&ctx, fmt, ap) < 0)
		ctx = NULL;
	va_end(ap);
	if (ctx && asprintf(&full, "%s: %s", ctx, (*err)->msg) >= 0) {
		free((*err)->msg);
		(*err)->msg = full;
	}
	free(ctx);
	return ret;
}

const char *bk_error_msg(const bk_error *e)
{
	return e && e->msg ? e->msg : "";
}

void bk_error_free(bk_error *e)
{
	if (!e || e == &error_oom)
		return;
	free(e->msg);
	free(e);
}
