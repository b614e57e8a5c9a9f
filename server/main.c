/* boxkited: start the privileged executor (its own program image), give up every privilege, serve. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "boundary/link.h"
#include "boundary/privdrop.h"
#include "boundary/privsep.h"
#include "files/files.h"
#include "files/watch.h"
#include "log.h"
#include "mkdir.h"
#include "rpc/methods.h"
#include "rpc/server.h"
#include "runs/exec.h"
#include "runs/process.h"
#include "runs/runs.h"
#include "session/reset.h"
#include "sync/store.h"
#include "sync/sync.h"
#include "transport/http.h"
#include "transport/proxy.h"

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

/* The soft descriptor limit up to the hard one (nothing here uses select()), and every bound on
 * descriptors within it (config.h). */
static int descriptors_fit(const bk_config *cfg, bk_error **err)
{
	size_t need = bk_config_descriptors(cfg);
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return bk_error_errno(err, errno, "getrlimit(RLIMIT_NOFILE)");
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return bk_error_errno(err, errno, "setrlimit(RLIMIT_NOFILE)");
	}
	if (rl.rlim_cur < need)
		return bk_error_set(err, BK_FAILED_PRECONDITION, EMFILE,
				    "boxkited may hold %zu descriptors with these settings and its limit is %llu: raise "
				    "RLIMIT_NOFILE (ulimit -n) or lower --max-connections, --contexts, --processes-max, "
				    "--uploads-max",
				    need, (unsigned long long)rl.rlim_cur);
	return 0;
}

/* Past BK_STOP_MAX_S, whatever still waits (a thread of nng's, a link that does not end) is given
 * up, and the process exits. */
static void *stop_watchdog(void *arg)
{
	(void)arg;
	sleep(BK_STOP_MAX_S);
	bk_log(BK_LOG_ERROR, "boxkited did not stop within %d s: exiting regardless", BK_STOP_MAX_S);
	_exit(1);
}

static void stop_watchdog_start(void)
{
	pthread_attr_t attr;
	pthread_t thread;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, stop_watchdog, NULL) != 0)
		bk_log(BK_LOG_ERROR, "no thread to bound the stop: it may wait on nng");
	pthread_attr_destroy(&attr);
}

/* How long --restore-from waits for the file worker (pod mode: for the sandbox container). */
#define RESTORE_WAIT_MS (120 * 1000)

/* file:// stores made and given to the front's user, and S3's credentials read, while we are
 * root and before the executor starts (it gets an empty environment anyway). */
static int sync_stores_prepare(const bk_config *cfg, bk_error **err)
{
	int ret = bk_store_s3_setup(cfg->s3_endpoint, cfg->s3_region, cfg->s3_path_style, cfg->s3_credentials, err);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < cfg->nsync_store && ret == 0; i++)
		ret = bk_store_prepare(cfg->sync_store[i], cfg->front_uid, err);
	return ret;
}

/* Every store as the front reaches it, once it is the front: a store it cannot use is refused now,
 * with what to change, rather than at the first push. */
static int sync_stores_check(const bk_config *cfg, bk_error **err)
{
	int ret = 0;

	for (size_t i = 0; i < cfg->nsync_store && ret == 0; i++)
		ret = bk_store_check(cfg->sync_store[i], err);
	return ret;
}

/* Give the executor its configuration — all of it, from our flags: it reads no file and no
 * environment of its own — and learn what it found; the answer feeds Health. */
static int executor_configure(bk_server *srv, bk_link *link, const bk_config *cfg, bk_error **err)
{
	Boxkite__Executor__Configure c = BOXKITE__EXECUTOR__CONFIGURE__INIT;
	Boxkite__Executor__Root roots[BK_ROOTS_MAX], *root_ptrs[BK_ROOTS_MAX];
	Boxkite__Executor__Egress egress = BOXKITE__EXECUTOR__EGRESS__INIT;
	Boxkite__Executor__EgressCredential creds[BK_EGRESS_CREDENTIALS_MAX], *cred_ptrs[BK_EGRESS_CREDENTIALS_MAX];
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	int ret;

	c.pod = cfg->pod;
	c.workspace = cfg->workspace;
	c.home = cfg->home;
	c.shm_size = cfg->shm_size;
	c.init_path = cfg->init_path;
	c.init_name = cfg->init_name;
	c.sandbox_uid = cfg->sandbox_uid;
	c.tmp_size = cfg->tmp_size;
	c.exec_memory = cfg->exec_memory;
	c.exec_pids = cfg->exec_pids;
	c.sandbox_memory = cfg->sandbox_memory;
	c.sandbox_pids = cfg->sandbox_pids;
	c.front_uid = cfg->front_uid;
	c.exec_nofile = cfg->exec_nofile;
	c.exec_nproc = cfg->exec_nproc;
	c.exec_fsize = cfg->exec_fsize;
	c.key_file = cfg->key_file ? cfg->key_file : "";
	for (size_t i = 0; i < cfg->roots.n; i++) {
		boxkite__executor__root__init(&roots[i]);
		roots[i].path = (char *)cfg->roots.root[i].path;
		roots[i].read_only = cfg->roots.root[i].read_only;
		root_ptrs[i] = &roots[i];
	}
	c.n_roots = cfg->roots.n;
	c.roots = root_ptrs;
	/* The egress proxy, which the executor starts and keeps: only with a ceiling. */
	if (cfg->negress_allow) {
		egress.ceiling = (char **)cfg->egress_allow;
		egress.n_ceiling = cfg->negress_allow;
		for (size_t i = 0; i < cfg->negress_credential; i++) {
			boxkite__executor__egress_credential__init(&creds[i]);
			creds[i].destination = cfg->egress_credential[i].destination;
			creds[i].path = cfg->egress_credential[i].path;
			cred_ptrs[i] = &creds[i];
		}
		egress.n_credentials = cfg->negress_credential;
		egress.credentials = cred_ptrs;
		egress.path = cfg->egress_path;
		egress.uid = cfg->egress_uid;
		egress.max_connections = cfg->egress_connections;
		egress.idle_ms = (uint32_t)cfg->egress_idle_ms;
		egress.connect_ms = (uint32_t)cfg->egress_connect_ms;
		egress.header_max = (uint32_t)cfg->egress_header_max;
		c.egress = &egress;
	}
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE;
	order.configure = &c;
	ret = bk_link_call(link, &order, &reply, NULL, NULL, err);
	if (ret < 0)
		return ret;
	bk_server_set_sandbox_state(srv, reply->pong);
	/* Local mode makes its sandbox at start-up: if that failed, say so and stop, rather than
	 * serve a sidecar that cannot exec. Pod mode waits for its sandbox. */
	if (!reply->pong->sandbox_ready && strcmp(reply->pong->mode, "local") == 0)
		ret = bk_error_set(err, BK_FAILED_PRECONDITION, 0, "the local sandbox did not start: %s", reply->message);
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
	int fd = -1, ret;
	size_t nfds = 1;

	(void)path; /* the executor opens the path it was configured with, the same */
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE;
	order.open_key_file = &open_key;
	ret = bk_link_call(arg, &order, &reply, &fd, &nfds, &err);
	bk_error_free(err);
	if (ret < 0)
		return ret;
	bk_reply_free(reply);
	return fd;
}

/* Wait for SIGTERM/SIGINT; reload the keys on SIGHUP, and each second if the file changed. */
/* Say what a warm pod waits for: a claim key that a Reset has not retired yet. */
static void claim_pending_log(bk_server *srv)
{
	bk_keyring_ref *ref = bk_keystore_get(srv->keystore);

	if (bk_keyring_ref_claim(ref))
		bk_log(BK_LOG_INFO, "keys: a warm pool's claim key: Health and Reset only, until a Reset installs the "
				    "tenant's key");
	bk_keyring_ref_put(ref);
}

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
	bk_link *link = NULL, *files = NULL;
	bk_error *err = NULL;
	pid_t executor = -1;
	sigset_t set;
	int ret, channel = -1;

	ret = bk_config_parse(&cfg, argc, argv, &err);
	if (ret != 0) {
		if (ret < 0)
			fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		bk_error_free(err);
		bk_config_free(&cfg);
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

	/* The state directory and the ipc:// sockets' directories made; the executor started — its
	 * own image, before the keys are read, so that no key was ever in its memory —; then the
	 * keys read as root, and then, before any thread, the front keeps only what listening and
	 * becoming --front-uid need (privdrop.c). */
	if ((ret = descriptors_fit(&cfg, &err)) < 0 || (ret = state_dir_make(cfg.state_dir, &err)) < 0 ||
	    (ret = bk_front_make_dirs(&cfg, &err)) < 0 ||
	    (ret = sync_stores_prepare(&cfg, &err)) < 0 ||
	    (ret = bk_link_new("executor", bk_server_executor_event, &srv, &link, &err)) < 0 ||
	    (ret = bk_privsep_start(&cfg, &channel, &executor, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	bk_link_attach(link, channel);
	if ((ret = bk_server_init(&srv, &cfg, &err)) < 0 || (ret = bk_methods_init(&srv, &err)) < 0 ||
	    (ret = bk_reset_init(&srv, &err)) < 0 || (ret = bk_privileges_narrow(&err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	srv.executor = link;
	bk_keystore_set_opener(srv.keystore, key_file_via_executor, link);
	/* The file worker's link: its channel comes with the executor's first FilesReady. */
	if ((ret = bk_link_new("file worker", bk_server_files_event, &srv, &files, &err)) < 0 ||
	    (ret = bk_link_start(files, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	srv.files_link = files;
	if ((ret = bk_runs_start(&srv, &err)) < 0 || (ret = bk_execs_start(&srv, &err)) < 0 ||
	    (ret = bk_processes_start(&srv, &err)) < 0 ||
	    (ret = bk_files_start(&srv, &err)) < 0 || (ret = bk_watches_start(&srv, &err)) < 0 ||
	    (ret = bk_sync_start(&srv, &err)) < 0 ||
	    (ret = bk_link_start(link, &err)) < 0 ||
	    (ret = executor_configure(&srv, link, &cfg, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	if (!bk_keystore_configured(srv.keystore))
		bk_log(BK_LOG_WARN, "no --key-file: every rpc but Health is refused");
	claim_pending_log(&srv);
	if ((ret = bk_front_listen(&srv, &err)) < 0 || (ret = bk_http_start(&srv, &err)) < 0 ||
	    (ret = bk_proxy_start(&srv, &err)) < 0 ||
	    (ret = bk_privileges_drop_to(cfg.front_uid, &err)) < 0 || (ret = sync_stores_check(&cfg, &err)) < 0) {
		fprintf(stderr, "boxkited: %s\n", bk_error_msg(err));
		goto out;
	}
	/* A session moving between pods: its workspace back before the first request. */
	if (cfg.restore_from && (ret = bk_sync_restore(&srv, cfg.restore_from, RESTORE_WAIT_MS, &err)) < 0) {
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
	/* However the stop goes, it ends: nothing below may keep boxkited alive past BK_STOP_MAX_S. */
	stop_watchdog_start();
	/* Order matters: the executor goes first (its teardown kills every command, and their
	 * exits come back as events), then Exec and the processes answer what is left, then the
	 * transport closes, and the run engine's thread stops last. */
	atomic_store(&srv.stopping, true);
	/* A sync waiting on its store ends now, so that nothing below waits for it. */
	bk_sync_cancel(&srv);
	bk_http_stop(&srv);
	bk_proxy_stop(&srv);
	bk_link_close(link);
	bk_link_close(files);
	/* A reset running fails on the closed links and answers: before its modules stop. */
	bk_reset_stop(&srv);
	bk_privsep_reap(executor);
	bk_execs_stop(&srv);
	bk_processes_stop(&srv);
	bk_sync_stop(&srv);
	bk_watches_stop(&srv);
	bk_files_stop(&srv);
	if (!bk_front_stop(&srv)) {
		/* nng is stuck in its own close: what it holds cannot be freed, nor waited for. */
		bk_config_free(&cfg);
		_exit(1);
	}
	/* Every call has ended: nothing reaches the runs any more. */
	bk_runs_stop(&srv);
	bk_execs_free(&srv);
	bk_processes_free(&srv);
	bk_watches_free(&srv);
	/* Last: until the front has stopped, a handler may still send an order. */
	bk_link_free(link);
	bk_link_free(files);
	bk_reset_fini(&srv);
	bk_server_fini(&srv);
	/* nng frees closed sockets and listeners on a thread of its own: waited for here, so that
	 * nothing is still being freed at exit (a leak checker saw a start that failed after the
	 * listeners were made exit before nng had freed them). */
	nng_fini();
	bk_error_free(err);
	bk_config_free(&cfg);
	return ret < 0 ? 1 : 0;
}
