#include "preview.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define DOMAIN "boxkite-preview-v1"
#define HEAD 12 /* version, port, expiry, key-id length */
#define RAW_MAX (HEAD + BK_KEY_ID_MAX + 32)

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The token's bytes before the MAC: HEAD bytes and the key id. */
static size_t token_head(uint8_t *raw, uint16_t port, int64_t expires_s, const char *key_id)
{
	size_t idlen = strlen(key_id);
	uint64_t e = (uint64_t)expires_s;

	raw[0] = BK_PREVIEW_VERSION;
	raw[1] = (uint8_t)(port >> 8);
	raw[2] = (uint8_t)port;
	for (int i = 0; i < 8; i++)
		raw[3 + i] = (uint8_t)(e >> (56 - 8 * i));
	raw[11] = (uint8_t)idlen;
	memcpy(raw + HEAD, key_id, idlen);
	return HEAD + idlen;
}

static int token_mac(const bk_key *key, const uint8_t *head, size_t len, uint8_t mac[32])
{
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(key->mac);
	size_t maclen = 0;
	int ok = ctx && EVP_MAC_update(ctx, (const uint8_t *)DOMAIN, sizeof(DOMAIN)) &&
		 EVP_MAC_update(ctx, head, len) && EVP_MAC_final(ctx, mac, &maclen, 32) && maclen == 32;

	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

int bk_preview_token_make(const bk_key *key, uint16_t port, int64_t expires_s, char *out, size_t size)
{
	uint8_t raw[RAW_MAX];
	size_t len = token_head(raw, port, expires_s, key->id), o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (token_mac(key, raw, len, raw + len) < 0)
		return -EIO;
	len += 32;
	if (size < (len * 4 + 2) / 3 + 1)
		return -ENOBUFS;
	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | raw[i];
		for (bits += 8; bits >= 6; bits -= 6)
			out[o++] = b64url[(acc >> (bits - 6)) & 63];
	}
	if (bits)
		out[o++] = b64url[(acc << (6 - bits)) & 63];
	out[o] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

/* base64url without padding into raw; the length, or -1. Trailing bits must be zero, so that
 * every token has exactly one spelling. */
static int decode(const char *s, uint8_t *raw, size_t size)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;

	for (; *s; s++) {
		const char *p = strchr(b64url, *s);
		if (!p)
			return -1;
		acc = (acc << 6) | (uint32_t)(p - b64url);
		bits += 6;
		if (bits >= 8) {
			if (n == size)
				return -1;
			raw[n++] = (uint8_t)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	if (bits >= 6 || (acc & ((1u << bits) - 1)))
		return -1;
	return (int)n;
}

bk_preview_verdict bk_preview_token_check(const bk_keyring *ring, const char *token, uint16_t port, int64_t now_s,
					  int64_t max_ttl_s, int64_t *expires_s)
{
	uint8_t raw[RAW_MAX], mac[32];
	char id[BK_KEY_ID_MAX + 1];
	const bk_key *key;
	uint64_t e = 0;
	int64_t expires;
	int n;

	if (strlen(token) >= BK_PREVIEW_TOKEN_MAX || (n = decode(token, raw, sizeof(raw))) < HEAD + 1 + 32 ||
	    raw[0] != BK_PREVIEW_VERSION || raw[11] == 0 || raw[11] > BK_KEY_ID_MAX || n != HEAD + raw[11] + 32)
		return BK_PREVIEW_MALFORMED;
	memcpy(id, raw + HEAD, raw[11]);
	id[raw[11]] = '\0';
	if (!bk_key_id_valid(id))
		return BK_PREVIEW_MALFORMED;
	if (!ring || !(key = bk_keyring_find(ring, id)))
		return BK_PREVIEW_UNKNOWN_KEY;
	if (token_mac(key, raw, (size_t)n - 32, mac) < 0 || CRYPTO_memcmp(mac, raw + n - 32, 32) != 0)
		return BK_PREVIEW_BAD_MAC;
	/* Authentic from here on: the rest is what the key's holder asked for. */
	if (((uint16_t)(raw[1] << 8) | raw[2]) != port)
		return BK_PREVIEW_WRONG_PORT;
	for (int i = 0; i < 8; i++)
		e = (e << 8) | raw[3 + i];
	expires = (int64_t)e;
	if (expires <= now_s)
		return BK_PREVIEW_EXPIRED;
	if (expires - now_s > max_ttl_s)
		return BK_PREVIEW_TOO_LONG;
	if (expires_s)
		*expires_s = expires;
	return BK_PREVIEW_OK;
}

const char *bk_preview_verdict_name(bk_preview_verdict v)
{
	static const char *const names[] = { "OK", "MALFORMED", "UNKNOWN_KEY", "BAD_MAC", "WRONG_PORT", "EXPIRED",
					     "TOO_LONG" };

	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "UNKNOWN";
}
