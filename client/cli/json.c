#include "json.h"

#include "utf8.h"

static void put_escaped(FILE *out, const uint8_t *s, size_t len);

/* The comma before a member, then its key if it has one. */
static void member(bk_json *j, const char *key)
{
	if (j->depth > 0) {
		if (j->need_comma[j->depth])
			fputc(',', j->out);
		j->need_comma[j->depth] = true;
	}
	if (key) {
		fputc('"', j->out);
		for (const char *p = key; *p; p++)
			put_escaped(j->out, (const uint8_t *)p, 1);
		fputs("\":", j->out);
	}
}

static void open_scope(bk_json *j, const char *key, char c)
{
	member(j, key);
	fputc(c, j->out);
	if (j->depth < (int)(sizeof(j->need_comma) / sizeof(j->need_comma[0])) - 1)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void close_scope(bk_json *j, char c)
{
	fputc(c, j->out);
	if (j->depth > 0)
		j->depth--;
	if (j->depth == 0)
		fputc('\n', j->out);
}

void bk_json_begin_object(bk_json *j, const char *key)
{
	open_scope(j, key, '{');
}

void bk_json_end_object(bk_json *j)
{
	close_scope(j, '}');
}

void bk_json_begin_array(bk_json *j, const char *key)
{
	open_scope(j, key, '[');
}

void bk_json_end_array(bk_json *j)
{
	close_scope(j, ']');
}

static void put_escaped(FILE *out, const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint8_t c = s[i];
		size_t n;

		switch (c) {
		case '"': fputs("\\\"", out); i++; continue;
		case '\\': fputs("\\\\", out); i++; continue;
		case '\n': fputs("\\n", out); i++; continue;
		case '\r': fputs("\\r", out); i++; continue;
		case '\t': fputs("\\t", out); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(out, "\\u%04x", c);
			i++;
			continue;
		}
		n = bk_utf8_seq(s + i, len - i);
		if (n == 0) {
			/* Not UTF-8 (so 0x80..0xff): a lone surrogate U+DC80..U+DCFF, as Python's
			 * surrogateescape (PEP 383). No UTF-8 text decodes to one, so a name with this
			 * byte never reads as a name with the character U+00XX, and the bytes come back
			 * exactly: os.fsencode(json.loads(...)). */
			fprintf(out, "\\u%04x", 0xdc00 | c);
			i++;
			continue;
		}
		fwrite(s + i, 1, n, out);
		i += n;
	}
}

void bk_json_bytes(bk_json *j, const char *key, const uint8_t *data, size_t len)
{
	member(j, key);
	fputc('"', j->out);
	put_escaped(j->out, data, len);
	fputc('"', j->out);
}

void bk_json_string(bk_json *j, const char *key, const char *value)
{
	const char *v = value ? value : "";
	size_t n = 0;

	while (v[n])
		n++;
	bk_json_bytes(j, key, (const uint8_t *)v, n);
}

void bk_json_int(bk_json *j, const char *key, long long value)
{
	member(j, key);
	fprintf(j->out, "%lld", value);
}

void bk_json_uint(bk_json *j, const char *key, unsigned long long value)
{
	member(j, key);
	fprintf(j->out, "%llu", value);
}

void bk_json_bool(bk_json *j, const char *key, bool value)
{
	member(j, key);
	fputs(value ? "true" : "false", j->out);
}
