#include "transport/httpreq.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Where a chunked body is (bk_httpreq.chunk_state). */
enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

/* The largest chunk and Content-Length taken: 2^56, far past anything a preview carries, and
 * far from any overflow. */
#define BODY_MAX (UINT64_C(1) << 56)

/* METHOD SP /preview/PORT/TOKEN[/REST or ?REST] SP HTTP/1.x: the port, the token, and in *rest
 * what follows the token. */
static bool parse_line(const char *line, size_t len, bk_httpreq *rq, const char **method, size_t *method_len,
		       const char **rest, size_t *rest_len, const char **version, size_t *version_len)
{
	const char *sp1 = memchr(line, ' ', len), *sp2, *at, *tok, *tok_end;
	const char *end = line + len;
	unsigned long port = 0;

	if (!sp1 || sp1 == line)
		return false;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (!sp2 || end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
		return false;
	/* A method and a target of visible characters only (what two spaces do not separate is one). */
	for (const char *c = line; c < sp2; c++)
		if (c != sp1 && ((unsigned char)*c <= ' ' || *c == 0x7f))
			return false;
	*method = line;
	*method_len = (size_t)(sp1 - line);
	*version = sp2 + 1;
	*version_len = 8;
	at = sp1 + 1;
	if (sp2 - at < 10 || memcmp(at, "/preview/", 9) != 0)
		return false;
	at += 9;
	if (*at < '1' || *at > '9')
		return false;
	for (; at < sp2 && *at >= '0' && *at <= '9' && port <= 65535; at++)
		port = port * 10 + (unsigned long)(*at - '0');
	if (port > 65535 || at >= sp2 || *at != '/')
		return false;
	rq->port = (unsigned)port;
	tok = at + 1;
	/* A token is base64url (common/preview.h): anything else is no token. */
	for (tok_end = tok; tok_end < sp2 && *tok_end != '/' && *tok_end != '?'; tok_end++)
		if (!((*tok_end >= 'A' && *tok_end <= 'Z') || (*tok_end >= 'a' && *tok_end <= 'z') ||
		      (*tok_end >= '0' && *tok_end <= '9') || *tok_end == '-' || *tok_end == '_'))
			return false;
	if (tok_end == tok || (size_t)(tok_end - tok) >= sizeof(rq->token))
		return false;
	memcpy(rq->token, tok, (size_t)(tok_end - tok));
	rq->token[tok_end - tok] = '\0';
	*rest = tok_end;
	*rest_len = (size_t)(sp2 - tok_end);
	return true;
}

static bool name_is(const char *name, size_t len, const char *what)
{
	return len == strlen(what) && strncasecmp(name, what, len) == 0;
}

/* Whether the comma-separated list value (len bytes) holds token, in any case. */
static bool list_has(const char *value, size_t len, const char *token)
{
	size_t tlen = strlen(token);

	for (size_t i = 0; i < len;) {
		while (i < len && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
			i++;
		size_t start = i;
		while (i < len && value[i] != ',')
			i++;
		size_t end = i;
		while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t'))
			end--;
		if (end - start == tlen && strncasecmp(value + start, token, tlen) == 0)
			return true;
	}
	return false;
}

/* A Content-Length: one decimal number, nothing else. */
static bool parse_length(const char *value, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (value[i] < '0' || value[i] > '9' || v > BODY_MAX / 10)
			return false;
		v = v * 10 + (uint64_t)(value[i] - '0');
	}
	*out = v;
	return v <= BODY_MAX;
}

static bool put(char *out, size_t size, size_t *at, const char *s, size_t len)
{
	if (len > size - *at)
		return false;
	memcpy(out + *at, s, len);
	*at += len;
	return true;
}

int bk_httpreq_parse(const char *head, size_t head_len, bk_httpreq *rq, char *out, size_t out_size,
		     size_t *out_len)
{
	const char *method, *rest, *version, *line_end, *end = head + head_len;
	size_t method_len, rest_len, version_len, at = 0;
	bool conn_upgrade = false, has_upgrade = false, has_length = false, has_coding = false;
	const char *upgrade_line = NULL;
	size_t upgrade_len = 0;

	memset(rq, 0, sizeof(*rq));
	if (head_len < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0 || memchr(head, '\0', head_len))
		return 400;
	line_end = memmem(head, head_len, "\r\n", 2);
	if (!parse_line(head, (size_t)(line_end - head), rq, &method, &method_len, &rest, &rest_len, &version,
			&version_len))
		return 400;
	if (!put(out, out_size, &at, method, method_len) || !put(out, out_size, &at, " ", 1) ||
	    (!(rest_len && rest[0] == '/') && !put(out, out_size, &at, "/", 1)) ||
	    !put(out, out_size, &at, rest, rest_len) || !put(out, out_size, &at, " ", 1) ||
	    !put(out, out_size, &at, version, version_len) || !put(out, out_size, &at, "\r\n", 2))
		return 400;
	/* The headers, up to the blank line: each on a line of its own, ended by CRLF, with no CR or
	 * LF elsewhere (what one reader splits where another does not is how requests are smuggled). */
	for (const char *line = line_end + 2; line < end - 2;) {
		const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
		const char *colon = memchr(line, ':', (size_t)(eol - line));
		size_t len = (size_t)(eol - line), name_len;
		const char *value;
		size_t value_len;

		if (memchr(line, '\r', len) || memchr(line, '\n', len) || line[0] == ' ' || line[0] == '\t' || !colon ||
		    colon == line || colon[-1] == ' ' || colon[-1] == '\t')
			return 400;
		name_len = (size_t)(colon - line);
		value = colon + 1;
		value_len = (size_t)(eol - value);
		while (value_len && (*value == ' ' || *value == '\t'))
			value++, value_len--;
		while (value_len && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
			value_len--;
		if (name_is(line, name_len, "Connection")) {
			conn_upgrade = conn_upgrade || list_has(value, value_len, "upgrade");
		} else if (name_is(line, name_len, "Keep-Alive") || name_is(line, name_len, "Proxy-Connection")) {
			/* hop by hop: this hop ends with the request */
		} else if (name_is(line, name_len, "Upgrade")) {
			if (has_upgrade)
				return 400;
			has_upgrade = true;
			upgrade_line = line;
			upgrade_len = len;
		} else {
			if (name_is(line, name_len, "Content-Length")) {
				if (has_length || !parse_length(value, value_len, &rq->left))
					return 400;
				has_length = true;
			} else if (name_is(line, name_len, "Transfer-Encoding")) {
				if (has_coding)
					return 400;
				if (value_len != 7 || strncasecmp(value, "chunked", 7) != 0)
					return 501;
				has_coding = true;
			}
			if (!put(out, out_size, &at, line, len + 2))
				return 400;
		}
		line = eol + 2;
	}
	if (has_length && has_coding)
		return 400;
	rq->body = has_coding ? BK_HTTPREQ_CHUNKED : has_length && rq->left ? BK_HTTPREQ_LENGTH : BK_HTTPREQ_NONE;
	rq->upgrade = has_upgrade && conn_upgrade;
	if (rq->upgrade) {
		if (!put(out, out_size, &at, upgrade_line, upgrade_len + 2) ||
		    !put(out, out_size, &at, "Connection: Upgrade\r\n\r\n", 23))
			return 400;
	} else if (!put(out, out_size, &at, "Connection: close\r\n\r\n", 21)) {
		return 400;
	}
	*out_len = at;
	return 0;
}

/* A chunk-size line: hex digits, then optionally spaces and ';' extensions. */
static int chunk_size(const bk_httpreq *rq, size_t len, uint64_t *size)
{
	size_t seen = len < sizeof(rq->line) ? len : sizeof(rq->line);
	uint64_t v = 0;
	size_t i = 0;

	for (; i < seen; i++) {
		char c = rq->line[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			break;
		v = v * 16 + (uint64_t)d;
		if (v > BODY_MAX)
			return -1;
	}
	/* No digit, or digits running past what was kept of the line, or something else than an
	 * extension after them. */
	if (i == 0 || (i == seen && len > seen) || (i < len && i < seen && rq->line[i] != ';' && rq->line[i] != ' ' &&
						    rq->line[i] != '\t'))
		return -1;
	*size = v;
	return 0;
}

ssize_t bk_httpreq_body(bk_httpreq *rq, const char *buf, size_t len, bool *done)
{
	size_t i = 0;

	*done = false;
	switch (rq->body) {
	case BK_HTTPREQ_NONE:
		*done = true;
		return 0;
	case BK_HTTPREQ_LENGTH: {
		size_t n = len < rq->left ? len : (size_t)rq->left;
		rq->left -= n;
		*done = rq->left == 0;
		return (ssize_t)n;
	}
	case BK_HTTPREQ_CHUNKED:
		break;
	}
	while (i < len) {
		if (rq->chunk_state == CH_DATA) {
			size_t n = len - i < rq->left ? len - i : (size_t)rq->left;
			i += n;
			rq->left -= n;
			if (!rq->left)
				rq->chunk_state = CH_DATA_END;
			continue;
		}
		char c = buf[i++];
		if (c != '\n') {
			/* A CR ends a line, or is refused: a bare one is read differently by different readers. */
			if (rq->last == '\r')
				return -1;
			if (rq->line_len < sizeof(rq->line))
				rq->line[rq->line_len] = c;
			rq->last = c;
			if (++rq->line_len > BK_HTTPREQ_LINE_MAX)
				return -1;
			continue;
		}
		/* A line ended, in CRLF or the body is malformed; n: its length without the CR. */
		if (rq->last != '\r')
			return -1;
		size_t n = rq->line_len - 1;
		rq->line_len = 0;
		rq->last = 0;
		switch (rq->chunk_state) {
		case CH_SIZE: {
			uint64_t size;
			if (chunk_size(rq, n, &size) < 0)
				return -1;
			rq->left = size;
			rq->chunk_state = size ? CH_DATA : CH_TRAILER;
			break;
		}
		case CH_DATA_END:
			if (n != 0)
				return -1;
			rq->chunk_state = CH_SIZE;
			break;
		case CH_TRAILER:
			if (n == 0) {
				*done = true;
				return (ssize_t)i;
			}
			break;
		}
	}
	return (ssize_t)i;
}

int bk_httpreq_switched(const char *buf, size_t len)
{
	if (len < 13)
		return -1;
	return (memcmp(buf, "HTTP/1.1 101 ", 13) == 0 || memcmp(buf, "HTTP/1.0 101 ", 13) == 0) ? 1 : 0;
}
