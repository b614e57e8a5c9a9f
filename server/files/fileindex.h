/* What the front knows of files' contents: per version of a file (its device, inode, size,
 * mtime and ctime, as fstat gives them), the hashes of its blocks and its content hash
 * (common/contenthash.h). Filled by what the front hashes anyway — an upload's chunks as they
 * are written, a download's blocks as they are read — so that a file moved through boxkited is
 * never hashed again to be named: the download's answer carries its content hash, and the sync
 * (issue 13) names its blobs by these block hashes without reading an unchanged file.
 *
 * Every hash in it was computed by the front over bytes it wrote or read itself: the sandbox can
 * change a file, never what the index says a content is. A version is recognized by its ctime,
 * which no process can set (a write, truncate, chmod, rename or link change moves it); see
 * docs/ARCHITECTURE.md for the one race on filesystems with coarse timestamps. Bounded in
 * bytes; the least recently used entries go first. In memory: a restarted front starts empty. */
#ifndef BK_FILEINDEX_H
#define BK_FILEINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "contenthash.h"

typedef struct bk_filever {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
} bk_filever;

void bk_filever_of(const struct stat *st, bk_filever *out);
bool bk_filever_same(const bk_filever *a, const bk_filever *b);

typedef struct bk_fileindex bk_fileindex;

/* An index holding at most max_bytes of entries. NULL when out of memory. */
bk_fileindex *bk_fileindex_new(size_t max_bytes);
void bk_fileindex_free(bk_fileindex *ix);
/* Forget everything (a Reset: the next tenant's files are not the last one's). */
void bk_fileindex_clear(bk_fileindex *ix);

/* Record this version's whole content: bk_blocks_of(v->size) block hashes. */
void bk_fileindex_put(bk_fileindex *ix, const bk_filever *v, const bk_hash *blocks);

/* Record block k of this version, as read: once every block of it is in, the version is known.
 * A note for another version of the same inode replaces what was known of it. */
void bk_fileindex_note(bk_fileindex *ix, const bk_filever *v, uint64_t k, const bk_hash hash);

/* This version's content hash into out, and (when blocks is not NULL, with room for
 * bk_blocks_of(v->size)) its block hashes. 0, or -ENOENT when it is not known. */
int bk_fileindex_get(bk_fileindex *ix, const bk_filever *v, bk_hash out, bk_hash *blocks);

#endif
