/* Brokered credentials (--egress-credential HOST:PORT=FILE): header lines the proxy adds to every
 * request to that destination, after removing any the command sent under the same names. The
 * file is opened by the executor (which never reads it) and read here, once; its bytes exist in
 * this process only — never in the sandbox, the front, a log line or a counter. */
#ifndef BK_EGRESS_BROKER_H
#define BK_EGRESS_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "egresspolicy.h"
#include "error.h"

#define BK_BROKER_MAX 64          /* destinations with credentials */
#define BK_BROKER_HEADERS_MAX 16  /* header lines in one file */
#define BK_BROKER_FILE_MAX 8192

typedef struct bk_broker_entry {
	bk_egress_host host;
	uint16_t port;
	char *lines;        /* "Name: value\r\n" each, as sent */
	size_t len;
	char *names[BK_BROKER_HEADERS_MAX]; /* the names, for stripping the command's own */
	size_t n_names;
} bk_broker_entry;

typedef struct bk_broker {
	bk_broker_entry entries[BK_BROKER_MAX];
	size_t n;
} bk_broker;

/* Read the header lines of fd (at most BK_BROKER_FILE_MAX bytes; "Name: value" per line, LF or
 * CRLF, blank lines and lines starting with '#' skipped) for the destination. 0 or -errno. */
int bk_broker_add(bk_broker *b, const char *destination, int fd, bk_error **err);

/* Parse the lines of a file's text (len bytes) into e. 0, or -EINVAL with *why. */
int bk_broker_parse(const char *text, size_t len, bk_broker_entry *e, const char **why);

/* The entry for this destination, or NULL. */
const bk_broker_entry *bk_broker_find(const bk_broker *b, const bk_egress_host *host, uint16_t port);

/* Wipe and free every entry. */
void bk_broker_fini(bk_broker *b);

#endif
