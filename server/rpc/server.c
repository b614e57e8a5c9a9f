#include "rpc/server.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth/replaylog.h"
#include "boundary/link.h"
#include "files/watch.h"
#include "log.h"
#include "runs/runs.h"

int bk_server_init(bk_server *srv, const bk_config *cfg, bk_error **err)
{
	int ret;

	srv->cfg = *cfg;
	atomic_init(&srv->served_since_ms, bk_clock_monotonic_ms());
	srv->mode = "none";
	ret = cfg->key_env ? bk_keystore_open_env(cfg->key_env, cfg->claim, &srv->keystore, err)
			   : bk_keystore_open(cfg->key_file, cfg->claim, &srv->keystore, err);
	if (ret < 0)
		return ret;
	srv->replay = bk_replay_new(cfg->replay_capacity, cfg->window_ms, cfg->replay_answer_cap);
	if (!srv->replay)
		return bk_error_errno(err, ENOMEM, "replay cache");
	/* Read as root, like the keys: the Secret's files are root's, mode 0400. */
	if (cfg->tls_cert && (ret = bk_tls_server_config(cfg->tls_cert, cfg->tls_key, &srv->tls, err)) < 0)
		return ret;
	if (cfg->state_dir) {
		ret = bk_replay_log_open(cfg->state_dir, cfg->window_ms, srv->replay, bk_clock_realtime_ms(),
					 &srv->replay_log, err);
		if (ret < 0)
			return ret;
		if (bk_replay_log_restored(srv->replay_log))
			bk_log(BK_LOG_INFO, "replay log: %zu requests of the last %lld s refused if re-sent",
			       bk_replay_log_restored(srv->replay_log), (long long)(cfg->window_ms / 1000));
	}
	if (bk_metrics_init(&srv->metrics, boxkite__v1__sandbox__descriptor.n_methods) < 0)
		return bk_error_errno(err, ENOMEM, "metrics");
	return 0;
}

/* The executor's events, one row each: what comes with them, and who takes them. */
static void on_state(bk_server *srv, const bk_reply *event, int *fds)
{
	(void)fds;
	bk_server_set_sandbox_state(srv, event->pong);
	if (!event->pong->sandbox_ready)
		bk_log(BK_LOG_WARN, "sandbox not ready: %s", event->message);
	else
		bk_log(BK_LOG_INFO, "sandbox ready (%s mode)", event->pong->mode);
}

static void on_exited(bk_server *srv, const bk_reply *event, int *fds)
{
	(void)fds;
	bk_runs_exited(srv, event->exited);
}

/* A file worker serves the sandbox now: file orders go to it (its channel is the link's). */
static void on_files_ready(bk_server *srv, const bk_reply *event, int *fds)
{
	(void)event;
	if (srv->files_link)
		bk_link_attach(srv->files_link, fds[0]);
	else
		close(fds[0]);
}

/* The egress proxy runs: its counters' page, for /metrics. */
static void on_egress_ready(bk_server *srv, const bk_reply *event, int *fds)
{
	int ret = bk_metrics_egress_map(&srv->metrics, fds[0]);

	(void)event;
	if (ret < 0)
		bk_log(BK_LOG_ERROR, "the egress proxy's counters: %s", strerror(-ret));
	close(fds[0]);
}

static const struct event_row {
	Boxkite__Executor__Reply__KindCase kind;
	size_t nfds;
	void (*take)(bk_server *srv, const bk_reply *event, int *fds); /* owns fds */
} event_rows[] = {
	{ BOXKITE__EXECUTOR__REPLY__KIND_PONG, 0, on_state },
	{ BOXKITE__EXECUTOR__REPLY__KIND_EXITED, 0, on_exited },
	{ BOXKITE__EXECUTOR__REPLY__KIND_FILES_READY, 1, on_files_ready },
	{ BOXKITE__EXECUTOR__REPLY__KIND_EGRESS_READY, 1, on_egress_ready },
};

void bk_server_executor_event(void *arg, Boxkite__Executor__Reply *event, int *fds, size_t nfds)
{
	bk_server *srv = arg;
	const struct event_row *row = NULL;

	if (!event) {
		/* The executor is gone, and with it every command and the sandbox: a sidecar that can
		 * only answer UNAVAILABLE while Health says ready must not go on. Stop (main takes the
		 * signal) and exit non-zero, so that whatever supervises boxkited restarts it. */
		if (!atomic_load(&srv->stopping)) {
			bk_log(BK_LOG_ERROR, "the executor is gone: shutting down");
			atomic_store(&srv->sandbox_ready, false);
			atomic_store(&srv->executor_lost, true);
			kill(getpid(), SIGTERM);
		}
		return;
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(event_rows); i++)
		if (event_rows[i].kind == event->kind_case)
			row = &event_rows[i];
	if (row && !event->errnum && nfds == row->nfds) {
		row->take(srv, event, fds);
	} else {
		bk_log(BK_LOG_ERROR, "an event from the executor of kind %d with %zu descriptors: not one it sends",
		       (int)event->kind_case, nfds);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
	}
	bk_reply_free(event);
}

/* The file worker's one event: what changed under a watch (server/files/watch.c). Its channel
 * closing ends what it watched, and is logged (the executor starts another when it died, and the
 * front gets it with FilesReady). */
void bk_server_files_event(void *arg, Boxkite__Executor__Reply *event, int *fds, size_t nfds)
{
	bk_server *srv = arg;

	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (event && event->kind_case == BOXKITE__EXECUTOR__REPLY__KIND_CHANGES && !event->errnum && !nfds) {
		bk_watches_changes(srv, event->changes);
	} else if (event) {
		bk_log(BK_LOG_ERROR, "an event from the file worker of kind %d with %zu descriptors: not one it sends",
		       (int)event->kind_case, nfds);
	} else if (!atomic_load(&srv->stopping)) {
		bk_log(BK_LOG_INFO, "the file worker's channel closed");
		bk_watches_worker_lost(srv);
	}
	bk_reply_free(event);
}

void bk_server_set_sandbox_state(bk_server *srv, const Boxkite__Executor__Pong *pong)
{
	atomic_store(&srv->sandbox_ready, pong->sandbox_ready);
	/* Written once at start-up before the transport runs, and only re-written with the same
	 * text by later events: the profile and mode never change while serving. */
	if (!srv->profile[0])
		snprintf(srv->profile, sizeof(srv->profile), "%s", pong->isolation_profile);
	if (!srv->mode_buf[0]) {
		snprintf(srv->mode_buf, sizeof(srv->mode_buf), "%s", pong->mode);
		srv->mode = srv->mode_buf;
	}
}

void bk_server_fail(bk_server *srv, const char *why)
{
	snprintf(srv->failure, sizeof(srv->failure), "%s", why);
	atomic_store(&srv->gate, BK_GATE_FAILED);
}

const char *bk_server_failure(const bk_server *srv)
{
	return atomic_load(&srv->gate) == BK_GATE_FAILED ? srv->failure : NULL;
}

void bk_server_fini(bk_server *srv)
{
	bk_replay_log_free(srv->replay_log);
	bk_replay_free(srv->replay);
	bk_keystore_free(srv->keystore);
	if (srv->tls)
		nng_tls_config_free(srv->tls);
	free(srv->methods);
	bk_metrics_fini(&srv->metrics);
	memset(srv, 0, sizeof(*srv));
}
