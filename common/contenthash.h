/* A file's content hash (docs/PROTOCOL.md, "Content hash"): the SHA-256 over the SHA-256 of each
 * BK_BLOCK_SIZE block of the content, in order — as Dropbox's content hash, so that the hashes
 * each side computes of the chunks it moves add up to the file's identity without a second pass
 * over the file, and each block hash names the block as a content-addressed blob. */
#ifndef BK_CONTENTHASH_H
#define BK_CONTENTHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BK_BLOCK_SIZE (4u << 20)
#define BK_HASH_LEN 32

typedef uint8_t bk_hash[BK_HASH_LEN];

/* Blocks of a file of size bytes: the last may be short; an empty file has none. */
static inline uint64_t bk_blocks_of(uint64_t size)
{
	return size / BK_BLOCK_SIZE + (size % BK_BLOCK_SIZE != 0);
}

/* The content hash of n block hashes. 0, or -EIO when libcrypto fails. */
int bk_content_hash(const bk_hash *blocks, uint64_t n, bk_hash out);

/* A block's name as a blob: its hash in lowercase hex. */
void bk_block_name(const bk_hash hash, char out[2 * BK_HASH_LEN + 1]);

/* The block hashes of a content that arrives in order, in pieces of any size. A piece that is
 * exactly one whole block comes with its SHA-256 already computed (the MAC's digest of a
 * chunk) and costs nothing more; other pieces are hashed here, a partial block at a time. */
typedef struct bk_blockhash {
	uint64_t size;            /* of the whole content */
	uint64_t done;            /* bytes added so far */
	bk_hash *blocks;          /* bk_blocks_of(size) of them; those below done / BLOCK_SIZE are final */
	struct evp_md_ctx_st *partial; /* the block in progress, when pieces do not fall on its bounds */
} bk_blockhash;

/* 0, or -ENOMEM. */
int bk_blockhash_init(bk_blockhash *b, uint64_t size);
void bk_blockhash_fini(bk_blockhash *b);

/* Whether a piece of len bytes at the next offset is one whole block, whose SHA-256 may then be
 * given to bk_blockhash_add() instead of hashing it again. */
bool bk_blockhash_whole(const bk_blockhash *b, size_t len);

/* Add the next len bytes (at offset b->done; never past size). sha256: their SHA-256 when
 * bk_blockhash_whole(b, len), else NULL. 0, or -EINVAL / -EIO. */
int bk_blockhash_add(bk_blockhash *b, const uint8_t *p, size_t len, const uint8_t *sha256);

/* The content hash, once all size bytes are in. 0, -EINVAL before, -EIO. */
int bk_blockhash_final(const bk_blockhash *b, bk_hash out);

#endif
