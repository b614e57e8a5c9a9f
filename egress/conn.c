/* One connection from a sandboxed command, on a thread of its own: read one request head, decide,
 * dial the address that was checked, relay, and write one audit line. The steps in order, each a
 * refusal point (docs/PROTOCOL.md, "Egress", lists the answers). */
#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "httpparse.h"
#include "log.h"
#include "relay.h"

/* Addresses tried per name, in the resolver's order. */
#define ADDRS_MAX 8
/* How long a refused command's further bytes are read and dropped before the close. */
#define LINGER_MS 1000

/* What the audit line says about this connection. */
struct decision {
	const char *verdict;        /* "allowed", "refused", "failed"; NULL: no request was read */
	char method[BK_HTTP_METHOD_MAX + 1];
	char asked[BK_EGRESS_NAME_MAX + 16];
	char addr[BK_EGRESS_ADDR_TEXT_MAX];
	char reason[160];
	bool brokered;
	uint64_t up, down;
};

struct conn_run {
	bk_egress_conn *c;
	bk_egress *eg;
	struct decision d;
	bk_relay_end client, upstream;
	char *head;                  /* the request head, header_max bytes */
	size_t have;                 /* bytes read into head */
	bk_http_request rq;
	bk_egress_host host;         /* the destination, normalized */
	uint16_t port;
	const bk_broker_entry *cred;
};

static void decide(struct decision *d, const char *verdict, const char *fmt, ...) BK_PRINTF(3, 4);
static void decide(struct decision *d, const char *verdict, const char *fmt, ...)
{
	va_list ap;

	d->verdict = verdict;
	d->reason[0] = '\0';
	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
	va_end(ap);
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* Answer the command with status and the decision's reason (the proxy's words, never an echo of
 * what the command sent), on the end it spoke on. */
static void answer(struct conn_run *x, bk_relay_end *to, int status)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n"
			 "X-Boxkite-Egress: %s\r\n\r\nboxkite egress: %s\n",
			 status, status_text(status), strlen(x->d.reason) + 17, x->d.verdict, x->d.reason);
	if (n <= 0 || (size_t)n >= sizeof(buf) || bk_relay_write_all(to, buf, (size_t)n, x->eg->limits.connect_ms) < 0)
		return;
	/* A lingering close, as web servers make it: the command may still be sending (a body, a
	 * slow head), and a close with its bytes unread would reset the connection and lose the
	 * answer on its side. So: no more from us, and what it sends read and dropped, for a moment. */
	if (to->ssl)
		SSL_shutdown(to->ssl);
	else
		shutdown(to->fd, SHUT_WR);
	int64_t until = bk_clock_monotonic_ms() + LINGER_MS;
	for (int64_t left = LINGER_MS; left > 0; left = until - bk_clock_monotonic_ms()) {
		struct pollfd p = { .fd = to->fd, .events = POLLIN };
		short ev = 0;
		if (poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t r = bk_relay_read(to, buf, sizeof(buf), &ev);
		if (r == 0 || (r < 0 && r != -EAGAIN))
			break;
	}
}

static void refuse(struct conn_run *x, bk_relay_end *to, int status, const char *why)
{
	decide(&x->d, status == 502 ? "failed" : "refused", "%s", why);
	answer(x, to, status);
}

/* Read a request head from `from` into x->head (bytes already there count) until it parses,
 * within connect_ms. 1 parsed; 0 the stream ended or nothing came in time (answered when
 * something did); <0 refused (answered). */
static int read_head(struct conn_run *x, bk_relay_end *from)
{
	int64_t deadline = bk_clock_monotonic_ms() + x->eg->limits.connect_ms;
	size_t max = x->eg->limits.header_max;

	for (;;) {
		int status = 0;
		const char *why = NULL;
		if (x->have) {
			int r = bk_http_request_parse(x->head, x->have, max, &x->rq, &status, &why);
			if (r == 1)
				return 1;
			if (r < 0) {
				refuse(x, from, status, why);
				return -EINVAL;
			}
		}
		short ev = 0;
		ssize_t n = bk_relay_read(from, x->head + x->have, max - x->have, &ev);
		if (n > 0) {
			x->have += (size_t)n;
			continue;
		}
		if (n != -EAGAIN) {
			if (!x->have)
				return 0;
			refuse(x, from, 400, "the stream ended inside a request head");
			return -EINVAL;
		}
		int64_t left = deadline - bk_clock_monotonic_ms();
		struct pollfd p = { .fd = from->fd, .events = ev };
		if (left <= 0 || (poll(&p, 1, (int)left) == 0 && bk_clock_monotonic_ms() >= deadline)) {
			if (!x->have)
				return 0;
			refuse(x, from, 408, "no whole request head in time");
			return -ETIMEDOUT;
		}
	}
}

static bool host_equal(const bk_egress_host *a, const bk_egress_host *b)
{
	return a->is_addr == b->is_addr &&
	       (a->is_addr ? memcmp(a->addr, b->addr, 16) == 0 : strcmp(a->name, b->name) == 0);
}

/* The host (and port) an authority names, normalized. */
static int authority_host(bk_http_span a, uint16_t default_port, bk_egress_host *h, uint16_t *port, const char **why)
{
	bk_http_span host;

	if (bk_http_authority_split(a, default_port, &host, port, why) < 0)
		return -EINVAL;
	return bk_egress_host_parse(host.p, host.len, h, NULL);
}

/* A Host header, when there is one, names the destination the request does. */
static bool host_header_agrees(const bk_http_request *rq, const bk_egress_host *h, uint16_t port)
{
	bk_egress_host hh;
	uint16_t hp;
	const char *why;

	if (!rq->host_header)
		return true;
	if (authority_host(rq->host_header->value, port, &hh, &hp, &why) < 0)
		return false;
	return host_equal(&hh, h) && hp == port;
}

static void copy_span(char *out, size_t size, bk_http_span s)
{
	size_t n = s.len < size - 1 ? s.len : size - 1;

	memcpy(out, s.p, n);
	out[n] = '\0';
}

/* --- the first flight of a tunnel ------------------------------------------------------------- */

/* Inside a tunnel to a name, the command's first bytes may not name another host: a TLS
 * ClientHello's server name, or a plain HTTP request's Host. Anything that is neither (another
 * protocol) goes on as it is. */
static int first_flight(void *arg, const uint8_t *buf, size_t len, const char **why)
{
	struct conn_run *x = arg;
	bk_egress_host named;

	if (bk_tls_looks_like_hello(buf, len)) {
		char sni[BK_EGRESS_NAME_MAX + 2];
		int r = bk_tls_hello_sni(buf, len, sni, sizeof(sni));
		if (r == -EAGAIN)
			return 0;
		if (r < 0) {
			*why = "a TLS ClientHello the proxy cannot read";
			return -EPERM;
		}
		if (r == 0)
			return 1;
		if (bk_egress_host_parse(sni, strlen(sni), &named, NULL) < 0 || !host_equal(&named, &x->host)) {
			*why = "the TLS server name is not the host the tunnel was granted for";
			return -EPERM;
		}
		return 1;
	}
	/* HTTP: a first line ending in " HTTP/..." (a line not yet ended may still become one). */
	const uint8_t *eol = memchr(buf, '\n', len);
	size_t line = eol ? (size_t)(eol - buf) : len;
	for (size_t i = 0; i < line; i++)
		if (buf[i] < 0x20 && buf[i] != '\r')
			return 1;
	if (!eol)
		return len < x->eg->limits.header_max ? 0 : 1;
	if (!memmem(buf, line, " HTTP/", 6))
		return 1;
	bk_http_request rq;
	int status;
	int r = bk_http_request_parse((const char *)buf, len, x->eg->limits.header_max, &rq, &status, why);
	if (r == 0)
		return 0;
	if (r < 0)
		return -EPERM;
	/* The host it names, in its target and in its Host header, whatever the port. */
	uint16_t port;
	bool same = true;
	if (rq.form != BK_HTTP_ORIGIN)
		same = bk_egress_host_parse(rq.host.p, rq.host.len, &named, NULL) == 0 && host_equal(&named, &x->host);
	if (same && rq.host_header)
		same = authority_host(rq.host_header->value, x->port, &named, &port, why) == 0 &&
		       host_equal(&named, &x->host);
	if (!same) {
		*why = "a request inside the tunnel names another host";
		return -EPERM;
	}
	return 1;
}

/* --- resolving and dialling ------------------------------------------------------------------ */

/* The addresses of the destination the proxy may dial, in the resolver's order: a literal as it
 * is, a name resolved here, once (what is dialled is what was checked: no second lookup). 0 with
 * n set; -ENOENT (failed: no address); -EPERM (refused: every address is special). */
static int addresses(struct conn_run *x, uint8_t out[ADDRS_MAX][16], size_t *n)
{
	uint8_t all[ADDRS_MAX][16];
	size_t count = 0;
	const char *refusal = NULL;
	char first[BK_EGRESS_ADDR_TEXT_MAX] = "";

	if (x->host.is_addr) {
		memcpy(all[0], x->host.addr, 16);
		count = 1;
	} else {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
		int r = getaddrinfo(x->host.name, NULL, &hints, &res);
		if (r != 0) {
			decide(&x->d, "failed", "the name does not resolve (%s)", gai_strerror(r));
			return -ENOENT;
		}
		for (struct addrinfo *a = res; a && count < ADDRS_MAX; a = a->ai_next) {
			uint8_t v[16];
			if (a->ai_family == AF_INET) {
				static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
				memcpy(v, mapped, 12);
				memcpy(v + 12, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
			} else if (a->ai_family == AF_INET6) {
				memcpy(v, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
			} else {
				continue;
			}
			bool seen = false;
			for (size_t i = 0; i < count && !seen; i++)
				seen = memcmp(all[i], v, 16) == 0;
			if (!seen)
				memcpy(all[count++], v, 16);
		}
		freeaddrinfo(res);
	}
	*n = 0;
	for (size_t i = 0; i < count; i++) {
		const char *why = bk_egress_refusal(x->eg, all[i], x->port);
		if (!why) {
			memcpy(out[(*n)++], all[i], 16);
		} else if (!refusal) {
			refusal = why;
			bk_egress_addr_format(all[i], x->port, first, sizeof(first));
		}
	}
	if (*n)
		return 0;
	if (!refusal) {
		decide(&x->d, "failed", "the name has no address");
		return -ENOENT;
	}
	snprintf(x->d.addr, sizeof(x->d.addr), "%s", first);
	decide(&x->d, "refused", "never dialled: %s address", refusal);
	return -EPERM;
}

static socklen_t to_sockaddr(const uint8_t addr[16], uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (bk_egress_addr_is_v4(addr)) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, addr + 12, 4);
		return sizeof(*s);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	memcpy(&s6->sin6_addr, addr, 16);
	return sizeof(*s6);
}

/* Dial the checked addresses in turn, within connect_ms in all. 0 with x->upstream connected;
 * -errno (the last failure) otherwise. */
static int dial(struct conn_run *x, uint8_t addrs[ADDRS_MAX][16], size_t n)
{
	int64_t deadline = bk_clock_monotonic_ms() + x->eg->limits.connect_ms;
	int err = ECONNREFUSED;

	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = to_sockaddr(addrs[i], x->port, &ss);
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (!bk_egress_conn_set_upstream(x->c, fd)) {
			close(fd);
			return -ECANCELED;
		}
		bk_egress_addr_format(addrs[i], x->port, x->d.addr, sizeof(x->d.addr));
		if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
			err = errno;
		} else {
			/* The command's socket too: an exec that ends shuts it down, and the dial with it. */
			struct pollfd p[2] = { { .fd = fd, .events = POLLOUT }, { .fd = x->client.fd, .events = 0 } };
			int64_t left = deadline - bk_clock_monotonic_ms();
			socklen_t el = sizeof(err);
			int got = left > 0 ? poll(p, 2, (int)left) : 0;
			if (got > 0 && p[1].revents) {
				bk_egress_conn_close_fd(x->c, &x->c->upstream);
				return -ECANCELED;
			}
			if (got <= 0 || !p[0].revents)
				err = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
				err = errno;
			else if (err == 0) {
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
				x->upstream.fd = fd;
				return 0;
			}
		}
		bk_egress_conn_close_fd(x->c, &x->c->upstream);
	}
	return -err;
}

/* --- the three ways through ------------------------------------------------------------------ */

static int relay(struct conn_run *x, bk_relay_framing framing, uint64_t length, bool check, const char *pending,
		 size_t pending_len)
{
	bk_relay r = {
		.client = &x->client,
		.upstream = &x->upstream,
		.framing = framing,
		.length = length,
		.check = check ? first_flight : NULL,
		.check_arg = x,
		.pending = (const uint8_t *)pending,
		.pending_len = pending_len,
		.idle_ms = x->eg->limits.idle_ms,
	};
	int ret = bk_relay_run(&r);

	x->d.up += r.up;
	x->d.down += r.down;
	if (r.refused) {
		decide(&x->d, "refused", "%s", r.refused);
		return -EPERM;
	}
	if (ret < 0 && r.error)
		snprintf(x->d.reason, sizeof(x->d.reason), "ended: %s", r.error);
	return ret;
}

/* Send the request's head as the destination gets it, then relay its body and the answer. */
static int forward(struct conn_run *x, const char *pending, size_t pending_len)
{
	char out[BK_BROKER_FILE_MAX + 2 * 16384];
	const char *const *strip = x->cred ? (const char *const *)x->cred->names : NULL;
	ssize_t n = bk_http_forward_head(&x->rq, strip, x->cred ? x->cred->n_names : 0, x->cred ? x->cred->lines : NULL,
					 x->cred ? x->cred->len : 0, out, sizeof(out));
	int ret;

	if (n < 0) {
		refuse(x, &x->client, 431, "the request head does not fit once rewritten");
		return -E2BIG;
	}
	x->d.brokered = x->cred != NULL;
	ret = bk_relay_write_all(&x->upstream, out, (size_t)n, x->eg->limits.connect_ms);
	explicit_bzero(out, (size_t)n);
	if (ret < 0) {
		decide(&x->d, "failed", "sending the request: %s", strerror(-ret));
		return ret;
	}
	x->d.up += (uint64_t)n;
	if (x->cred)
		BK_EGRESS_COUNT(x->eg, brokered, 1);
	return relay(x, x->rq.chunked ? BK_RELAY_CHUNKED : BK_RELAY_LENGTH,
		     x->rq.content_length > 0 ? (uint64_t)x->rq.content_length : 0, false, pending, pending_len);
}

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* CONNECT to a destination with a credential: TLS with the command under the proxy's CA, TLS to
 * the destination verified against the system's roots, and one request between them, rewritten. */
static int brokered(struct conn_run *x, size_t pending_len)
{
	int ret;

	/* The command's TLS starts after the answer: bytes sent before it would be lost to the
	 * handshake, so there may be none. */
	if (pending_len) {
		refuse(x, &x->client, 400, "bytes sent before the tunnel was established");
		return -EPROTO;
	}
	if (bk_relay_write_all(&x->client, established, sizeof(established) - 1, x->eg->limits.connect_ms) < 0)
		return -EPIPE;
	x->client.ssl = bk_mitm_accepting(x->eg->mitm, &x->host, x->client.fd);
	x->upstream.ssl = bk_mitm_connecting(x->eg->mitm, &x->host, x->upstream.fd);
	if (!x->client.ssl || !x->upstream.ssl) {
		decide(&x->d, "failed", "no TLS for the brokered destination");
		return -ENOMEM;
	}
	if ((ret = bk_relay_handshake(&x->client, x->eg->limits.connect_ms)) < 0) {
		decide(&x->d, "refused", "the command's TLS handshake failed");
		return ret;
	}
	const char *sni = SSL_get_servername(x->client.ssl, TLSEXT_NAMETYPE_host_name);
	bk_egress_host named;
	if (sni && (bk_egress_host_parse(sni, strlen(sni), &named, NULL) < 0 || !host_equal(&named, &x->host))) {
		decide(&x->d, "refused", "the TLS server name is not the host the tunnel was granted for");
		return -EPERM;
	}
	if ((ret = bk_relay_handshake(&x->upstream, x->eg->limits.connect_ms)) < 0) {
		long v = SSL_get_verify_result(x->upstream.ssl);
		decide(&x->d, "failed", "TLS to the destination: %s",
		       v != X509_V_OK ? X509_verify_cert_error_string(v) : "the handshake failed");
		answer(x, &x->client, 502);
		return ret;
	}
	/* The request inside, read afresh. */
	x->have = 0;
	if ((ret = read_head(x, &x->client)) <= 0)
		return ret < 0 ? ret : -ECONNRESET;
	if (x->rq.form != BK_HTTP_ORIGIN) {
		refuse(x, &x->client, 400, "a request inside a tunnel names its path, not a destination");
		return -EINVAL;
	}
	if (!host_header_agrees(&x->rq, &x->host, x->port)) {
		refuse(x, &x->client, 400, "the Host header names another destination than the tunnel's");
		return -EPERM;
	}
	if (x->rq.upgrade) {
		refuse(x, &x->client, 400, "an Upgrade is not forwarded to a brokered destination");
		return -EPERM;
	}
	copy_span(x->d.method, sizeof(x->d.method), x->rq.method);
	return forward(x, x->head + x->rq.head_len, x->have - x->rq.head_len);
}

/* --- the whole ----------------------------------------------------------------------------- */

static void serve(struct conn_run *x)
{
	uint8_t addrs[ADDRS_MAX][16];
	size_t n_addrs = 0;
	_cleanup_error_ bk_error *err = NULL;
	int ret;

	if ((ret = read_head(x, &x->client)) <= 0)
		return;
	copy_span(x->d.method, sizeof(x->d.method), x->rq.method);
	if (x->rq.form == BK_HTTP_ORIGIN) {
		refuse(x, &x->client, 400, "not a proxy request: CONNECT, or an absolute http:// URI");
		return;
	}
	snprintf(x->d.asked, sizeof(x->d.asked), "%.*s:%u", (int)(x->rq.host.len < 260 ? x->rq.host.len : 260),
		 x->rq.host.p, x->rq.port);
	x->port = x->rq.port;
	if (bk_egress_host_parse(x->rq.host.p, x->rq.host.len, &x->host, &err) < 0) {
		refuse(x, &x->client, 400, bk_error_msg(err));
		return;
	}
	if (!host_header_agrees(&x->rq, &x->host, x->port)) {
		refuse(x, &x->client, 400, "the Host header names another destination than the request");
		return;
	}
	if (x->rq.form == BK_HTTP_ABSOLUTE && x->rq.upgrade) {
		refuse(x, &x->client, 400, "an Upgrade is not forwarded: ask for a tunnel with CONNECT");
		return;
	}
	/* The grant: the destination as asked, normalized. */
	if (!bk_egress_patterns_match(x->c->ex->grant, x->c->ex->n_grant, &x->host, x->port)) {
		refuse(x, &x->client, 403, "the destination is not granted to this command");
		return;
	}
	x->cred = bk_broker_find(&x->eg->broker, &x->host, x->port);
	ret = addresses(x, addrs, &n_addrs);
	if (ret < 0) {
		answer(x, &x->client, ret == -EPERM ? 403 : 502);
		return;
	}
	ret = dial(x, addrs, n_addrs);
	if (ret == -ECANCELED) {
		decide(&x->d, "refused", "the command ended");
		return;
	}
	if (ret < 0) {
		decide(&x->d, "failed", "cannot connect: %s", strerror(-ret));
		answer(x, &x->client, 502);
		return;
	}
	decide(&x->d, "allowed", NULL);
	const char *pending = x->head + x->rq.head_len;
	size_t pending_len = x->have - x->rq.head_len;
	if (x->rq.form == BK_HTTP_ABSOLUTE) {
		forward(x, pending, pending_len);
		return;
	}
	if (x->cred) {
		brokered(x, pending_len);
		return;
	}
	if (bk_relay_write_all(&x->client, established, sizeof(established) - 1, x->eg->limits.connect_ms) < 0)
		return;
	/* A tunnel to an address was granted by address: what travels in it is its business. */
	relay(x, BK_RELAY_STREAM, 0, !x->host.is_addr, pending, pending_len);
}

static void audit(struct conn_run *x, const struct timespec *start)
{
	bk_log_egress line = {
		.verdict = x->d.verdict,
		.exec_id = x->c->ex->id,
		.key_id = x->c->ex->key_id,
		.method = x->d.method[0] ? x->d.method : NULL,
		.asked = x->d.asked[0] ? x->d.asked : NULL,
		.addr = x->d.addr[0] ? x->d.addr : NULL,
		.reason = x->d.reason[0] ? x->d.reason : NULL,
		.brokered = x->d.brokered,
		.bytes_up = x->d.up,
		.bytes_down = x->d.down,
		.duration_us = bk_elapsed_us(start),
	};

	bk_log_egress_decision(&line);
}

void *bk_egress_conn_main(void *arg)
{
	bk_egress_conn *c = arg;
	struct conn_run x = { .c = c, .eg = c->eg, .client = { .fd = c->client }, .upstream = { .fd = -1 } };
	struct timespec start;

	clock_gettime(CLOCK_MONOTONIC, &start);
	x.head = malloc(x.eg->limits.header_max);
	if (x.head) {
		setsockopt(c->client, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		serve(&x);
	} else {
		decide(&x.d, "refused", "out of memory");
	}
	if (x.client.ssl)
		SSL_shutdown(x.client.ssl);
	SSL_free(x.client.ssl);
	SSL_free(x.upstream.ssl);
	if (x.d.verdict) {
		audit(&x, &start);
		if (strcmp(x.d.verdict, "allowed") == 0)
			BK_EGRESS_COUNT(x.eg, allowed, 1);
		else if (strcmp(x.d.verdict, "refused") == 0)
			BK_EGRESS_COUNT(x.eg, refused, 1);
		else
			BK_EGRESS_COUNT(x.eg, failed, 1);
		BK_EGRESS_COUNT(x.eg, bytes_up, x.d.up);
		BK_EGRESS_COUNT(x.eg, bytes_down, x.d.down);
	}
	if (x.head)
		explicit_bzero(x.head, x.have);
	free(x.head);
	bk_egress_conn_end(c);
	return NULL;
}
