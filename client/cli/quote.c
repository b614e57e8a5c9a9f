/* Text the sandbox made, on its way to an operator's terminal (STYLE.md §17). A file name is
 * bytes chosen by sandboxed code: printed raw, an escape sequence in it drives the terminal and a
 * newline in it forges a line of output. On a terminal names are quoted as GNU ls quotes them by
 * default (--quoting-style=shell-escape: the result pasted into a shell names the file); error
 * messages, which quote names too, get their unprintable bytes escaped. */
#include "bkctl.h"

#include <string.h>

#include "utf8.h"

/* The code point of the valid UTF-8 sequence s[0..n), n from bk_utf8_seq. */
static uint32_t utf8_code_point(const unsigned char *s, size_t n)
{
	static const unsigned char lead_mask[] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
	uint32_t cp = s[0] & lead_mask[n];

	for (size_t i = 1; i < n; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

/* Bytes at s that a terminal shows as themselves: the length of one printable character (a
 * valid UTF-8 sequence that is not a C0 or C1 control, DEL, or a line or paragraph separator,
 * which glibc's iswprint also refuses), or 0. */
static size_t printable_at(const char *s, size_t len)
{
	size_t n = bk_utf8_seq((const unsigned char *)s, len);
	uint32_t cp;

	if (n == 0)
		return 0;
	cp = utf8_code_point((const unsigned char *)s, n);
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
		return 0;
	return n;
}

/* One unprintable byte as a C escape: \n and its kin by name, the rest in octal (as ls). */
static void put_byte_escape(FILE *out, unsigned char c)
{
	static const char named[] = { ['\a'] = 'a', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n',
				      ['\v'] = 'v', ['\f'] = 'f', ['\r'] = 'r' };

	if (c < sizeof(named) && named[c])
		fprintf(out, "\\%c", named[c]);
	else
		fprintf(out, "\\%03o", c);
}

/* Characters a shell would act on, anywhere in a word; '#' and '~' only at its start. */
static bool shell_special(char c, bool first)
{
	return strchr(" \t!\"$&'()*;<=>?[\\^`|", c) || (first && (c == '#' || c == '~'));
}

void bkctl_quote_name(FILE *out, const char *name)
{
	size_t len = strlen(name);
	bool quote = len == 0, unprintable = false, squote = false, dq_special = false;

	for (size_t i = 0; i < len;) {
		size_t n = printable_at(name + i, len - i);
		if (n == 0) {
			quote = unprintable = true;
			i++;
			continue;
		}
		if (n == 1 && shell_special(name[i], i == 0)) {
			quote = true;
			squote |= name[i] == '\'';
			dq_special |= strchr("\"$\\`!", name[i]) != NULL;
		}
		i += n;
	}
	if (!quote) {
		fputs(name, out);
		return;
	}
	/* A quote, and nothing that acts inside double quotes: "it's" reads best. */
	if (squote && !unprintable && !dq_special) {
		fprintf(out, "\"%s\"", name);
		return;
	}
	/* Single quotes, each ' as '\'', runs of unprintable bytes as $'\ooo...' between quoted
	 * runs of the rest. */
	enum { IN_QUOTES, IN_ESCAPES } at = IN_QUOTES;
	fputc('\'', out);
	for (size_t i = 0; i < len;) {
		size_t n = printable_at(name + i, len - i);
		if (n == 0) {
			if (at == IN_QUOTES)
				fputs("'$'", out);
			put_byte_escape(out, (unsigned char)name[i]);
			at = IN_ESCAPES;
			i++;
			continue;
		}
		if (at == IN_ESCAPES)
			fputs("''", out); /* end the $'...', open quotes again */
		at = IN_QUOTES;
		if (name[i] == '\'')
			fputs("'\\''", out);
		else
			fwrite(name + i, 1, n, out);
		i += n;
	}
	fputc('\'', out);
}

void bkctl_put_name(FILE *out, const char *name, bool tty)
{
	if (tty)
		bkctl_quote_name(out, name);
	else
		fputs(name, out);
}

void bkctl_put_text(FILE *out, const char *text)
{
	size_t len = strlen(text);

	for (size_t i = 0; i < len;) {
		size_t n = printable_at(text + i, len - i);
		if (n == 0) {
			put_byte_escape(out, (unsigned char)text[i]);
			i++;
		} else {
			fwrite(text + i, 1, n, out);
			i += n;
		}
	}
}
