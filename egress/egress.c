/* The egress proxy's main thread: the executor's orders, every exec's listener, the bounds on
 * connections, and the end of an exec's connections when the exec ends. */
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boxkite/egress/egress.pb-c.h"
#include "channel.h"
#include "clock.h"
#include "log.h"

typedef Boxkite__Egress__Order order_t;
typedef Boxkite__Egress__Reply reply_t;

/* Accepts per listener per wake-up: one exec's burst does not starve the others. */
#define ACCEPT_BATCH 32
/* Each connection thread's stack: TLS, the resolver and 64 KiB of head fit in it. */
#define CONN_STACK (512u * 1024)

/* epoll tags that are not execs */
static char tag_channel;

static int reply(bk_channel *ch, uint64_t id, int errnum, const char *message, Boxkite__Egress__Ready *ready)
{
	reply_t r = BOXKITE__EGRESS__REPLY__INIT;

	r.id = id;
	r.errnum = errnum;
	r.message = (char *)(message ? message : "");
	if (ready) {
		r.kind_case = BOXKITE__EGRESS__REPLY__KIND_READY;
		r.ready = ready;
	}
	return bk_channel_send(ch, &r.base, NULL, 0, BK_CHANNEL_FORCE) < 0 ? -EPIPE : 0;
}

/* A connection past a bound: told so at once, audited, closed. */
static void refuse_now(bk_egress *eg, bk_egress_exec *ex, int fd, const char *why)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\nX-Boxkite-Egress: refused\r\n\r\nboxkite egress: %s\n",
			 strlen(why) + 17, why);
	bk_log_egress line = { .verdict = "refused", .exec_id = ex->id, .key_id = ex->key_id, .reason = why };

	/* Non-blocking, best effort: a fresh socket's buffer takes it. */
	if (send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		buf[0] = '\0';
	close(fd);
	bk_log_egress_decision(&line);
	BK_EGRESS_COUNT(eg, refused, 1);
}

static void accept_some(bk_egress *eg, bk_egress_exec *ex)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(ex->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		const char *why = NULL;
		bk_egress_conn *c;
		pthread_t t;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				bk_log(BK_LOG_ERROR, "egress: accept on exec %llu's listener: %s", (unsigned long long)ex->id,
				       strerror(errno));
			return;
		}
		c = bk_egress_conn_admit(eg, ex, fd, &why);
		if (!c) {
			refuse_now(eg, ex, fd, why);
			continue;
		}
		int r = pthread_create(&t, &eg->thread_attr, bk_egress_conn_main, c);
		if (r != 0) {
			/* Counted, never served: its counts back, then refused (ex stays: it is open). */
			bk_egress_conn_forget(c);
			refuse_now(eg, ex, fd, "no thread for the connection");
		}
	}
}

/* --- orders ---------------------------------------------------------------------------------- */

static bk_egress_exec *exec_find(bk_egress *eg, uint64_t id)
{
	for (bk_egress_exec *ex = eg->execs; ex; ex = ex->next)
		if (ex->id == id)
			return ex;
	return NULL;
}

/* Whether fd is a TCP socket listening on IPv4. */
static bool is_listener(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
		return false;
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_INET)
		return false;
	l = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) == 0 && v == SOCK_STREAM;
}

/* Open: an exec's grant and listener. Checked here again: within the ceiling, well-formed, a
 * listening socket. Refused ones are logged and their listener closed, so that the exec's
 * connections fail at once instead of waiting in a backlog nobody serves. */
static void serve_open(bk_egress *eg, int epfd, const Boxkite__Egress__Open *o, int fd)
{
	_cleanup_error_ bk_error *err = NULL;
	bk_egress_exec *ex = NULL;

	if (o->exec_id == 0 || o->n_grant == 0 || o->n_grant > BK_EGRESS_GRANT_MAX || strlen(o->key_id) > 64)
		bk_error_invalid(&err, "an exec id, 1-64 patterns and a key id of at most 64 bytes");
	else if (!is_listener(fd))
		bk_error_invalid(&err, "not a listening TCP socket");
	else if (!(ex = calloc(1, sizeof(*ex))))
		bk_error_errno(&err, ENOMEM, "an exec");
	else if (bk_egress_patterns_parse(o->grant, o->n_grant, &ex->grant, &err) == 0 &&
		 bk_egress_grant_beyond(ex->grant, o->n_grant, eg->ceiling, eg->n_ceiling) >= 0)
		bk_error_invalid(&err, "a grant beyond the ceiling");
	if (!err) {
		ex->n_grant = o->n_grant;
		pthread_mutex_lock(&eg->lock);
		if (exec_find(eg, o->exec_id)) {
			bk_error_invalid(&err, "an exec id already open");
		} else {
			ex->id = o->exec_id;
			snprintf(ex->key_id, sizeof(ex->key_id), "%s", o->key_id);
			ex->listener = fd;
			ex->refs = 1;
			ex->next = eg->execs;
			eg->execs = ex;
		}
		pthread_mutex_unlock(&eg->lock);
	}
	if (err) {
		bk_log(BK_LOG_ERROR, "egress: exec %llu refused: %s", (unsigned long long)o->exec_id, bk_error_msg(err));
		if (ex)
			bk_egress_exec_free(ex);
		close(fd);
		return;
	}
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = ex }) < 0) {
		bk_log(BK_LOG_ERROR, "egress: exec %llu: cannot serve its listener: %s", (unsigned long long)o->exec_id,
		       strerror(errno));
		/* Its connections fail at once rather than wait. */
		shutdown(fd, SHUT_RDWR);
	}
}

/* Close: no new connection; every open one shut down, so that each thread wakes and ends. */
static void serve_close(bk_egress *eg, int epfd, uint64_t id)
{
	bk_egress_exec *ex;

	pthread_mutex_lock(&eg->lock);
	for (bk_egress_exec **pp = &eg->execs; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			ex = *pp;
			*pp = ex->next;
			goto found;
		}
	}
	pthread_mutex_unlock(&eg->lock);
	return;
found:
	ex->closed = true;
	for (bk_egress_conn *c = ex->conn_list; c; c = c->next) {
		if (c->client >= 0)
			shutdown(c->client, SHUT_RDWR);
		if (c->upstream >= 0)
			shutdown(c->upstream, SHUT_RDWR);
	}
	epoll_ctl(epfd, EPOLL_CTL_DEL, ex->listener, NULL);
	close(ex->listener);
	ex->listener = -1;
	bk_egress_exec_unref(ex);
	pthread_mutex_unlock(&eg->lock);
}

/* Decode one packet: a canonical Order with an id, the descriptors its kind carries. NULL for
 * anything else (its descriptors closed). */
static order_t *decode(const uint8_t *buf, size_t len, int *fds, size_t nfds)
{
	order_t *o = boxkite__egress__order__unpack(NULL, len, buf);
	size_t want;

	if (!o || o->id == 0 || !bk_message_canonical(&o->base, len))
		goto bad;
	switch (o->kind_case) {
	case BOXKITE__EGRESS__ORDER__KIND_CONFIGURE:
	case BOXKITE__EGRESS__ORDER__KIND_CREDENTIAL:
	case BOXKITE__EGRESS__ORDER__KIND_OPEN:
		want = 1;
		break;
	case BOXKITE__EGRESS__ORDER__KIND_START:
	case BOXKITE__EGRESS__ORDER__KIND_CLOSE:
		want = 0;
		break;
	default:
		goto bad;
	}
	if (nfds != want)
		goto bad;
	return o;
bad:
	if (o)
		boxkite__egress__order__free_unpacked(o, NULL);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	return NULL;
}

/* --- set-up: Configure, Credential..., Start ------------------------------------------------- */

static int configure(bk_egress *eg, const Boxkite__Egress__Configure *c, int stats_fd, bk_error **err)
{
	struct stat st;
	void *page;
	int ret;

	if (c->n_ceiling == 0 || c->n_ceiling > BK_EGRESS_CEILING_MAX)
		return bk_error_invalid(err, "a ceiling of 1-256 patterns");
	if (!c->max_connections || !c->idle_ms || !c->connect_ms || c->header_max < 1024 || c->header_max > 65536)
		return bk_error_invalid(err, "limits of at least 1 (a head of 1-64 KiB)");
	if ((ret = bk_egress_patterns_parse(c->ceiling, c->n_ceiling, &eg->ceiling, err)) < 0)
		return bk_error_prefix(err, ret, "the ceiling");
	eg->n_ceiling = c->n_ceiling;
	eg->limits = (bk_egress_limits){ .max_connections = c->max_connections, .idle_ms = c->idle_ms,
					 .connect_ms = c->connect_ms, .header_max = c->header_max };
	/* The counters' page: exactly its size, and sealed so that it cannot shrink under the
	 * front's mapping (a SIGBUS there would be ours to cause). */
	if (fstat(stats_fd, &st) < 0 || st.st_size != BK_EGRESS_STATS_SIZE ||
	    (fcntl(stats_fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return bk_error_invalid(err, "the counters' memory is not a sealed page");
	page = mmap(NULL, BK_EGRESS_STATS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
	if (page == MAP_FAILED)
		return bk_error_errno(err, errno, "cannot map the counters");
	eg->stats = page;
	return 0;
}

/* The CA, when a credential came; the bundle the sandbox trusts in the answer. */
static int start(bk_egress *eg, bk_channel *ch, uint64_t id)
{
	Boxkite__Egress__Ready ready = BOXKITE__EGRESS__READY__INIT;
	bk_egress_host hosts[BK_BROKER_MAX];
	bk_error *err = NULL;
	char *pem = NULL;
	size_t len = 0;
	int ret;

	for (size_t i = 0; i < eg->broker.n; i++)
		hosts[i] = eg->broker.entries[i].host;
	if (eg->broker.n) {
		if ((ret = bk_mitm_new(&eg->mitm, hosts, eg->broker.n, &err)) < 0 ||
		    (ret = bk_mitm_bundle(eg->mitm, &pem, &len, &err)) < 0) {
			reply(ch, id, -ret, bk_error_msg(err), NULL);
			bk_error_free(err);
			return ret;
		}
	}
	ready.ca_bundle.data = (uint8_t *)pem;
	ready.ca_bundle.len = len;
	ret = reply(ch, id, 0, NULL, &ready);
	free(pem);
	return ret;
}

/* Take the set-up orders, waiting for each. 0 once Start is answered Ready. */
static int set_up(bk_egress *eg, bk_channel *ch)
{
	bool configured = false;

	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		const uint8_t *buf;
		size_t len, nfds = 0;
		int fds[BK_CHANNEL_MAX_FDS], ret;
		_cleanup_error_ bk_error *err = NULL;

		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
		ret = bk_channel_recv_raw(ch, &buf, &len, fds, &nfds, NULL);
		if (ret == -EAGAIN)
			continue;
		if (ret < 0)
			return ret;
		order_t *o = decode(buf, len, fds, nfds);
		if (!o) {
			bk_log(BK_LOG_ERROR, "egress: the executor's packet is not an order");
			return -EBADMSG;
		}
		switch (configured ? o->kind_case : BOXKITE__EGRESS__ORDER__KIND_CONFIGURE) {
		case BOXKITE__EGRESS__ORDER__KIND_CONFIGURE:
			if (configured || o->kind_case != BOXKITE__EGRESS__ORDER__KIND_CONFIGURE) {
				ret = bk_error_invalid(&err, "%s", configured ? "configured once" : "Configure comes first");
			} else {
				ret = configure(eg, o->configure, fds[0], &err);
				configured = ret == 0;
			}
			break;
		case BOXKITE__EGRESS__ORDER__KIND_CREDENTIAL:
			ret = bk_broker_add(&eg->broker, o->credential->destination, fds[0], &err);
			break;
		case BOXKITE__EGRESS__ORDER__KIND_START:
			ret = start(eg, ch, o->id);
			boxkite__egress__order__free_unpacked(o, NULL);
			return ret;
		default:
			ret = bk_error_invalid(&err, "not an order before Start");
			break;
		}
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		uint64_t id = o->id;
		boxkite__egress__order__free_unpacked(o, NULL);
		if (ret < 0) {
			bk_log(BK_LOG_ERROR, "egress: set-up: %s", bk_error_msg(err));
			reply(ch, id, -ret, bk_error_msg(err), NULL);
			return ret;
		}
	}
}

int bk_egress_main(int sock)
{
	bk_egress eg = { .n_ceiling = 0 };
	bk_channel ch;
	int epfd, status = 0;
	int64_t refresh_at;

	pthread_mutex_init(&eg.lock, NULL);
	pthread_attr_init(&eg.thread_attr);
	pthread_attr_setdetachstate(&eg.thread_attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&eg.thread_attr, CONN_STACK);
	if (bk_channel_init(&ch, sock, SIZE_MAX) < 0)
		return 1;
	if ((status = set_up(&eg, &ch)) < 0) {
		if (status != -EINVAL && status != -EBADMSG)
			bk_log(BK_LOG_ERROR, "egress: set-up: the channel: %s", strerror(-status));
		bk_channel_flush(&ch);
		bk_channel_fini(&ch);
		return 1;
	}
	status = 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, ch.fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_channel }) < 0) {
		bk_log(BK_LOG_ERROR, "egress: epoll: %s", strerror(errno));
		return 1;
	}
	bk_egress_own_refresh(&eg);
	refresh_at = bk_clock_monotonic_ms() + BK_EGRESS_OWN_REFRESH_MS;
	for (;;) {
		struct epoll_event evs[32];
		int64_t now = bk_clock_monotonic_ms();
		/* Answers (there are none after Start) and nothing else go out: flush what waits. */
		if (bk_channel_queued(&ch) && bk_channel_flush(&ch) < 0)
			break;
		int n = epoll_wait(epfd, evs, 32, refresh_at > now ? (int)(refresh_at - now) : 0);
		if (n < 0 && errno != EINTR) {
			status = 1;
			break;
		}
		if (bk_clock_monotonic_ms() >= refresh_at) {
			bk_egress_own_refresh(&eg);
			refresh_at = bk_clock_monotonic_ms() + BK_EGRESS_OWN_REFRESH_MS;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr != &tag_channel) {
				accept_some(&eg, evs[i].data.ptr);
				continue;
			}
			for (;;) {
				const uint8_t *buf;
				size_t len, nfds = 0;
				int fds[BK_CHANNEL_MAX_FDS];
				int r = bk_channel_recv_raw(&ch, &buf, &len, fds, &nfds, NULL);
				if (r == -EAGAIN)
					break;
				if (r < 0) {
					/* The executor went away (or broke the channel): so does the proxy. */
					status = r == -EPIPE ? 0 : 1;
					goto out;
				}
				order_t *o = decode(buf, len, fds, nfds);
				if (!o) {
					bk_log(BK_LOG_ERROR, "egress: the executor's packet is not an order");
					status = 1;
					goto out;
				}
				if (o->kind_case == BOXKITE__EGRESS__ORDER__KIND_OPEN)
					serve_open(&eg, epfd, o->open, fds[0]);
				else if (o->kind_case == BOXKITE__EGRESS__ORDER__KIND_CLOSE)
					serve_close(&eg, epfd, o->close->exec_id);
				else {
					bk_log(BK_LOG_ERROR, "egress: an order that comes before Start, after it");
					for (size_t k = 0; k < nfds; k++)
						close(fds[k]);
				}
				boxkite__egress__order__free_unpacked(o, NULL);
			}
		}
	}
out:
	/* Connection threads still running die with the process. */
	return status;
}
