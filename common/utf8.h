/* UTF-8: protobuf strings must be valid UTF-8 for most languages' decoders, while file names
 * and errno messages about them are arbitrary bytes. */
#ifndef BK_UTF8_H
#define BK_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 if there is none there. */
size_t bk_utf8_seq(const unsigned char *s, size_t len);

bool bk_utf8_valid(const char *s);

/* Copy s to out (size > 0) with every byte that is not part of valid UTF-8 written as \xNN;
 * truncated to fit. Returns out. */
char *bk_utf8_escape(const char *s, char *out, size_t size);

/* The first string field of m, nested messages included, whose value is not UTF-8 (protobuf's
 * strings must be, and a strict decoder refuses a whole message that repeats one), with the
 * message type it is a field of in *in; NULL when every string is UTF-8. Driven by the
 * descriptors, so that no field can be forgotten. */
const ProtobufCFieldDescriptor *bk_utf8_message_check(const ProtobufCMessage *m,
						      const ProtobufCMessageDescriptor **in);

#endif
