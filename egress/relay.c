#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "cleanup.h"
#include "clock.h"
#include "httpparse.h"

/* Each direction's buffer: a 64 MiB download moves at the sockets' speed through it. */
#define RELAY_BUF (128u * 1024)
/* The pipe a plain answer is spliced through (what it asks for; the kernel may give less). */
#define RELAY_PIPE (256u * 1024)

/* An SSL call's outcome as the plain calls say it. */
static ssize_t ssl_result(SSL *ssl, int ok, size_t done, short *ev)
{
	if (ok)
		return (ssize_t)done;
	switch (SSL_get_error(ssl, 0)) {
	case SSL_ERROR_WANT_READ:
		*ev |= POLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*ev |= POLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		ERR_clear_error();
		return -EPROTO;
	}
}

ssize_t bk_relay_read(bk_relay_end *e, void *buf, size_t n, short *ev)
{
	if (e->ssl) {
		size_t got = 0;
		int ok = SSL_read_ex(e->ssl, buf, n, &got);
		return ssl_result(e->ssl, ok, got, ev);
	}
	for (;;) {
		ssize_t r = read(e->fd, buf, n);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			*ev |= POLLIN;
			return -EAGAIN;
		}
		return -errno;
	}
}

ssize_t bk_relay_write(bk_relay_end *e, const void *buf, size_t n, short *ev)
{
	if (e->ssl) {
		size_t put = 0;
		int ok = SSL_write_ex(e->ssl, buf, n, &put);
		ssize_t r = ssl_result(e->ssl, ok, put, ev);
		return r == 0 ? -EPIPE : r;
	}
	for (;;) {
		ssize_t r = send(e->fd, buf, n, MSG_NOSIGNAL);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			*ev |= POLLOUT;
			return -EAGAIN;
		}
		return -errno;
	}
}

/* Wait for ev on fd until the deadline (monotonic ms). 0, or -ETIMEDOUT. */
static int wait_for(int fd, short ev, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - bk_clock_monotonic_ms();
		struct pollfd p = { .fd = fd, .events = ev };
		if (left <= 0)
			return -ETIMEDOUT;
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int bk_relay_write_all(bk_relay_end *e, const void *buf, size_t n, unsigned timeout_ms)
{
	int64_t deadline = bk_clock_monotonic_ms() + timeout_ms;
	size_t off = 0;

	while (off < n) {
		short ev = 0;
		ssize_t w = bk_relay_write(e, (const uint8_t *)buf + off, n - off, &ev);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w != -EAGAIN)
			return (int)w;
		int r = wait_for(e->fd, ev, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

int bk_relay_handshake(bk_relay_end *e, unsigned timeout_ms)
{
	int64_t deadline = bk_clock_monotonic_ms() + timeout_ms;

	for (;;) {
		int ok = SSL_do_handshake(e->ssl);
		short ev = 0;
		ssize_t r = ssl_result(e->ssl, ok == 1, 1, &ev);
		if (r > 0)
			return 0;
		if (r != -EAGAIN)
			return r == 0 ? -ECONNRESET : (int)r;
		if ((r = wait_for(e->fd, ev, deadline)) < 0)
			return (int)r;
	}
}

/* One direction's state. */
struct dir {
	bk_relay_end *from, *to;
	uint8_t *buf;
	size_t len, off;     /* bytes ready to write: buf[off, len) */
	size_t held;         /* up, first flight: bytes gathered, not released */
	bool eof;            /* from's stream ended, or its framing is complete */
	bool shut;           /* to was told (half-close) */
	uint64_t *count;
	const int *pipe;     /* spliced (no TLS on either end): the bytes go through it, not buf */
	size_t inpipe;       /* bytes in the pipe, not yet written */
};

/* End to's writing side after from's stream ended: the peer sees the end of the stream. */
static void half_close(bk_relay_end *e)
{
	if (e->ssl)
		SSL_shutdown(e->ssl);
	else
		shutdown(e->fd, SHUT_WR);
}

struct up_state {
	bk_relay *r;
	bk_http_chunked chunked;
	uint64_t left;       /* BK_RELAY_LENGTH */
};

/* n bytes just read into d (at buf + len for a plain read): how many of them go on, by the
 * framing. Marks the direction ended when the body is complete. */
static int frame_up(struct up_state *u, struct dir *d, size_t n, size_t *keep)
{
	const char *why = NULL;
	size_t used = 0;
	int ret;

	switch (u->r->framing) {
	case BK_RELAY_STREAM:
		*keep = n;
		return 0;
	case BK_RELAY_LENGTH:
		*keep = n < u->left ? n : (size_t)u->left;
		u->left -= *keep;
		d->eof = u->left == 0;
		return 0;
	case BK_RELAY_CHUNKED:
		ret = bk_http_chunked_feed(&u->chunked, d->buf + d->len, n, &used, &why);
		if (ret < 0) {
			u->r->error = why;
			return -EPROTO;
		}
		*keep = used;
		d->eof = ret == 1;
		return 0;
	}
	return -EINVAL;
}

/* Move what can move now in one direction. 1 when something moved, 0 when it must wait (its
 * events added to the ends' masks), <0 on failure. */
static int step(bk_relay *r, struct dir *d, struct up_state *u, short *ev_from, short *ev_to)
{
	int moved = 0;

	while (d->off < d->len) {
		ssize_t w = bk_relay_write(d->to, d->buf + d->off, d->len - d->off, ev_to);
		if (w == -EAGAIN)
			return moved;
		if (w < 0)
			return (int)w;
		d->off += (size_t)w;
		*d->count += (uint64_t)w;
		moved = 1;
	}
	d->off = d->len = 0;
	if (d->eof) {
		if (!d->shut && (!u || r->framing == BK_RELAY_STREAM))
			half_close(d->to);
		d->shut = true;
		return moved;
	}
	size_t at = d->held;
	if (at == RELAY_BUF) {
		r->refused = "a first flight larger than the proxy looks at";
		return -EPERM;
	}
	ssize_t n = bk_relay_read(d->from, d->buf + at, RELAY_BUF - at, ev_from);
	if (n == -EAGAIN)
		return moved;
	if (n < 0)
		return (int)n;
	if (n == 0) {
		/* A first flight cut short names nothing: it is dropped with the stream. */
		d->eof = true;
		d->held = 0;
		return 1;
	}
	if (u && r->check) {
		const char *why = NULL;
		d->held += (size_t)n;
		int ok = r->check(r->check_arg, d->buf, d->held, &why);
		if (ok < 0) {
			r->refused = why;
			return -EPERM;
		}
		if (ok == 0)
			return 1;
		/* Released: all of it goes on, and nothing more is checked. */
		d->len = d->held;
		d->held = 0;
		r->check = NULL;
		return 1;
	}
	size_t keep = (size_t)n;
	if (u) {
		int ret = frame_up(u, d, (size_t)n, &keep);
		if (ret < 0)
			return ret;
	}
	d->len = keep;
	return 1;
}

/* step() for a direction with a pipe: the bytes move from socket to socket in the kernel, never
 * copied into the proxy (which halves its CPU per GiB: bench/egress.sh). Nothing looks at them:
 * only the answer's direction, plain on both ends, is spliced. */
static int step_spliced(struct dir *d, short *ev_from, short *ev_to)
{
	int moved = 0;

	while (d->inpipe) {
		ssize_t w = splice(d->pipe[0], NULL, d->to->fd, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			*ev_to |= POLLOUT;
			return moved;
		}
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		d->inpipe -= (size_t)w;
		*d->count += (uint64_t)w;
		moved = 1;
	}
	if (d->eof) {
		if (!d->shut)
			half_close(d->to);
		d->shut = true;
		return moved;
	}
	/* The pipe is empty here, so EAGAIN can only mean that the socket has nothing yet. */
	ssize_t n = splice(d->from->fd, NULL, d->pipe[1], NULL, RELAY_PIPE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0 && errno == EAGAIN) {
		*ev_from |= POLLIN;
		return moved;
	}
	if (n < 0)
		return -errno;
	if (n == 0)
		d->eof = true;
	d->inpipe = (size_t)n;
	return 1;
}

int bk_relay_run(bk_relay *r)
{
	uint8_t *bufs = malloc(2 * RELAY_BUF);
	struct up_state u = { .r = r, .left = r->length };
	struct dir up = { .from = r->client, .to = r->upstream, .count = &r->up };
	struct dir down = { .from = r->upstream, .to = r->client, .count = &r->down };
	_cleanup_close_pair_ int spliced[2] = BK_FD_PAIR_NONE;
	int64_t last = bk_clock_monotonic_ms();
	int ret = 0;

	if (!bufs) {
		r->error = "out of memory";
		return -ENOMEM;
	}
	up.buf = bufs;
	down.buf = bufs + RELAY_BUF;
	/* Without a pipe (none to be had), the answer goes through buf as the rest does. */
	if (!r->client->ssl && !r->upstream->ssl && pipe2(spliced, O_NONBLOCK | O_CLOEXEC) == 0) {
		(void)fcntl(spliced[1], F_SETPIPE_SZ, (int)RELAY_PIPE);
		down.pipe = spliced;
	}
	if (r->framing == BK_RELAY_LENGTH && r->length == 0)
		up.eof = true;
	/* What came with the head is the body's (or the tunnel's) first bytes. */
	if (r->pending_len) {
		size_t n = r->pending_len < RELAY_BUF ? r->pending_len : RELAY_BUF;
		memcpy(up.buf, r->pending, n);
		if (r->check) {
			const char *why = NULL;
			up.held = n;
			int ok = r->check(r->check_arg, up.buf, n, &why);
			if (ok < 0) {
				r->refused = why;
				ret = -EPERM;
				goto out;
			}
			if (ok > 0) {
				up.len = n;
				up.held = 0;
				r->check = NULL;
			}
		} else if (!up.eof) {
			size_t keep = n;
			if ((ret = frame_up(&u, &up, n, &keep)) < 0)
				goto out;
			up.len = keep;
		}
	}
	for (;;) {
		short ev_client = 0, ev_up = 0;
		int a = step(r, &up, &u, &ev_client, &ev_up);
		int b = a < 0       ? 0
			: down.pipe ? step_spliced(&down, &ev_up, &ev_client)
				    : step(r, &down, NULL, &ev_up, &ev_client);
		if (a < 0 || b < 0) {
			ret = a < 0 ? a : b;
			if (!r->refused && !r->error)
				r->error = "a side failed";
			break;
		}
		/* A forwarded request is over when the destination's answer is; a tunnel when both
		 * streams are. */
		if (down.shut && (r->framing != BK_RELAY_STREAM || up.shut))
			break;
		if (a || b) {
			last = bk_clock_monotonic_ms();
			continue;
		}
		int64_t left = last + r->idle_ms - bk_clock_monotonic_ms();
		if (left <= 0) {
			r->error = "idle";
			ret = -ETIMEDOUT;
			break;
		}
		struct pollfd p[2] = { { .fd = r->client->fd, .events = ev_client },
				       { .fd = r->upstream->fd, .events = ev_up } };
		int n = poll(p, 2, (int)left);
		if (n < 0 && errno != EINTR) {
			ret = -errno;
			r->error = "poll";
			break;
		}
		/* A hang-up on a side waited for shows in its next read or write; on a side not waited
		 * for (a forwarded request's command, while its answer is awaited) it ends the relay. */
		if (n > 0 && (((p[0].revents & (POLLHUP | POLLERR)) && !ev_client) ||
			      ((p[1].revents & (POLLHUP | POLLERR)) && !ev_up))) {
			r->error = "a side hung up";
			ret = -ECONNRESET;
			break;
		}
	}
out:
	free(bufs);
	return ret;
}
