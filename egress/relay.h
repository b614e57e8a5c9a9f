/* Relaying one connection's bytes both ways: between the command's socket and the destination's,
 * either of them possibly TLS (the brokered case), with non-blocking descriptors under poll(2),
 * on the connection's own thread. What goes up (command → destination) may be bounded by the
 * request's framing (the proxy forwards one request per connection) or, in a tunnel, held back
 * until its first flight is known not to name another host. */
#ifndef BK_EGRESS_RELAY_H
#define BK_EGRESS_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

/* One side: a socket, and the TLS on it when the proxy speaks TLS there. */
typedef struct bk_relay_end {
	int fd;
	SSL *ssl;
} bk_relay_end;

typedef enum bk_relay_framing {
	BK_RELAY_STREAM,  /* a tunnel: everything, to the command's end of stream */
	BK_RELAY_LENGTH,  /* exactly `length` bytes of body, then nothing more */
	BK_RELAY_CHUNKED, /* one chunked body, then nothing more */
} bk_relay_framing;

/* The first-flight check: 1 when buf (the command's first len bytes) may go on, 0 when more are
 * needed to tell, <0 when it must not (*why). */
typedef int (*bk_relay_first_flight)(void *arg, const uint8_t *buf, size_t len, const char **why);

typedef struct bk_relay {
	bk_relay_end *client, *upstream;
	bk_relay_framing framing;
	uint64_t length;                 /* BK_RELAY_LENGTH */
	bk_relay_first_flight check;     /* NULL: none */
	void *check_arg;
	const uint8_t *pending;          /* the command's bytes already read (past its request head) */
	size_t pending_len;
	unsigned idle_ms;
	/* Out: */
	uint64_t up, down;               /* bytes written to each side */
	const char *refused;             /* the first flight was refused: why */
	const char *error;               /* how it ended otherwise, NULL for a clean end */
} bk_relay;

/* Relay until the destination's stream has ended (a forwarded request) or both have (a tunnel),
 * either side fails, the first flight is refused, or nothing moves for idle_ms. 0 for a clean
 * end, <0 otherwise (refused or error says why). */
int bk_relay_run(bk_relay *r);

/* Read or write what is possible now: >0 bytes, 0 at the end of the stream (read), -EAGAIN with
 * the poll events to wait for in *ev, or another -errno. */
ssize_t bk_relay_read(bk_relay_end *e, void *buf, size_t n, short *ev);
ssize_t bk_relay_write(bk_relay_end *e, const void *buf, size_t n, short *ev);

/* Write all of buf within timeout_ms (a head, an answer). 0 or -errno (-ETIMEDOUT). */
int bk_relay_write_all(bk_relay_end *e, const void *buf, size_t n, unsigned timeout_ms);

/* Run a TLS handshake (accept or connect, as the SSL was set up) within timeout_ms. 0 or -errno. */
int bk_relay_handshake(bk_relay_end *e, unsigned timeout_ms);

#endif
