/* The authenticated envelope (docs/PROTOCOL.md): sealing with HMAC-SHA256 over an unambiguous
 * encoding of every field but the MAC — the data field through its SHA-256, which the caller
 * computes once and reuses as the chunk's hash —, opening with a constant-time check, the time
 * window. No I/O and no clock of its own: callers pass `now`, so tests inject time. */
#ifndef BK_ENVELOPE_H
#define BK_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "error.h"
#include "keys.h"

#define BK_ENVELOPE_VERSION 2
#define BK_NONCE_LEN 16
#define BK_MAC_LEN 32
#define BK_SHA256_LEN 32

typedef Boxkite__V1__Envelope bk_envelope;

/* The domain string that starts every MAC input (20 bytes, NUL included). */
#define BK_MAC_DOMAIN "boxkite.v1.Envelope"

/* The data field as the MAC input holds it: its length and its SHA-256 — the one hash of the
 * data each side computes, which the file rpcs then use as the chunk's hash. */
typedef struct bk_digest {
	uint64_t len;
	uint8_t sha256[BK_SHA256_LEN];
} bk_digest;

/* The digest of len bytes at data (data may be NULL when len is 0). 0, or -EIO when libcrypto
 * fails. */
int bk_digest_of(const uint8_t *data, size_t len, bk_digest *out);

/* HMAC-SHA256 of the MAC input of env (every field but env->mac), with `body` standing in for
 * env->body (so a sealer can MAC a body it packed elsewhere) and `data` for env->data (NULL:
 * env->data, hashed here). */
int bk_envelope_mac(const bk_key *key, const bk_envelope *env, const uint8_t *body, size_t body_len,
		    const bk_digest *data, uint8_t mac[BK_MAC_LEN]);

/* True when env->mac is the MAC of env under key, `data` standing in for env->data as above;
 * compared in constant time. */
bool bk_envelope_mac_ok(const bk_key *key, const bk_envelope *env, const bk_digest *data);

/* A received message is an Envelope whose data field, when it has one, is its last: *fields_len
 * is the length of what comes before it (every other field), and *data / *data_len the data in
 * place — so that a chunk is neither copied by the decoder nor held twice. 0; -EBADMSG when
 * the message does not parse that far or its data field is not canonically encoded (not last,
 * present but empty, a padded tag or length). */
int bk_envelope_split(const uint8_t *msg, size_t len, size_t *fields_len, const uint8_t **data, size_t *data_len);

/* Where ts lies against now ± window: STATUS_DETAIL_NONE, _STALE or _FUTURE. */
Boxkite__V1__StatusDetail bk_envelope_check_time(int64_t ts_ms, int64_t now_ms, int64_t window_ms);

/* Where bk_envelope_layout() put an Envelope's parts in its buffer. */
typedef struct bk_layout {
	size_t len;               /* the whole message */
	size_t body_at, body_len; /* the packed body (0, 0 without one) */
	size_t mac_at;            /* the MAC's BK_MAC_LEN bytes; 0 when unkeyed (no mac field) */
	size_t data_at, data_len; /* where the caller writes the data */
} bk_layout;

/* Bytes of an Envelope of hdr, body (NULL: none) and data_len bytes of data, with a MAC field
 * when keyed. */
size_t bk_envelope_sealed_size(const bk_envelope *hdr, const ProtobufCMessage *body, size_t data_len, bool keyed);

/* Serialize hdr (whose body, mac and data must be empty), body packed in place, room for the
 * MAC when keyed, and the data field's tag and length, into out (bk_envelope_sealed_size()
 * bytes): the same bytes protobuf-c would give for the whole Envelope, without packing the body
 * twice or copying the data. The caller then writes the data at out + l->data_at (reading a
 * file straight into the message) and signs. */
void bk_envelope_layout(const bk_envelope *hdr, const ProtobufCMessage *body, size_t data_len, bool keyed,
			uint8_t *out, bk_layout *l);

/* Write the MAC of the laid-out Envelope under key, data being in place with digest `data`
 * (NULL: no data). 0, or -errno when the MAC could not be computed (send nothing then). */
int bk_envelope_sign(const bk_envelope *hdr, const bk_key *key, const bk_digest *data, uint8_t *out,
		     const bk_layout *l);

/* Both, for an Envelope without data: out holds bk_envelope_sealed_size(hdr, body, 0, key)
 * bytes. Returns the length written, or 0 when the MAC could not be computed. */
size_t bk_envelope_seal(const bk_envelope *hdr, const ProtobufCMessage *body, const bk_key *key, uint8_t *out);

/* A protobuf-c allocator drawing from one arena with a byte cap: the whole decoded message is
 * freed at once, and a hostile message cannot make the decoder allocate more than the cap. */
typedef struct bk_arena bk_arena;
bk_arena *bk_arena_new(size_t cap);
void bk_arena_free(bk_arena *arena);
ProtobufCAllocator *bk_arena_allocator(bk_arena *arena);
size_t bk_arena_used(const bk_arena *arena);
/* True once an allocation was refused for the cap: a decode failed for size, not for form. */
bool bk_arena_exhausted(const bk_arena *arena);
BK_DEFINE_PTR_CLEANUP(bk_arena_freep, bk_arena, bk_arena_free)

#endif
