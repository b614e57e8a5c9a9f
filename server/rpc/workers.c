#include "rpc/workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct job {
	struct job *next;
	void (*fn)(void *arg, void *scratch);
	void *arg;
};

struct worker {
	struct bk_workers *pool;
	void *scratch;
	pthread_t thread;
	bool started;
};

struct bk_workers {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	bool stopping;
	unsigned n;
	struct worker workers[];
};

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	bk_workers *w = me->pool;

	for (;;) {
		struct job *j;

		pthread_mutex_lock(&w->lock);
		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->cond, &w->lock);
		j = w->head;
		if (j) {
			w->head = j->next;
			if (!w->head)
				w->tail = NULL;
		}
		pthread_mutex_unlock(&w->lock);
		if (!j)
			return NULL; /* stopping, and nothing left */
		j->fn(j->arg, me->scratch);
		free(j);
	}
}

int bk_workers_start(bk_workers **out, unsigned threads, size_t scratch_size, bk_error **err)
{
	bk_workers *w = calloc(1, sizeof(*w) + threads * sizeof(struct worker));
	int rv;

	if (!w)
		return bk_error_errno(err, ENOMEM, "workers");
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->n = threads;
	for (unsigned i = 0; i < threads; i++) {
		struct worker *me = &w->workers[i];
		me->pool = w;
		if (!(me->scratch = malloc(scratch_size ? scratch_size : 1))) {
			bk_workers_stop(w);
			return bk_error_errno(err, ENOMEM, "worker scratch memory");
		}
		if ((rv = pthread_create(&me->thread, NULL, worker_main, me))) {
			bk_workers_stop(w);
			return bk_error_errno(err, rv, "worker thread");
		}
		me->started = true;
	}
	*out = w;
	return 0;
}

int bk_workers_submit(bk_workers *w, void (*fn)(void *arg, void *scratch), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->next = NULL;
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		free(j);
		return -ESHUTDOWN;
	}
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void bk_workers_stop(bk_workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->n; i++) {
		if (w->workers[i].started)
			pthread_join(w->workers[i].thread, NULL);
		free(w->workers[i].scratch);
	}
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}
