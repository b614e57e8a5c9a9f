/* libboxkite — the typed C client for boxkited.
 *
 *   bk_client *c;
 *   bk_status st;
 *   bk_client_options o = { .key_file = "/etc/boxkite/key" };
 *   if (bk_client_open(&c, "tcp://10.0.0.5:7700", &o, &st) != BK_OK)
 *           errx(1, "%s", st.message);
 *
 * Every call returns a gRPC canonical status code (BK_OK = 0, <boxkite/status.h>) and, when
 * `st` is not NULL, fills it with the code, the envelope rejection detail and a message.
 * A command that runs and fails is not an error: its exit code is data in the result.
 *
 * Thread safety: a bk_client may be used by any number of threads at once; each call runs on
 * its own nng context. bk_client_close() must not race with calls in progress.
 *
 * Link with `pkg-config --libs boxkite`. The wire protocol is docs/PROTOCOL.md. */
#ifndef BOXKITE_H
#define BOXKITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <boxkite/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BK_DEFAULT_URL "ipc:///run/boxkite/boxkited.sock"

typedef struct bk_client bk_client;

typedef struct bk_status {
	int code;          /* enum bk_code */
	int detail;        /* enum bk_detail: why the server refused the envelope, if it did */
	bool verified;     /* the answer carried a valid MAC from the server */
	char message[512];
} bk_status;

/* Where the client's key comes from: a key file (the first key, or the one named key_id), or
 * raw key bytes with their id. With neither, only Health can be called. */
typedef struct bk_client_options {
	const char *key_file;
	const char *key_id;
	const uint8_t *key;  /* raw secret, 32..64 bytes, used when key_file is NULL */
	size_t key_len;
	int timeout_ms;      /* default timeout of a call; 0 = 30000 */
} bk_client_options;

BK_EXPORT int bk_client_open(bk_client **out, const char *url, const bk_client_options *opts, bk_status *st);
BK_EXPORT void bk_client_close(bk_client *client);

/* --- Health ---------------------------------------------------------------------------------- */

typedef struct bk_health_info {
	char version[32];
	char mode[16];        /* "local", "pod", or "none" */
	bool sandbox_ready;
	bool auth_configured; /* the server has at least one key */
	bool authenticated;   /* this call was keyed and the answer's MAC verified */
	uint64_t uptime_ms;
} bk_health_info;

BK_EXPORT int bk_health(bk_client *client, bk_health_info *out, bk_status *st);

#ifdef __cplusplus
}
#endif

#endif
