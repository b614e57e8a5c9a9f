#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t bk_utf8_seq(const unsigned char *s, size_t len)
{
	size_t n;
	uint32_t cp;

	if (len == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

bool bk_utf8_valid(const char *s)
{
	size_t len = strlen(s);

	for (size_t i = 0; i < len;) {
		size_t n = bk_utf8_seq((const unsigned char *)s + i, len - i);
		if (!n)
			return false;
		i += n;
	}
	return true;
}

char *bk_utf8_escape(const char *s, char *out, size_t size)
{
	size_t len = strlen(s), o = 0;

	for (size_t i = 0; i < len && o + 1 < size;) {
		size_t n = bk_utf8_seq((const unsigned char *)s + i, len - i);
		if (n) {
			if (o + n >= size)
				break;
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		} else {
			if (o + 4 >= size)
				break;
			snprintf(out + o, 5, "\\x%02x", (unsigned char)s[i]);
			o += 4;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

/* Whether field f of m is set: a oneof member only when its case says so; a repeated field's
 * count, else 1. */
static size_t field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;

	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return *(const size_t *)(base + f->quantifier_offset);
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
		return 0;
	return 1;
}

const ProtobufCFieldDescriptor *bk_utf8_message_check(const ProtobufCMessage *m,
						      const ProtobufCMessageDescriptor **in)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i], *bad;
		const char *at = (const char *)m + f->offset;
		size_t n = field_count(m, f);
		bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;

		if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		for (size_t k = 0; k < n; k++) {
			const void *v = repeated ? (*(void *const *)at ? (*(void *const *const *)at)[k] : NULL)
						 : *(void *const *)at;
			if (!v)
				continue;
			if (f->type == PROTOBUF_C_TYPE_STRING && !bk_utf8_valid(v)) {
				*in = d;
				return f;
			}
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && (bad = bk_utf8_message_check(v, in)))
				return bad;
		}
	}
	return NULL;
}
