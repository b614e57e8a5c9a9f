/* UTF-8: protobuf strings must be valid UTF-8 for most languages' decoders, while file names
 * and errno messages about them are arbitrary bytes. */
#ifndef BK_UTF8_H
#define BK_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 if there is none there. */
size_t bk_utf8_seq(const unsigned char *s, size_t len);

bool bk_utf8_valid(const char *s);

/* Copy s to out (size > 0) with every byte that is not part of valid UTF-8 written as \xNN;
 * truncated to fit. Returns out. */
char *bk_utf8_escape(const char *s, char *out, size_t size);

#endif
