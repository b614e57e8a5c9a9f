#include "error.h"

#include <errno.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "cleanup.h"

static const char *const status_names[] = {
	[BK_OK] = "OK",
	[BK_CANCELLED] = "CANCELLED",
	[BK_UNKNOWN] = "UNKNOWN",
	[BK_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
	[BK_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
	[BK_NOT_FOUND] = "NOT_FOUND",
	[BK_ALREADY_EXISTS] = "ALREADY_EXISTS",
	[BK_PERMISSION_DENIED] = "PERMISSION_DENIED",
	[BK_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
	[BK_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
	[BK_ABORTED] = "ABORTED",
	[BK_OUT_OF_RANGE] = "OUT_OF_RANGE",
	[BK_UNIMPLEMENTED] = "UNIMPLEMENTED",
	[BK_INTERNAL] = "INTERNAL",
	[BK_UNAVAILABLE] = "UNAVAILABLE",
	[BK_DATA_LOSS] = "DATA_LOSS",
	[BK_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

const char *bk_status_name(int status)
{
	if (status < 0 || (unsigned)status >= BK_ARRAY_SIZE(status_names))
		return "UNKNOWN";
	return status_names[status];
}

static const char *const detail_names[] = {
	[BK_DETAIL_NONE] = "NONE",
	[BK_DETAIL_MALFORMED] = "MALFORMED",
	[BK_DETAIL_BAD_VERSION] = "BAD_VERSION",
	[BK_DETAIL_UNKNOWN_KEY] = "UNKNOWN_KEY",
	[BK_DETAIL_BAD_MAC] = "BAD_MAC",
	[BK_DETAIL_STALE] = "STALE",
	[BK_DETAIL_FUTURE] = "FUTURE",
	[BK_DETAIL_REPLAYED] = "REPLAYED",
	[BK_DETAIL_OVERSIZED] = "OVERSIZED",
	[BK_DETAIL_UNKNOWN_METHOD] = "UNKNOWN_METHOD",
	[BK_DETAIL_AUTH_NOT_CONFIGURED] = "AUTH_NOT_CONFIGURED",
	[BK_DETAIL_REPLAY_CACHE_FULL] = "REPLAY_CACHE_FULL",
	[BK_DETAIL_BAD_BODY] = "BAD_BODY",
	[BK_DETAIL_CLAIM_KEY] = "CLAIM_KEY",
};

const char *bk_detail_name(int detail)
{
	if (detail < 0 || (unsigned)detail >= BK_ARRAY_SIZE(detail_names))
		return "UNKNOWN";
	return detail_names[detail];
}

int bk_status_from_errno(int errnum)
{
	switch (errnum) {
	case 0:
		return BK_OK;
	case ENOENT:
		return BK_NOT_FOUND;
	case EEXIST:
	case ENOTEMPTY:
		return BK_ALREADY_EXISTS;
	case EACCES:
	case EPERM:
	case EROFS:
		return BK_PERMISSION_DENIED;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
	case EMFILE:
	case ENFILE:
	case ENOMEM:
	case EAGAIN:
		return BK_RESOURCE_EXHAUSTED;
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
	case EXDEV:
		return BK_INVALID_ARGUMENT;
	case ETIMEDOUT:
		return BK_DEADLINE_EXCEEDED;
	case ECANCELED:
		return BK_CANCELLED;
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
	case ESRCH:
		return BK_UNAVAILABLE;
	default:
		return BK_INTERNAL;
	}
}

/* The public enums mirror the wire's; a renumbering on either side must not compile. */
#define SAME_DETAIL(name) _Static_assert((int)BK_DETAIL_##name == (int)BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_##name, #name)
SAME_DETAIL(NONE);
SAME_DETAIL(MALFORMED);
SAME_DETAIL(BAD_VERSION);
SAME_DETAIL(UNKNOWN_KEY);
SAME_DETAIL(BAD_MAC);
SAME_DETAIL(STALE);
SAME_DETAIL(FUTURE);
SAME_DETAIL(REPLAYED);
SAME_DETAIL(OVERSIZED);
SAME_DETAIL(UNKNOWN_METHOD);
SAME_DETAIL(AUTH_NOT_CONFIGURED);
SAME_DETAIL(REPLAY_CACHE_FULL);
SAME_DETAIL(BAD_BODY);
SAME_DETAIL(CLAIM_KEY);
