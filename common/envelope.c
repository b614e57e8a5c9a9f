#include "envelope.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}

/* Feed a u32be length and the bytes: each variable field is length-prefixed, so no two
 * different envelopes share a MAC input. */
static int mac_lp(EVP_MAC_CTX *ctx, const void *data, size_t len)
{
	uint8_t n[4];

	put_u32(n, (uint32_t)len);
	return EVP_MAC_update(ctx, n, sizeof(n)) && (len == 0 || EVP_MAC_update(ctx, data, len));
}

int bk_digest_of(const uint8_t *data, size_t len, bk_digest *out)
{
	/* SHA-256 of nothing, the digest of every message without data: written out, because
	 * EVP_Digest() costs a few microseconds of fetching and allocating even for no bytes, four
	 * times per round trip. */
	static const uint8_t none[BK_SHA256_LEN] = {
		0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
		0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
	};

	out->len = len;
	if (len == 0) {
		memcpy(out->sha256, none, sizeof(none));
		return 0;
	}
	return EVP_Digest(data, len, out->sha256, NULL, EVP_sha256(), NULL) ? 0 : -EIO;
}

int bk_envelope_mac(const bk_key *key, const bk_envelope *env, const uint8_t *body, size_t body_len,
		    const bk_digest *data, uint8_t mac[BK_MAC_LEN])
{
	const char *key_id = env->key_id ? env->key_id : "";
	const char *method = env->method ? env->method : "";
	const char *message = env->message ? env->message : "";
	uint8_t fixed[4 + 4], ts[8], tail[4 + 4], blen[8], dlen[8];
	bk_digest own;
	EVP_MAC_CTX *ctx;
	size_t maclen = 0;
	int ok;

	if (env->key_id && strlen(env->key_id) > UINT32_MAX)
		return -EINVAL;
	if (!data) {
		if (bk_digest_of(env->data.data, env->data.len, &own) < 0)
			return -EIO;
		data = &own;
	}
	ctx = EVP_MAC_CTX_dup(key->mac);
	if (!ctx)
		return -ENOMEM;
	put_u32(fixed, env->version);
	put_u32(fixed + 4, (uint32_t)env->kind);
	put_u64(ts, (uint64_t)env->timestamp_ms);
	put_u32(tail, (uint32_t)env->status);
	put_u32(tail + 4, (uint32_t)env->detail);
	put_u64(blen, body_len);
	put_u64(dlen, data->len);
	/* The body enters whole; the data through its SHA-256, the hash the receiver computes
	 * anyway to check the chunk: so each byte of a chunk is hashed once per side. */
	ok = EVP_MAC_update(ctx, (const uint8_t *)BK_MAC_DOMAIN, sizeof(BK_MAC_DOMAIN)) &&
	     EVP_MAC_update(ctx, fixed, sizeof(fixed)) && mac_lp(ctx, key_id, strlen(key_id)) &&
	     EVP_MAC_update(ctx, ts, sizeof(ts)) && mac_lp(ctx, env->nonce.data, env->nonce.len) &&
	     mac_lp(ctx, method, strlen(method)) && EVP_MAC_update(ctx, tail, sizeof(tail)) &&
	     mac_lp(ctx, message, strlen(message)) && EVP_MAC_update(ctx, blen, sizeof(blen)) &&
	     (body_len == 0 || EVP_MAC_update(ctx, body, body_len)) && EVP_MAC_update(ctx, dlen, sizeof(dlen)) &&
	     EVP_MAC_update(ctx, data->sha256, BK_SHA256_LEN) && EVP_MAC_final(ctx, mac, &maclen, BK_MAC_LEN) &&
	     maclen == BK_MAC_LEN;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

bool bk_envelope_mac_ok(const bk_key *key, const bk_envelope *env, const bk_digest *data)
{
	uint8_t want[BK_MAC_LEN];
	bool ok;

	if (env->mac.len != BK_MAC_LEN)
		return false;
	if (bk_envelope_mac(key, env, env->body.data, env->body.len, data, want) < 0)
		return false;
	ok = CRYPTO_memcmp(want, env->mac.data, BK_MAC_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

Boxkite__V1__StatusDetail bk_envelope_check_time(int64_t ts_ms, int64_t now_ms, int64_t window_ms)
{
	/* Compare in a way that cannot overflow for any int64 timestamp a client sends. */
	if (ts_ms < now_ms && (uint64_t)now_ms - (uint64_t)ts_ms > (uint64_t)window_ms)
		return BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_STALE;
	if (ts_ms > now_ms && (uint64_t)ts_ms - (uint64_t)now_ms > (uint64_t)window_ms)
		return BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_FUTURE;
	return BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE;
}

/* Protobuf wire bits for the fields written by hand: 10 (body), 11 (mac) and 12 (data), all
 * length-delimited (wire type 2). */
#define WIRE_LEN 2
#define FIELD_DATA 12
#define TAG_BODY ((10 << 3) | WIRE_LEN)
#define TAG_MAC ((11 << 3) | WIRE_LEN)
#define TAG_DATA ((FIELD_DATA << 3) | WIRE_LEN)

static size_t varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* A varint at p (at most end - p bytes): its length in bytes, or 0 when it runs past end or
 * past 10 bytes. */
static size_t get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

int bk_envelope_split(const uint8_t *msg, size_t len, size_t *fields_len, const uint8_t **data, size_t *data_len)
{
	const uint8_t *p = msg, *end = msg + len;

	*fields_len = len;
	*data = NULL;
	*data_len = 0;
	while (p < end) {
		const uint8_t *field = p;
		uint64_t key, n;
		size_t k = get_varint(p, end, &key);

		if (!k)
			return -EBADMSG;
		p += k;
		switch (key & 7) {
		case 0: /* varint */
			if (!(k = get_varint(p, end, &n)))
				return -EBADMSG;
			p += k;
			break;
		case 1: /* 64-bit */
			if ((size_t)(end - p) < 8)
				return -EBADMSG;
			p += 8;
			break;
		case 2: /* length-delimited */
			if (!(k = get_varint(p, end, &n)) || n > (uint64_t)((size_t)(end - p) - k))
				return -EBADMSG;
			p += k;
			/* The data field as bk_envelope_layout() writes it, the only way it is
			 * accepted: a one-byte tag, a shortest length, bytes, and the end. */
			if (key >> 3 == FIELD_DATA) {
				if (field[0] != TAG_DATA || k != varint_size(n) || n == 0 || p + n != end)
					return -EBADMSG;
				*fields_len = (size_t)(field - msg);
				*data = p;
				*data_len = (size_t)n;
				return 0;
			}
			p += n;
			break;
		case 5: /* 32-bit */
			if ((size_t)(end - p) < 4)
				return -EBADMSG;
			p += 4;
			break;
		default:
			return -EBADMSG;
		}
	}
	return 0;
}

size_t bk_envelope_sealed_size(const bk_envelope *hdr, const ProtobufCMessage *body, size_t data_len, bool keyed)
{
	size_t n = protobuf_c_message_get_packed_size(&hdr->base);
	size_t blen = body ? protobuf_c_message_get_packed_size(body) : 0;

	if (blen)
		n += 1 + varint_size(blen) + blen;
	if (keyed)
		n += 2 + BK_MAC_LEN;
	if (data_len)
		n += 1 + varint_size(data_len) + data_len;
	return n;
}

void bk_envelope_layout(const bk_envelope *hdr, const ProtobufCMessage *body, size_t data_len, bool keyed,
			uint8_t *out, bk_layout *l)
{
	size_t n = protobuf_c_message_pack(&hdr->base, out);
	size_t blen = body ? protobuf_c_message_get_packed_size(body) : 0;

	*l = (bk_layout){ 0 };
	if (blen) {
		out[n++] = TAG_BODY;
		n += put_varint(out + n, blen);
		l->body_at = n;
		l->body_len = blen;
		n += protobuf_c_message_pack(body, out + n);
	}
	if (keyed) {
		out[n++] = TAG_MAC;
		out[n++] = BK_MAC_LEN;
		l->mac_at = n;
		n += BK_MAC_LEN;
	}
	if (data_len) {
		out[n++] = TAG_DATA;
		n += put_varint(out + n, data_len);
		l->data_at = n;
		l->data_len = data_len;
		n += data_len;
	}
	l->len = n;
}

int bk_envelope_sign(const bk_envelope *hdr, const bk_key *key, const bk_digest *data, uint8_t *out,
		     const bk_layout *l)
{
	/* hdr's own data field is empty: with data NULL the MAC covers no data. */
	if (!l->mac_at)
		return -EINVAL;
	return bk_envelope_mac(key, hdr, l->body_len ? out + l->body_at : NULL, l->body_len, data, out + l->mac_at);
}

size_t bk_envelope_seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, uint8_t *out)
{
	bk_layout l;

	bk_envelope_layout(hdr, body, 0, key != NULL, out, &l);
	if (key && bk_envelope_sign(hdr, key, NULL, out, &l) < 0)
		return 0;
	return l.len;
}

/* --- arena allocator ------------------------------------------------------------------------- */

struct arena_block {
	struct arena_block *next;
	size_t size, used;
	max_align_t data[];
};

struct bk_arena {
	ProtobufCAllocator allocator;
	struct arena_block *blocks;
	size_t cap, total;
	bool exhausted;
};

#define ARENA_BLOCK_MIN 4096

static void *arena_alloc(void *data, size_t size)
{
	bk_arena *arena = data;
	struct arena_block *b = arena->blocks;
	size_t need = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);

	if (need < size || need > arena->cap - arena->total) {
		arena->exhausted = true;
		return NULL;
	}
	if (!b || b->size - b->used < need) {
		size_t bsize = need > ARENA_BLOCK_MIN ? need : ARENA_BLOCK_MIN;
		b = malloc(sizeof(*b) + bsize);
		if (!b)
			return NULL;
		b->size = bsize;
		b->used = 0;
		/* Keep the emptier block at the head so small allocations go on filling it. */
		if (arena->blocks && bsize == need) {
			b->next = arena->blocks->next;
			arena->blocks->next = b;
		} else {
			b->next = arena->blocks;
			arena->blocks = b;
		}
	}
	arena->total += need;
	b->used += need;
	return (char *)b->data + b->used - need;
}

static void arena_free_noop(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

bk_arena *bk_arena_new(size_t cap)
{
	bk_arena *arena = calloc(1, sizeof(*arena));

	if (!arena)
		return NULL;
	arena->allocator.alloc = arena_alloc;
	arena->allocator.free = arena_free_noop;
	arena->allocator.allocator_data = arena;
	arena->cap = cap;
	return arena;
}

void bk_arena_free(bk_arena *arena)
{
	if (!arena)
		return;
	while (arena->blocks) {
		struct arena_block *next = arena->blocks->next;
		free(arena->blocks);
		arena->blocks = next;
	}
	free(arena);
}

ProtobufCAllocator *bk_arena_allocator(bk_arena *arena)
{
	return &arena->allocator;
}

size_t bk_arena_used(const bk_arena *arena)
{
	return arena->total;
}

bool bk_arena_exhausted(const bk_arena *arena)
{
	return arena->exhausted;
}
