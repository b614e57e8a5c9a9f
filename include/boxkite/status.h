/* boxkite status codes: gRPC's canonical set, as carried in Envelope.status, and the envelope
 * rejection details (Envelope.detail), as declared in proto/boxkite/v1/boxkite.proto. */
#ifndef BOXKITE_STATUS_H
#define BOXKITE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define BK_EXPORT __attribute__((visibility("default")))

enum bk_code {
	BK_OK = 0,
	BK_CANCELLED = 1,
	BK_UNKNOWN = 2,
	BK_INVALID_ARGUMENT = 3,
	BK_DEADLINE_EXCEEDED = 4,
	BK_NOT_FOUND = 5,
	BK_ALREADY_EXISTS = 6,
	BK_PERMISSION_DENIED = 7,
	BK_RESOURCE_EXHAUSTED = 8,
	BK_FAILED_PRECONDITION = 9,
	BK_ABORTED = 10,
	BK_OUT_OF_RANGE = 11,
	BK_UNIMPLEMENTED = 12,
	BK_INTERNAL = 13,
	BK_UNAVAILABLE = 14,
	BK_DATA_LOSS = 15,
	BK_UNAUTHENTICATED = 16,
};

enum bk_detail {
	BK_DETAIL_NONE = 0,
	BK_DETAIL_MALFORMED = 1,
	BK_DETAIL_BAD_VERSION = 2,
	BK_DETAIL_UNKNOWN_KEY = 3,
	BK_DETAIL_BAD_MAC = 4,
	BK_DETAIL_STALE = 5,
	BK_DETAIL_FUTURE = 6,
	BK_DETAIL_REPLAYED = 7,
	BK_DETAIL_OVERSIZED = 8,
	BK_DETAIL_UNKNOWN_METHOD = 9,
	BK_DETAIL_AUTH_NOT_CONFIGURED = 10,
	BK_DETAIL_REPLAY_CACHE_FULL = 11,
	BK_DETAIL_BAD_BODY = 12,
	BK_DETAIL_CLAIM_KEY = 13,
};

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN" for a code outside the set. */
BK_EXPORT const char *bk_status_name(int status);

/* "NONE", "BAD_MAC", ...; "UNKNOWN" for a detail outside the set. */
BK_EXPORT const char *bk_detail_name(int detail);

#ifdef __cplusplus
}
#endif

#endif
