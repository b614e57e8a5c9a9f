/* boxkited: fork the privileged executor, give up every privilege, serve. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"
#include "files.h"
#include "http.h"
#include "link.h"
#include "log.h"
#include "mkdir.h"
#include "privdrop.h"
#include "server.h"

/* boxkited's private state directory (the replay log; local mode's workspace and home beneath
 * it by default): made with missing parents, then root's and mode 0700 whatever it was, so that
 * no other user of the host reaches what the sandbox wrote there. */
static int state_dir_make(const char *dir, bk_error **err)
{
	char failed[4096] = "";
	struct stat st;
	int ret = bk_mkdir_p(dir, 0755, 0700, true, failed, sizeof(failed));

	if (ret < 0)
		return bk_error_errno(err, -ret, "cannot create %s (for --state-dir %s)", failed[0] ? failed : dir, dir);
	if (lstat(dir, &st) < 0)
		return bk_error_errno(err, errno, "cannot stat the state directory %s", dir);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return bk_error_set(err, BK_FAILED_PRECONDITION, ENOTDIR,
				    "the state directory %s is not a directory of boxkited's own user", dir);
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) < 0)
		return bk_error_errno(err, errno, "chmod 0700 %s", dir);
	return 0;
}

/* Ask the executor what it found; the answer feeds Health. */
static int executor_hello(bk_server *srv, bk_link *link, bk_error **err)
{
	Boxkite__Executor__Ping ping = BOXKITE__EXECUTOR__PING__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	int ret;

	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_PING;
	order.ping = &ping;
	ret = bk_link_call(link, &order, &reply, NULL, NULL, err);
	if (ret < 0)
		return ret;
	if (reply->errnum || reply->kind_case != BOXKITE__EXECUTOR__REPLY__KIND_PONG) {
		ret = bk_error_set(err, BK_INTERNAL, reply->errnum ? reply->errnum : EPROTO, "executor: %s: %s",
				   reply->step, reply->message);
	} else {
		bk_server_set_sandbox_state(srv, reply->pong);
		/* Local mode makes its sandbox at start-up: if that failed, say so and stop, rather
		 * than serve a sidecar that cannot exec. Pod mode waits for its sandbox. */
		if (!reply->pong->sandbox_ready && strcmp(reply->pong->mode, "local") == 0)
			ret = bk_error_set(err, BK_FAILED_PRECONDITION, 0, "the local sandbox did not start: %s",
					   reply->message);
	}
	bk_reply_free(reply);
	return ret;
}

/* The key file, for reloads: the front runs as a user that may not open it; the executor does. */
static int key_file_via_executor(void *arg, const char *path)
{
	Boxkite__Executor__OpenKeyFile open_key = BOXKITE__EXECUTOR__OPEN_KEY_FILE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	bk_error *err = NULL;
	int fd = -1;
	size_t nfds = 1;
	int ret;

	(void)path; /* the executor opens the path it was configured with, the same */
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE;
	order.open_key_file = &open_key;
	if (bk_link_call(arg, &order, &reply, &fd, &nfds, &err) < 0) {
		bk_error_free(err);
		return -EPIPE;
	}
	ret = reply->errnum ? -reply->errnum : nfds == 1 ? fd : -EPROTO;
	if (ret < 0 && nfds == 1)
		close(fd);
	bk_reply_free(reply);
	return ret;
}

/* Wait for SIGTERM/SIGINT; reload the keys on SIGHUP, and each second if the file changed. */
static void serve_until_signal(bk_server *srv, const sigset_t *set)
{
	struct timespec tick = { .tv_sec = 1 };

	for (;;) {
		bk_error *err = NULL;
		int sig = sigtimedwait(set, NULL, &tick);

		if (sig == SIGTERM || sig == SIGINT) {
			bk_log(BK_LOG_INFO, "signal %d: shutting down", sig);
			return;
		}
		bk_files_expire(srv);
		bk_http_tick(srv);
		int ret = bk_keystore_reload(srv->keystore, sig == SIGHUP, &err);
		if (ret > 0)
			bk_log(BK_LOG_INFO, "key file reloaded");
		else if (ret < 0)
			bk_log(BK_LOG_ERROR, "key file not reloaded, keeping the current keys: %s", bk_error_msg(err));
		bk_error_free(err);
	}
}

int main(int argc, char **argv)
{
	bk_server srv = { 0 };
	bk_config cfg;
	bk_link *link = NULL;
	bk_error *err = NULL;
	sigset_t set;
	int ret;

	ret = bk_config_parse(&cfg, argc, argv, &err);
	if (ret != 0) {
		if (ret < 0)
			fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		bk_error_free(err);
		return ret > 0 ? 0 : 2;
	}
	/* ipc:// socket files and anything else created are the owner's only. */
	umask(077);
	/* Descriptors 0-2 must be open, or a pipe made later could land on one of them. */
	for (int fd = open("/dev/null", O_RDWR | O_CLOEXEC); fd >= 0 && fd <= 2; fd = open("/dev/null", O_RDWR | O_CLOEXEC))
		;
	/* Signals are taken by sigtimedwait in the main thread; every thread inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The state directory and the ipc:// sockets' directories made, the keys read as root, the
	 * executor forked, and then, before any thread, the front keeps only what listening and
	 * becoming --front-uid need (privdrop.c). */
	if ((ret = state_dir_make(cfg.state_dir, &err)) < 0 || (ret = bk_front_make_dirs(&cfg, &err)) < 0 ||
	    (ret = bk_server_init(&srv, &cfg, &err)) < 0 || (ret = bk_link_spawn(&cfg, &link, &err)) < 0 ||
	    (ret = bk_privileges_narrow(&err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	srv.executor = link;
	bk_link_on_event(link, bk_server_executor_event, &srv);
	bk_keystore_set_opener(srv.keystore, key_file_via_executor, link);
	if ((ret = bk_execs_start(&srv, &err)) < 0 || (ret = bk_files_start(&srv, &err)) < 0 ||
	    (ret = bk_link_start(link, &err)) < 0 ||
	    (ret = executor_hello(&srv, link, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	if (!bk_keystore_configured(srv.keystore))
		bk_log(BK_LOG_WARN, "no --key-file: every rpc but Health is refused");
	if ((ret = bk_front_listen(&srv, &err)) < 0 || (ret = bk_http_start(&srv, &err)) < 0 ||
	    (ret = bk_privileges_drop_to(cfg.front_uid, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	bk_front_serve(&srv);
	bk_http_tick(&srv);
	for (size_t i = 0; i < cfg.nlisten; i++)
		bk_log(BK_LOG_INFO, "listening on %s", cfg.listen[i]);
	serve_until_signal(&srv, &set);
	if (atomic_load(&srv.executor_lost))
		ret = -1;
out:
	/* Order matters: the executor goes first (its teardown kills every command, and their
	 * exits come back as events), then the exec thread answers what is left, then the
	 * transport closes. */
	atomic_store(&srv.stopping, true);
	bk_http_stop(&srv);
	bk_link_close(link);
	bk_execs_stop(&srv);
	bk_files_stop(&srv);
	bk_front_stop(&srv);
	bk_link_free(link); /* last: until the front has stopped, a handler may still send an order */
	bk_server_fini(&srv);
	bk_error_free(err);
	bk_config_free(&cfg);
	return ret < 0 ? 1 : 0;
}
