#include "broker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void entry_wipe(bk_broker_entry *e)
{
	if (e->lines) {
		explicit_bzero(e->lines, e->len);
		free(e->lines);
	}
	for (size_t i = 0; i < e->n_names; i++)
		free(e->names[i]);
	memset(e, 0, sizeof(*e));
}

int bk_broker_parse(const char *text, size_t len, bk_broker_entry *e, const char **why)
{
	size_t at = 0;

	e->lines = malloc(len + 2 * BK_BROKER_HEADERS_MAX + 1);
	e->len = 0;
	if (!e->lines) {
		*why = "out of memory";
		return -ENOMEM;
	}
	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl ? (size_t)(nl - line) : len - at, name_len, v;
		at += n + (nl ? 1 : 0);
		if (n && line[n - 1] == '\r')
			n--;
		if (n == 0 || line[0] == '#')
			continue;
		const char *colon = memchr(line, ':', n);
		if (!colon || colon == line)
			goto bad_line;
		name_len = (size_t)(colon - line);
		for (size_t i = 0; i < name_len; i++)
			if (!token_char((unsigned char)line[i]))
				goto bad_line;
		for (size_t i = name_len + 1; i < n; i++) {
			unsigned char c = (unsigned char)line[i];
			if (c != ' ' && c != '\t' && (c < 0x21 || c == 0x7f))
				goto bad_line;
		}
		v = name_len + 1;
		while (v < n && (line[v] == ' ' || line[v] == '\t'))
			v++;
		if (v == n)
			goto bad_line;
		if (e->n_names == BK_BROKER_HEADERS_MAX) {
			*why = "more than 16 header lines";
			entry_wipe(e);
			return -EINVAL;
		}
		e->names[e->n_names] = strndup(line, name_len);
		if (!e->names[e->n_names]) {
			*why = "out of memory";
			entry_wipe(e);
			return -ENOMEM;
		}
		e->n_names++;
		memcpy(e->lines + e->len, line, n);
		e->len += n;
		memcpy(e->lines + e->len, "\r\n", 2);
		e->len += 2;
	}
	if (e->n_names == 0) {
		*why = "no header line (\"Name: value\")";
		entry_wipe(e);
		return -EINVAL;
	}
	return 0;
bad_line:
	/* Which line, never what it says: it holds a secret. */
	*why = "a line that is not \"Name: value\" (a token, a colon, visible bytes)";
	entry_wipe(e);
	return -EINVAL;
}

int bk_broker_add(bk_broker *b, const char *destination, int fd, bk_error **err)
{
	char buf[BK_BROKER_FILE_MAX + 1];
	size_t len = 0;
	bk_broker_entry *e;
	const char *why = NULL;
	int ret;

	if (b->n == BK_BROKER_MAX)
		return bk_error_set(err, BK_INVALID_ARGUMENT, E2BIG, "more than %d credentialed destinations",
				    BK_BROKER_MAX);
	e = &b->entries[b->n];
	if ((ret = bk_egress_destination_parse(destination, &e->host, &e->port, err)) < 0)
		return bk_error_prefix(err, ret, "credential for %s", destination);
	if (bk_broker_find(b, &e->host, e->port))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EEXIST, "two credentials for %s", destination);
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = bk_error_errno(err, errno, "reading the credential for %s", destination);
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > BK_BROKER_FILE_MAX) {
			ret = bk_error_set(err, BK_INVALID_ARGUMENT, EFBIG, "the credential for %s is larger than 8 KiB",
					   destination);
			goto out;
		}
	}
	bk_egress_host host = e->host;
	uint16_t port = e->port;
	ret = bk_broker_parse(buf, len, e, &why);
	if (ret < 0) {
		ret = bk_error_set(err, BK_INVALID_ARGUMENT, -ret, "the credential for %s: %s", destination, why);
		goto out;
	}
	e->host = host;
	e->port = port;
	b->n++;
out:
	explicit_bzero(buf, sizeof(buf));
	return ret;
}

const bk_broker_entry *bk_broker_find(const bk_broker *b, const bk_egress_host *host, uint16_t port)
{
	for (size_t i = 0; i < b->n; i++) {
		const bk_broker_entry *e = &b->entries[i];
		if (e->port != port || e->host.is_addr != host->is_addr)
			continue;
		if (host->is_addr ? memcmp(e->host.addr, host->addr, 16) == 0 : strcmp(e->host.name, host->name) == 0)
			return e;
	}
	return NULL;
}

void bk_broker_fini(bk_broker *b)
{
	for (size_t i = 0; i < b->n; i++)
		entry_wipe(&b->entries[i]);
	b->n = 0;
}
