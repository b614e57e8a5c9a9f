/* Text the sandbox made, on its way to an operator's terminal (STYLE.md §17). A file name is
 * bytes chosen by sandboxed code: printed raw, an escape sequence in it drives the terminal and a
 * newline in it forges a line of output. On a terminal names are quoted as GNU ls quotes them by
 * default (--quoting-style=shell-escape: the result pasted into a shell names the file); error
 * messages, which quote names too, get their unprintable bytes escaped. */
#include "bkctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fullio.h"

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

/* One byte of a command's output as an escape: \xNN, as messages write theirs. */
static size_t term_escape(uint8_t *out, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	out[0] = '\\';
	out[1] = 'x';
	out[2] = (uint8_t)hex[c >> 4];
	out[3] = (uint8_t)hex[c & 15];
	return 4;
}

/* Whether a byte that is not printable may still reach a terminal as it is: line breaks, tabs,
 * carriage returns and backspaces lay text out (progress bars, columns) and drive nothing. */
static bool term_layout(unsigned char c)
{
	return c == '\n' || c == '\t' || c == '\r' || c == '\b';
}

/* Whether at[0..avail) is the start of a UTF-8 character whose rest has not come yet. */
static bool term_incomplete(const uint8_t *at, size_t avail)
{
	size_t want = at[0] >= 0xf0 && at[0] <= 0xf4 ? 4 : at[0] >= 0xe0 && at[0] <= 0xef ? 3 : at[0] >= 0xc2 && at[0] <= 0xdf ? 2 : 0;

	if (avail >= want)
		return false;
	for (size_t i = 1; i < avail; i++)
		if ((at[i] & 0xc0) != 0x80)
			return false;
	return true;
}

void bkctl_term_init(bkctl_term *t, int fd, bool raw)
{
	*t = (bkctl_term){ .fd = fd, .escape = !raw && isatty(fd) };
}

int bkctl_term_write(bkctl_term *t, const uint8_t *data, size_t len)
{
	if (!t->escape)
		return bk_write_full(t->fd, data, len);

	_cleanup_free_ uint8_t *in = malloc(t->nheld + len + 1), *out = malloc(4 * (t->nheld + len) + 1);
	size_t total = t->nheld + len, o = 0, i = 0;

	if (!in || !out)
		return -ENOMEM;
	memcpy(in, t->held, t->nheld);
	/* An empty stream's bytes may be NULL (an Exec's stdout or stderr that nothing was written to). */
	if (len)
		memcpy(in + t->nheld, data, len);
	t->nheld = 0;
	while (i < total) {
		size_t n = printable_at((const char *)in + i, total - i);
		if (n) {
			memcpy(out + o, in + i, n);
			o += n;
			i += n;
		} else if (term_incomplete(in + i, total - i)) {
			t->nheld = total - i;
			memcpy(t->held, in + i, t->nheld);
			break;
		} else if (term_layout(in[i])) {
			out[o++] = in[i++];
		} else {
			o += term_escape(out + o, in[i++]);
		}
	}
	return bk_write_full(t->fd, out, o);
}

int bkctl_term_flush(bkctl_term *t)
{
	uint8_t out[16];
	size_t o = 0;

	for (size_t i = 0; i < t->nheld; i++)
		o += term_escape(out + o, t->held[i]);
	t->nheld = 0;
	return o ? bk_write_full(t->fd, out, o) : 0;
}
