#include "nngclose.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

/* Shared by the caller and the closing thread; the last of the two frees it. */
struct closing {
	pthread_mutex_t lock;
	pthread_cond_t done_cv;
	nng_socket sock;
	bool done;
	int refs;
};

static void closing_put(struct closing *c)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last) {
		pthread_cond_destroy(&c->done_cv);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}

static void *close_main(void *arg)
{
	struct closing *c = arg;

	nng_close(c->sock);
	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->done_cv);
	pthread_mutex_unlock(&c->lock);
	closing_put(c);
	return NULL;
}

int bk_nng_close(nng_socket s, int ms)
{
	struct closing *c = calloc(1, sizeof(*c));
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t thread;
	struct timespec deadline;
	bool done;

	if (!c) {
		/* No room to wait apart: close here, as nng_close() would. */
		nng_close(s);
		return 0;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->done_cv, &attr);
	pthread_condattr_destroy(&attr);
	c->sock = s;
	c->refs = 2;
	pthread_attr_init(&tattr);
	pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &tattr, close_main, c) != 0) {
		pthread_attr_destroy(&tattr);
		c->refs = 1;
		closing_put(c);
		nng_close(s);
		return 0;
	}
	pthread_attr_destroy(&tattr);
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (long)(ms % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&c->lock);
	while (!c->done && pthread_cond_timedwait(&c->done_cv, &c->lock, &deadline) == 0)
		;
	done = c->done;
	pthread_mutex_unlock(&c->lock);
	closing_put(c);
	return done ? 0 : -ETIMEDOUT;
}
