/* The authenticated envelope (docs/PROTOCOL.md): sealing with HMAC-SHA256 over an unambiguous
 * encoding of every field but the MAC, opening with a constant-time check, the time window.
 * No I/O and no clock of its own: callers pass `now`, so tests inject time. */
#ifndef BK_ENVELOPE_H
#define BK_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "error.h"
#include "keys.h"

#define BK_ENVELOPE_VERSION 1
#define BK_NONCE_LEN 16
#define BK_MAC_LEN 32

typedef Boxkite__V1__Envelope bk_envelope;

/* The domain string that starts every MAC input (20 bytes, NUL included). */
#define BK_MAC_DOMAIN "boxkite.v1.Envelope"

/* HMAC-SHA256 of the MAC input of env (every field but env->mac), with `body` standing in for
 * env->body (so a sealer can MAC a body it packed elsewhere). */
int bk_envelope_mac(const bk_key *key, const bk_envelope *env, const uint8_t *body, size_t body_len,
		    uint8_t mac[BK_MAC_LEN]);

/* True when env->mac is the MAC of env under key; compared in constant time. */
bool bk_envelope_mac_ok(const bk_key *key, const bk_envelope *env);

/* Where ts lies against now ± window: STATUS_DETAIL_NONE, _STALE or _FUTURE. */
Boxkite__V1__StatusDetail bk_envelope_check_time(int64_t ts_ms, int64_t now_ms, int64_t window_ms);

/* Bytes bk_envelope_seal() writes for hdr and body (body may be NULL: no body field). */
size_t bk_envelope_sealed_size(const bk_envelope *hdr, const ProtobufCMessage *body);

/* Serialize hdr (whose body and mac must be empty) followed by body packed in place and, when
 * key is not NULL, the MAC: the same bytes protobuf-c would give for the whole Envelope, without
 * packing the body twice. out must hold bk_envelope_sealed_size() bytes. Returns the length
 * written, or 0 when a key was given and the MAC could not be computed (send nothing then). */
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
