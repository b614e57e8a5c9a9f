/* The egress proxy's shared state, behind its one lock (egress.h): the execs and their
 * connections, the counts the bounds are checked on, the sidecar's own addresses. What both the
 * main thread (egress.c) and the connection threads (conn.c) call. */
#include "egress.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* --- the sidecar's own addresses ------------------------------------------------------------- */

void bk_egress_own_refresh(bk_egress *eg)
{
	struct ifaddrs *ifa = NULL;
	uint8_t own[BK_EGRESS_OWN_MAX][16];
	size_t n = 0;

	if (getifaddrs(&ifa) < 0) {
		bk_log(BK_LOG_ERROR, "egress: cannot list the sidecar's addresses: %s", strerror(errno));
		return;
	}
	for (struct ifaddrs *i = ifa; i && n < BK_EGRESS_OWN_MAX; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
			memcpy(own[n], mapped, 12);
			memcpy(own[n++] + 12, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			memcpy(own[n++], &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
		}
	}
	freeifaddrs(ifa);
	pthread_mutex_lock(&eg->lock);
	memcpy(eg->own, own, n * 16);
	eg->n_own = n;
	pthread_mutex_unlock(&eg->lock);
}

const char *bk_egress_refusal(bk_egress *eg, const uint8_t addr[16], uint16_t port)
{
	const char *why;

	pthread_mutex_lock(&eg->lock);
	why = bk_egress_addr_refusal(addr, port, eg->ceiling, eg->n_ceiling, (const uint8_t(*)[16])eg->own, eg->n_own);
	pthread_mutex_unlock(&eg->lock);
	return why;
}

/* --- execs and connections ----------------------------------------------------------------------------- */

void bk_egress_exec_free(bk_egress_exec *ex)
{
	free(ex->grant);
	free(ex);
}

void bk_egress_exec_unref(bk_egress_exec *ex)
{
	if (--ex->refs == 0)
		bk_egress_exec_free(ex);
}

void bk_egress_conn_close_fd(bk_egress_conn *c, int *fd)
{
	pthread_mutex_lock(&c->eg->lock);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	pthread_mutex_unlock(&c->eg->lock);
}

bool bk_egress_conn_set_upstream(bk_egress_conn *c, int fd)
{
	bool ok;

	pthread_mutex_lock(&c->eg->lock);
	ok = !c->ex->closed;
	if (ok)
		c->upstream = fd;
	pthread_mutex_unlock(&c->eg->lock);
	return ok;
}

/* Under the lock: c out of its exec's list, its counts given back. */
static void conn_unlink(bk_egress_conn *c)
{
	bk_egress *eg = c->eg;
	bk_egress_exec *ex = c->ex;

	if (c->prev)
		c->prev->next = c->next;
	else
		ex->conn_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ex->conns--;
	eg->conns_total--;
	__atomic_fetch_sub(&eg->stats->open, 1, __ATOMIC_RELAXED);
	bk_egress_exec_unref(ex);
}

void bk_egress_conn_end(bk_egress_conn *c)
{
	pthread_mutex_lock(&c->eg->lock);
	if (c->client >= 0)
		close(c->client);
	if (c->upstream >= 0)
		close(c->upstream);
	conn_unlink(c);
	pthread_mutex_unlock(&c->eg->lock);
	free(c);
}

void bk_egress_conn_forget(bk_egress_conn *c)
{
	pthread_mutex_lock(&c->eg->lock);
	conn_unlink(c);
	pthread_mutex_unlock(&c->eg->lock);
	free(c);
}

bk_egress_conn *bk_egress_conn_admit(bk_egress *eg, bk_egress_exec *ex, int fd, const char **why)
{
	bk_egress_conn *c = calloc(1, sizeof(*c));

	*why = NULL;
	pthread_mutex_lock(&eg->lock);
	if (!c)
		*why = "out of memory";
	else if (ex->conns >= eg->limits.max_connections)
		*why = "too many connections from this command at once";
	else if (eg->conns_total >= BK_EGRESS_CONNS_TOTAL)
		*why = "too many connections at once";
	if (!*why) {
		c->eg = eg;
		c->ex = ex;
		c->client = fd;
		c->upstream = -1;
		c->next = ex->conn_list;
		if (ex->conn_list)
			ex->conn_list->prev = c;
		ex->conn_list = c;
		ex->conns++;
		ex->refs++;
		eg->conns_total++;
		__atomic_fetch_add(&eg->stats->open, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&eg->lock);
	if (*why) {
		free(c);
		return NULL;
	}
	return c;
}
