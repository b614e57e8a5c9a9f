/* Shared HMAC keys: a key file holds one or more keys by id, so a key can be rotated without
 * downtime (add the new key, move clients over, remove the old one).
 *
 * File format (docs/PROTOCOL.md, "Key file"): UTF-8 text, one key per line,
 *
 *     <key-id> <secret as 64..128 lowercase or uppercase hex digits>
 *
 * blank lines and lines starting with '#' ignored. key-id is 1..64 of [A-Za-z0-9._-]. The file
 * must not be readable or writable by group or others. */
#ifndef BK_KEYS_H
#define BK_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define BK_KEY_ID_MAX 64
#define BK_KEY_MIN 32
#define BK_KEY_MAX 64

typedef struct bk_key {
	char id[BK_KEY_ID_MAX + 1];
	size_t len;
	uint8_t secret[BK_KEY_MAX];
	struct evp_mac_ctx_st *mac; /* HMAC-SHA256 keyed with secret; dup'd per use */
} bk_key;

typedef struct bk_keyring {
	size_t n;
	bk_key keys[];
} bk_keyring;

/* Set up a key from raw secret bytes (BK_KEY_MIN..BK_KEY_MAX long) and a valid id. */
int bk_key_init(bk_key *key, const char *id, const uint8_t *secret, size_t len, bk_error **err);
void bk_key_clear(bk_key *key);

/* Parse key-file text. `origin` names the source in error messages ("keys.txt line 3: ..."). */
int bk_keyring_parse(const char *text, size_t len, const char *origin, bk_keyring **out, bk_error **err);

/* Open a key file for bk_keyring_load_fd: a descriptor, or -errno. O_NONBLOCK, so that a FIFO
 * put in its place cannot hang the caller (it is refused on loading). */
int bk_keyring_open(const char *path);
/* Read and parse the key file open on fd (`path` names it in messages), refusing one that
 * group or others may read or write. */
int bk_keyring_load_fd(int fd, const char *path, bk_keyring **out, bk_error **err);
/* Both. */
int bk_keyring_load(const char *path, bk_keyring **out, bk_error **err);

const bk_key *bk_keyring_find(const bk_keyring *ring, const char *id);

void bk_keyring_free(bk_keyring *ring);
BK_DEFINE_PTR_CLEANUP(bk_keyring_freep, bk_keyring, bk_keyring_free)

/* Room for the text bk_key_text() makes: a comment line and "<id> <up to 128 hex digits>\n". */
#define BK_KEY_TEXT_MAX 320

/* Key-file text holding the key id with secret (BK_KEY_MIN..BK_KEY_MAX bytes), into text (size
 * >= BK_KEY_TEXT_MAX): a comment line and "<id> <hex>\n". Its length, or a negative errno with
 * *err set. Cleanse it after use. */
int bk_key_text(const char *id, const uint8_t *secret, size_t len, char *text, size_t size, bk_error **err);

/* Key-file text holding one fresh 256-bit key named id, into text (size >= BK_KEY_TEXT_MAX).
 * Returns its length, or a negative errno with *err set. Cleanse it after use. */
int bk_key_text_new(const char *id, char *text, size_t size, bk_error **err);

/* Write a new key file at path holding one fresh 256-bit key named id: created with mode 0600,
 * never over an existing file, fsync'd before it is reported written. */
int bk_keyfile_create(const char *path, const char *id, bk_error **err);

bool bk_key_id_valid(const char *id);

/* A key's store prefix (docs/PROTOCOL.md, "Sync: whose snapshots"): the path component its
 * snapshots live under in every store, "t-" and the lowercase hex of the first 16 bytes of
 * HMAC-SHA256(secret, "boxkite-store-prefix-v1" NUL key_id). Only a holder of the secret can name
 * it; the same key has the same prefix in every pod and after every restart. 0, or -EIO. */
#define BK_STORE_PREFIX_LEN 34
int bk_key_store_prefix(const bk_key *key, char out[BK_STORE_PREFIX_LEN + 1]);

#endif
