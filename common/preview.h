/* Preview tokens: a signed, expiring grant to reach ONE port of a sandbox over the HTTP
 * listener, in the manner of an S3 presigned URL -- the holder of the pod's key mints it without
 * asking the server, and the server checks it without keeping state.
 *
 *   token  = base64url, no padding, of:  0x01 | port (u16 BE) | expiry (i64 BE, Unix seconds)
 *            | key-id length (u8) | key id | MAC (32 bytes)
 *   MAC    = HMAC-SHA256(key, "boxkite-preview-v1" NUL | 0x01 | port | expiry | key-id length
 *            | key id)
 *
 * The domain string keeps a preview MAC from ever equalling an envelope MAC (docs/PROTOCOL.md
 * starts its MAC input with another one). A token is refused if it does not decode, names an
 * unknown key, fails the MAC (compared in constant time), is for another port, has expired, or
 * expires further ahead than the server allows (a stolen token must not be good for a year).
 * The preview relay (server/transport/proxy.c) checks one for every request, and ends a
 * connection it relays at its token's expiry. */
#ifndef BK_PREVIEW_H
#define BK_PREVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"

#define BK_PREVIEW_VERSION 1
#define BK_PREVIEW_TOKEN_MAX 160 /* base64url of at most 1+2+8+1+64+32 bytes, and a NUL */

typedef enum bk_preview_verdict {
	BK_PREVIEW_OK = 0,
	BK_PREVIEW_MALFORMED,   /* not base64url, wrong length, wrong version */
	BK_PREVIEW_UNKNOWN_KEY, /* the key id names no key of the ring */
	BK_PREVIEW_BAD_MAC,
	BK_PREVIEW_WRONG_PORT,  /* a good token, for another port */
	BK_PREVIEW_EXPIRED,
	BK_PREVIEW_TOO_LONG,    /* expires beyond now + the largest lifetime allowed */
} bk_preview_verdict;

/* Mint a token for port, expiring at expires_s (Unix seconds), into out (BK_PREVIEW_TOKEN_MAX).
 * 0, or a negative errno. */
int bk_preview_token_make(const bk_key *key, uint16_t port, int64_t expires_s, char *out, size_t size);

/* Check a token for port at time now_s: a good token has expiry in (now_s, now_s + max_ttl_s],
 * which is then in *expires_s (when not NULL). */
bk_preview_verdict bk_preview_token_check(const bk_keyring *ring, const char *token, uint16_t port, int64_t now_s,
					  int64_t max_ttl_s, int64_t *expires_s);

const char *bk_preview_verdict_name(bk_preview_verdict v);

#endif
