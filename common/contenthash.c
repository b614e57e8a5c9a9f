#include "contenthash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

int bk_content_hash(const bk_hash *blocks, uint64_t n, bk_hash out)
{
	if (n > SIZE_MAX / BK_HASH_LEN)
		return -EINVAL;
	return EVP_Digest(n ? (const uint8_t *)blocks : (const uint8_t *)"", (size_t)n * BK_HASH_LEN, out, NULL,
			  EVP_sha256(), NULL)
		       ? 0
		       : -EIO;
}

void bk_block_name(const bk_hash hash, char out[2 * BK_HASH_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < BK_HASH_LEN; i++) {
		out[2 * i] = hex[hash[i] >> 4];
		out[2 * i + 1] = hex[hash[i] & 15];
	}
	out[2 * BK_HASH_LEN] = '\0';
}

int bk_blockhash_init(bk_blockhash *b, uint64_t size)
{
	uint64_t n = bk_blocks_of(size);

	*b = (bk_blockhash){ .size = size };
	if (n > SIZE_MAX / BK_HASH_LEN)
		return -ENOMEM;
	b->blocks = calloc(n ? (size_t)n : 1, BK_HASH_LEN);
	return b->blocks ? 0 : -ENOMEM;
}

void bk_blockhash_fini(bk_blockhash *b)
{
	free(b->blocks);
	EVP_MD_CTX_free(b->partial);
	*b = (bk_blockhash){ 0 };
}

bool bk_blockhash_whole(const bk_blockhash *b, size_t len)
{
	uint64_t left = b->size - b->done;

	return b->done % BK_BLOCK_SIZE == 0 && len > 0 && len == (left < BK_BLOCK_SIZE ? left : BK_BLOCK_SIZE);
}

int bk_blockhash_add(bk_blockhash *b, const uint8_t *p, size_t len, const uint8_t *sha256)
{
	if (len > b->size - b->done)
		return -EINVAL;
	if (sha256) {
		if (!bk_blockhash_whole(b, len))
			return -EINVAL;
		memcpy(b->blocks[b->done / BK_BLOCK_SIZE], sha256, BK_HASH_LEN);
		b->done += len;
		return 0;
	}
	while (len) {
		uint64_t k = b->done / BK_BLOCK_SIZE, end = (k + 1) * BK_BLOCK_SIZE;
		size_t n;

		if (end > b->size)
			end = b->size;
		n = end - b->done < len ? (size_t)(end - b->done) : len;
		if (!b->partial && !(b->partial = EVP_MD_CTX_new()))
			return -EIO;
		if (b->done % BK_BLOCK_SIZE == 0 && !EVP_DigestInit_ex(b->partial, EVP_sha256(), NULL))
			return -EIO;
		if (!EVP_DigestUpdate(b->partial, p, n))
			return -EIO;
		b->done += n;
		p += n;
		len -= n;
		if (b->done == end && !EVP_DigestFinal_ex(b->partial, b->blocks[k], NULL))
			return -EIO;
	}
	return 0;
}

int bk_blockhash_final(const bk_blockhash *b, bk_hash out)
{
	if (b->done != b->size)
		return -EINVAL;
	return bk_content_hash(b->blocks, bk_blocks_of(b->size), out);
}
