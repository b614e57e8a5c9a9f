#include "server.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "handlers.h"
#include "methods.h"
#include "log.h"
#include "replaylog.h"

int bk_server_init(bk_server *srv, const bk_config *cfg, bk_error **err)
{
	int ret;

	srv->cfg = *cfg;
	srv->started_ms = bk_clock_monotonic_ms();
	srv->mode = "none";
	ret = cfg->key_env ? bk_keystore_open_env(cfg->key_env, &srv->keystore, err)
			   : bk_keystore_open(cfg->key_file, &srv->keystore, err);
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
	if ((ret = bk_methods_init(srv, err)) < 0)
		return ret;
	if (bk_metrics_init(&srv->metrics, srv->nmethods) < 0)
		return bk_error_errno(err, ENOMEM, "metrics");
	return 0;
}

void bk_server_executor_event(void *arg, Boxkite__Executor__Reply *event, int *fds, size_t nfds)
{
	bk_server *srv = arg;

	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
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
	switch (event->kind_case) {
	case BOXKITE__EXECUTOR__REPLY__KIND_PONG:
		bk_server_set_sandbox_state(srv, event->pong);
		if (!event->pong->sandbox_ready)
			bk_log(BK_LOG_WARN, "sandbox not ready: %s", event->message);
		else
			bk_log(BK_LOG_INFO, "sandbox ready (%s mode)", event->pong->mode);
		break;
	case BOXKITE__EXECUTOR__REPLY__KIND_EXITED:
		if (srv->execs)
			bk_execs_exited(srv, event->exited);
		break;
	default:
		bk_log(BK_LOG_ERROR, "unexpected event from the executor");
		break;
	}
	protobuf_c_message_free_unpacked(&event->base, NULL);
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

void bk_server_fini(bk_server *srv)
{
	bk_front_stop(srv);
	bk_replay_log_free(srv->replay_log);
	bk_replay_free(srv->replay);
	bk_keystore_free(srv->keystore);
	if (srv->tls)
		nng_tls_config_free(srv->tls);
	free(srv->methods);
	bk_metrics_fini(&srv->metrics);
	memset(srv, 0, sizeof(*srv));
}
