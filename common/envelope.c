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

int bk_envelope_mac(const bk_key *key, const bk_envelope *env, const uint8_t *body, size_t body_len,
		    uint8_t mac[BK_MAC_LEN])
{
	const char *key_id = env->key_id ? env->key_id : "";
	const char *method = env->method ? env->method : "";
	const char *message = env->message ? env->message : "";
	uint8_t fixed[4 + 4], ts[8], tail[4 + 4], blen[8];
	EVP_MAC_CTX *ctx;
	size_t maclen = 0;
	int ok;

	if (env->key_id && strlen(env->key_id) > UINT32_MAX)
		return -EINVAL;
	ctx = EVP_MAC_CTX_dup(key->mac);
	if (!ctx)
		return -ENOMEM;
	put_u32(fixed, env->version);
	put_u32(fixed + 4, (uint32_t)env->kind);
	put_u64(ts, (uint64_t)env->timestamp_ms);
	put_u32(tail, (uint32_t)env->status);
	put_u32(tail + 4, (uint32_t)env->detail);
	put_u64(blen, body_len);
	ok = EVP_MAC_update(ctx, (const uint8_t *)BK_MAC_DOMAIN, sizeof(BK_MAC_DOMAIN)) &&
	     EVP_MAC_update(ctx, fixed, sizeof(fixed)) && mac_lp(ctx, key_id, strlen(key_id)) &&
	     EVP_MAC_update(ctx, ts, sizeof(ts)) && mac_lp(ctx, env->nonce.data, env->nonce.len) &&
	     mac_lp(ctx, method, strlen(method)) && EVP_MAC_update(ctx, tail, sizeof(tail)) &&
	     mac_lp(ctx, message, strlen(message)) && EVP_MAC_update(ctx, blen, sizeof(blen)) &&
	     (body_len == 0 || EVP_MAC_update(ctx, body, body_len)) && EVP_MAC_final(ctx, mac, &maclen, BK_MAC_LEN) &&
	     maclen == BK_MAC_LEN;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

bool bk_envelope_mac_ok(const bk_key *key, const bk_envelope *env)
{
	uint8_t want[BK_MAC_LEN];
	bool ok;

	if (env->mac.len != BK_MAC_LEN)
		return false;
	if (bk_envelope_mac(key, env, env->body.data, env->body.len, want) < 0)
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

/* Protobuf wire bits for the two fields written by hand: field 10 (body) and 11 (mac), both
 * length-delimited (wire type 2). */
#define TAG_BODY ((10 << 3) | 2)
#define TAG_MAC ((11 << 3) | 2)

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

size_t bk_envelope_sealed_size(const bk_envelope *hdr, const ProtobufCMessage *body)
{
	size_t n = protobuf_c_message_get_packed_size(&hdr->base);
	size_t blen = body ? protobuf_c_message_get_packed_size(body) : 0;

	if (blen)
		n += 1 + varint_size(blen) + blen;
	return n + 2 + BK_MAC_LEN;
}

size_t bk_envelope_seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, uint8_t *out)
{
	size_t n = protobuf_c_message_pack(&hdr->base, out);
	size_t blen = body ? protobuf_c_message_get_packed_size(body) : 0;
	const uint8_t *bodyp = NULL;

	if (blen) {
		out[n++] = TAG_BODY;
		n += put_varint(out + n, blen);
		bodyp = out + n;
		n += protobuf_c_message_pack(body, out + n);
	}
	if (!key)
		return n; /* unauthenticated: no mac field at all */
	out[n++] = TAG_MAC;
	out[n++] = BK_MAC_LEN;
	if (bk_envelope_mac(key, hdr, bodyp, blen, out + n) < 0)
		return 0;
	return n + BK_MAC_LEN;
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
