#include "transport/door.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* How long accepting rests when no descriptor is left and none of the door's can be freed: the
 * listening socket stays readable, and the loop must not spin on it. */
#define ACCEPT_REST_MS 100

enum conn_state { READING, WRITING, CLOSING };

/* One connection at the door, in the door's list from the oldest deadline to the newest. */
struct conn {
	struct conn *prev, *next;
	enum conn_state state;
	int fd;
	int64_t deadline;
	char *out;              /* WRITING: the answer, out_len bytes, out_off of them sent */
	size_t out_len, out_off;
	size_t len;             /* READING: bytes of buf received */
	char peer[64];
	char buf[BK_DOOR_HEAD_MAX];
};

struct bk_door {
	int lfd, epfd, stop_fd;
	pthread_t thread;
	bool started;
	bk_door_fn fn;
	void *arg;
	char flag[32];
	struct conn *oldest, *newest;
	unsigned n;
	int64_t resume_at;      /* accepting rests until then (0: it does not) */
};

static const char tag_listen, tag_stop;

static void list_remove(bk_door *d, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		d->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		d->newest = c->prev;
	c->prev = c->next = NULL;
	d->n--;
}

static void list_append(bk_door *d, struct conn *c)
{
	c->prev = d->newest;
	c->next = NULL;
	if (d->newest)
		d->newest->next = c;
	else
		d->oldest = c;
	d->newest = c;
	d->n++;
}

/* Forget c; its descriptor is closed unless a handler took it. */
static void conn_drop(bk_door *d, struct conn *c, bool close_fd)
{
	list_remove(d, c);
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (close_fd)
		close(c->fd);
	free(c->out);
	free(c);
}

/* From now on c has another BK_DOOR_WAIT_MS, and goes to the end of the list (which stays in
 * deadline order). */
static void conn_renew(bk_door *d, struct conn *c, enum conn_state state, uint32_t events)
{
	c->state = state;
	c->deadline = bk_clock_monotonic_ms() + BK_DOOR_WAIT_MS;
	list_remove(d, c);
	list_append(d, c);
	epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &(struct epoll_event){ .events = events, .data.ptr = c });
}

/* Send what is left of the answer; once it is out, our side is shut and the connection lingers
 * (its input read and dropped) until the client closes, so that closing on unread bytes does
 * not reset the connection before the client read the answer. */
static void conn_write(bk_door *d, struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			conn_drop(d, c, true);
			return;
		}
		c->out_off += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	free(c->out);
	c->out = NULL;
	conn_renew(d, c, CLOSING, EPOLLIN | EPOLLRDHUP);
}

static void conn_answer(bk_door *d, struct conn *c, char *answer, size_t len)
{
	if (!answer) {
		conn_drop(d, c, true);
		return;
	}
	c->out = answer;
	c->out_len = len;
	c->out_off = 0;
	conn_renew(d, c, WRITING, EPOLLOUT);
	conn_write(d, c);
}

static void conn_read(bk_door *d, struct conn *c)
{
	const char *end;
	char *answer = NULL;
	size_t len = 0;
	ssize_t n;

	if (c->state == CLOSING) {
		char sink[4096];
		while ((n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			;
		if (n == 0 || errno != EAGAIN)
			conn_drop(d, c, true);
		return;
	}
	do
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		conn_drop(d, c, true);
		return;
	}
	c->len += (size_t)n;
	end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	if (!end) {
		if (c->len == sizeof(c->buf)) {
			static const char text[] = "the request's head is larger than 16 KiB\n";
			bk_door_response(431, "Request Header Fields Too Large", "text/plain; charset=utf-8", text,
					 sizeof(text) - 1, &answer, &len);
			conn_answer(d, c, answer, len);
		}
		return;
	}
	bk_door_request req = {
		.fd = c->fd,
		.head = c->buf,
		.head_len = (size_t)(end - c->buf) + 4,
		.rest = end + 4,
		.rest_len = c->len - (size_t)(end - c->buf) - 4,
		.peer = c->peer,
	};
	if (d->fn(d->arg, &req, &answer, &len) == 1)
		conn_drop(d, c, false);
	else
		conn_answer(d, c, answer, len);
}

/* Take every connection waiting in the kernel. A full door makes room by closing its oldest. */
static void accept_all(bk_door *d)
{
	for (;;) {
		struct sockaddr_storage from;
		socklen_t from_len = sizeof(from);
		struct conn *c;
		int fd = accept4(d->lfd, (struct sockaddr *)&from, &from_len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && d->oldest) {
				conn_drop(d, d->oldest, true);
				continue;
			}
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Nothing of ours to give up: rest, rather than spin on a readable socket. */
				d->resume_at = bk_clock_monotonic_ms() + ACCEPT_REST_MS;
				epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->lfd,
					  &(struct epoll_event){ .events = 0, .data.ptr = (void *)&tag_listen });
			}
			return;
		}
		if (d->n >= BK_DOOR_MAX)
			conn_drop(d, d->oldest, true);
		c = calloc(1, sizeof(*c));
		if (!c || epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd,
				    &(struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c }) < 0) {
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->state = READING;
		c->deadline = bk_clock_monotonic_ms() + BK_DOOR_WAIT_MS;
		if (getnameinfo((struct sockaddr *)&from, from_len, c->peer, sizeof(c->peer), NULL, 0, NI_NUMERICHOST))
			snprintf(c->peer, sizeof(c->peer), "?");
		list_append(d, c);
	}
}

static void *door_main(void *arg)
{
	bk_door *d = arg;

	for (;;) {
		struct epoll_event evs[32];
		int64_t now = bk_clock_monotonic_ms(), due = d->oldest ? d->oldest->deadline : -1;
		int timeout, n;

		if (d->resume_at && (due < 0 || d->resume_at < due))
			due = d->resume_at;
		timeout = due < 0 ? -1 : due > now ? (int)(due - now) : 0;
		n = epoll_wait(d->epfd, evs, BK_ARRAY_SIZE(evs), timeout);
		if (n < 0 && errno != EINTR) {
			bk_log(BK_LOG_ERROR, "%s: epoll_wait: %s", d->flag, strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == &tag_stop)
				return NULL;
			if (tag == &tag_listen) {
				accept_all(d);
				continue;
			}
			/* A connection dropped earlier in this round (evicted) may still have an event
			 * here: the list is the truth. */
			bool live = false;
			for (struct conn *c = d->newest; c && !live; c = c->prev)
				live = c == tag;
			if (!live)
				continue;
			struct conn *c = tag;
			if (c->state == WRITING)
				conn_write(d, c);
			else
				conn_read(d, c);
		}
		now = bk_clock_monotonic_ms();
		while (d->oldest && d->oldest->deadline <= now)
			conn_drop(d, d->oldest, true);
		if (d->resume_at && d->resume_at <= now) {
			d->resume_at = 0;
			epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->lfd,
				  &(struct epoll_event){ .events = EPOLLIN, .data.ptr = (void *)&tag_listen });
		}
	}
}

/* "http://HOST:PORT" (HOST a numeric address, [v6] in brackets) to a listening socket. */
static int listen_on(const char *url, const char *flag, bk_error **err)
{
	char host[256];
	const char *hp, *colon;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE },
			*ai = NULL;
	int fd, one = 1, rv;

	if (strncmp(url, "http://", 7) != 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s %s: expected http://HOST:PORT", flag, url);
	hp = url + 7;
	colon = strrchr(hp, ':');
	if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(host) || !colon[1])
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s %s: expected http://HOST:PORT", flag, url);
	if (hp[0] == '[' && colon[-1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(colon - hp - 2), hp + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)(colon - hp), hp);
	rv = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rv)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s %s: %s (a numeric address)", flag, url,
				    gai_strerror(rv));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		int errnum = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return bk_error_errno(err, errnum, "cannot listen on %s", url);
	}
	freeaddrinfo(ai);
	return fd;
}

int bk_door_open(const char *url, const char *flag, bk_door_fn fn, void *arg, bk_door **out, bk_error **err)
{
	bk_door *d = calloc(1, sizeof(*d));
	int rv;

	if (!d)
		return bk_error_errno(err, ENOMEM, "%s", flag);
	d->fn = fn;
	d->arg = arg;
	snprintf(d->flag, sizeof(d->flag), "%s", flag);
	d->epfd = d->stop_fd = -1;
	d->lfd = listen_on(url, flag, err);
	if (d->lfd < 0) {
		rv = d->lfd;
		free(d);
		return rv;
	}
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->epfd < 0 || d->stop_fd < 0 ||
	    epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->lfd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = (void *)&tag_listen }) < 0 ||
	    epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->stop_fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = (void *)&tag_stop }) < 0) {
		rv = bk_error_errno(err, errno, "%s", flag);
		bk_door_close(d);
		return rv;
	}
	if ((rv = pthread_create(&d->thread, NULL, door_main, d))) {
		bk_door_close(d);
		return bk_error_errno(err, rv, "%s: its thread", flag);
	}
	d->started = true;
	*out = d;
	return 0;
}

void bk_door_close(bk_door *d)
{
	uint64_t one = 1;

	if (!d)
		return;
	if (d->started) {
		if (write(d->stop_fd, &one, sizeof(one)) < 0)
			bk_log(BK_LOG_ERROR, "%s: cannot stop: %s", d->flag, strerror(errno));
		pthread_join(d->thread, NULL);
	}
	while (d->oldest)
		conn_drop(d, d->oldest, true);
	if (d->lfd >= 0)
		close(d->lfd);
	if (d->epfd >= 0)
		close(d->epfd);
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	free(d);
}

int bk_door_response(int code, const char *reason, const char *type, const char *body, size_t body_len, char **out,
		     size_t *len)
{
	char *text = NULL;
	int n = asprintf(&text,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
			 "Connection: close\r\n\r\n",
			 code, reason, type, body_len);

	if (n < 0)
		return -ENOMEM;
	char *all = realloc(text, (size_t)n + body_len);
	if (!all) {
		free(text);
		return -ENOMEM;
	}
	memcpy(all + n, body, body_len);
	*out = all;
	*len = (size_t)n + body_len;
	return 0;
}
