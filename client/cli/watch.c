/* bkctl watch: what changes under a sandbox directory, a line per change, as it changes. */
#include "bkctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "json.h"

/* One read's wait: short enough that a watch is never idle long, long enough to cost nothing. */
#define READ_WAIT_MS 10000

static const char *const kind_names[] = { "unknown", "created", "modified", "closed", "removed", "moved", "overflow" };
static const char *const end_names[] = { "", "expired", "reset", "removed", "limit", "stopped" };
static const char *const end_text[] = {
	"",
	"the watch expired (not read for a minute, or boxkited or its file worker restarted)",
	"a reset ended the watch",
	"the watched directory was removed or moved away",
	"the tree grew past the directories a sandbox's watches may hold",
	"stopped",
};

typedef struct watching {
	const bkctl *ctl;
	bk_client *c;
	char first[BK_WATCH_CURSOR_MAX]; /* the start's cursor: it names the watch, for the stop */
	int sigfd, stop[2];
	int64_t until_ms;                /* --timeout's end (CLOCK_MONOTONIC), or 0 */
	uint64_t count;                  /* --count: changes to print, then stop; 0: no end */
	atomic_bool ending;              /* ^C, SIGTERM, SIGHUP or --timeout: the watch was stopped */
} watching;

/* Ask the server to end the watch: the read it has waiting answers STOPPED at once. */
static void watch_end_now(watching *w)
{
	bk_status st;

	atomic_store(&w->ending, true);
	if (bk_watch_stop(w->c, w->first, &st) != BK_OK) {
		fprintf(stderr, "%s: cannot stop the watch (%s): ", w->ctl->prog, bk_status_name(st.code));
		bkctl_put_text(stderr, st.message);
		fputc('\n', stderr);
	}
}

/* ^C (SIGINT), SIGTERM, SIGHUP or --timeout's end stop the watch on the server, and the reading
 * loop ends with it; a second signal ends bkctl at once. */
static void *signal_thread(void *arg)
{
	watching *w = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = w->sigfd, .events = POLLIN }, { .fd = w->stop[0], .events = POLLIN } };
		struct signalfd_siginfo si;
		int64_t left = w->until_ms && !atomic_load(&w->ending) ? w->until_ms - bk_clock_monotonic_ms() : -1;
		int n = poll(p, 2, left < 0 ? -1 : (int)(left > 0 ? left : 0));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[1].revents)
			return NULL;
		if (n == 0) {
			watch_end_now(w);
			continue;
		}
		if (read(w->sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
			continue;
		if (atomic_load(&w->ending))
			_exit(128 + (int)si.ssi_signo);
		watch_end_now(w);
	}
}

/* A name as a line may show it: quoted as ls quotes it (STYLE.md §17) — on a pipe too, so that a
 * name with a newline in it cannot pass for a line of its own —, a directory's with a slash. */
static void put_path(const char *path, bool dir)
{
	_cleanup_free_ char *shown = NULL;

	if (dir && asprintf(&shown, "%s/", path) < 0)
		bkctl_die_oom();
	bkctl_quote_name(stdout, shown ? shown : path);
}

static void event_text(const bk_watch_event *e)
{
	const char *kind = e->kind > 0 && e->kind <= BK_WATCH_OVERFLOW ? kind_names[e->kind] : kind_names[0];

	if (e->kind == BK_WATCH_OVERFLOW) {
		if (e->lost)
			printf("overflow: %llu events lost, list again\n", (unsigned long long)e->lost);
		else
			printf("overflow: events lost, list again\n");
		return;
	}
	if (e->kind == BK_WATCH_MOVED && !e->path[0]) {
		fputs("moved in ", stdout);
		put_path(e->to, e->directory);
	} else if (e->kind == BK_WATCH_MOVED && !e->to[0]) {
		fputs("moved out ", stdout);
		put_path(e->path, e->directory);
	} else if (e->kind == BK_WATCH_MOVED) {
		fputs("moved ", stdout);
		put_path(e->path, e->directory);
		fputs(" -> ", stdout);
		put_path(e->to, e->directory);
	} else {
		printf("%s ", kind);
		put_path(e->path, e->directory);
	}
	fputc('\n', stdout);
}

static void event_json(const bk_watch_event *e)
{
	bk_json j = { .out = stdout };

	bk_json_begin_object(&j, NULL);
	if (e->kind > 0 && e->kind <= BK_WATCH_OVERFLOW)
		bk_json_string(&j, "kind", kind_names[e->kind]);
	else
		bk_json_int(&j, "kind", e->kind);
	if (e->kind != BK_WATCH_OVERFLOW) {
		bk_json_string(&j, "path", e->path);
		if (e->kind == BK_WATCH_MOVED)
			bk_json_string(&j, "to", e->to);
		bk_json_bool(&j, "directory", e->directory);
	} else {
		bk_json_uint(&j, "lost", e->lost);
	}
	bk_json_end_object(&j);
}

static bool watch_option(bkctl *ctl, watching *w, int opt, const char *val)
{
	uint32_t ms;
	char *end;

	if (opt == 'n') {
		errno = 0;
		w->count = strtoull(val, &end, 10);
		if (*val < '1' || *val > '9' || *end || errno) {
			fprintf(stderr, "%s: --count %s: expected a number of changes, 1 or more\n", ctl->prog, val);
			return false;
		}
		return true;
	}
	if (opt != BKCTL_OPT_TIMEOUT)
		return false;
	if (bkctl_parse_seconds(val, &ms) < 0) {
		fprintf(stderr, "%s: --timeout %s: expected seconds (0 < S <= 86400)\n", ctl->prog, val);
		return false;
	}
	w->until_ms = bk_clock_monotonic_ms() + ms;
	return true;
}

/* Read and print until the watch ends. The exit code. */
static int watch_loop(watching *w, const char *path)
{
	const bkctl *ctl = w->ctl;
	char cursor[BK_WATCH_CURSOR_MAX];
	uint64_t printed = 0;
	bk_status st;

	memcpy(cursor, w->first, sizeof(cursor));
	for (;;) {
		bk_watch_batch b;
		int code = bk_watch_read(w->c, cursor, READ_WAIT_MS, 0, &b, &st);

		if (code != BK_OK)
			return bkctl_fail(ctl, &st);
		for (size_t i = 0; i < b.n && (!w->count || printed < w->count); i++, printed++)
			(ctl->json ? event_json : event_text)(&b.events[i]);
		memcpy(cursor, b.cursor, sizeof(cursor));
		bk_watch_batch_free(&b);
		if (w->count && printed == w->count) {
			/* As many as asked: the watch is not left behind. */
			fflush(stdout);
			atomic_store(&w->ending, true);
			(void)bk_watch_stop(w->c, w->first, NULL);
			return ferror(stdout) ? BKCTL_EXIT_STATUS : BKCTL_EXIT_OK;
		}
		if (fflush(stdout) != 0 || ferror(stdout)) {
			/* Our reader went away (| head): the watch is not left behind. */
			if (!atomic_load(&w->ending))
				(void)bk_watch_stop(w->c, w->first, NULL);
			return errno == EPIPE ? BKCTL_EXIT_OK : BKCTL_EXIT_STATUS;
		}
		if (!b.end)
			continue;
		/* Stopped by us (an EXPIRED answer: the stop came between two reads): a clean end. */
		if (atomic_load(&w->ending) && (b.end == BK_WATCH_END_STOPPED || b.end == BK_WATCH_END_EXPIRED))
			return BKCTL_EXIT_OK;
		if (ctl->json) {
			bk_json j = { .out = stdout };
			bk_json_begin_object(&j, NULL);
			bk_json_string(&j, "end", b.end > 0 && b.end <= BK_WATCH_END_STOPPED ? end_names[b.end] : "unknown");
			bk_json_end_object(&j);
			fflush(stdout);
		}
		fprintf(stderr, "%s: ", ctl->prog);
		bkctl_put_text(stderr, path);
		fprintf(stderr, ": %s\n", b.end > 0 && b.end <= BK_WATCH_END_STOPPED ? end_text[b.end] : "the watch ended");
		return BKCTL_EXIT_STATUS;
	}
}

int bkctl_watch(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	watching w = { .ctl = ctl, .sigfd = -1, .stop = { -1, -1 } };
	const char *path;
	pthread_t thread;
	uint32_t dirs = 0;
	bk_status st;
	sigset_t set;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1)
		if (!watch_option(ctl, &w, opt, optarg))
			return BKCTL_EXIT_USAGE;
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 1))
		return BKCTL_EXIT_USAGE;
	path = optind < argc ? bkctl_sandbox_arg(argv[optind]) : ".";
	/* The signals are blocked in every thread (nng's too, which bkctl_connect starts): the
	 * signal thread takes them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 || (w.sigfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    pipe2(w.stop, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: cannot set up signal handling: %s\n", ctl->prog, strerror(errno));
		code = BKCTL_EXIT_STATUS;
		goto out;
	}
	if (!(w.c = bkctl_connect(ctl, &code)))
		goto out;
	if (bk_watch_start(w.c, path, w.first, &dirs, &st) != BK_OK) {
		code = bkctl_fail(ctl, &st);
		goto out;
	}
	/* Said once the watch is there: from here on nothing that changes is missed. */
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "watching", path);
		bk_json_uint(&j, "directories", dirs);
		bk_json_end_object(&j);
	} else {
		fprintf(stderr, "%s: watching ", ctl->prog);
		bkctl_put_text(stderr, path);
		fprintf(stderr, " (%u director%s)\n", dirs, dirs == 1 ? "y" : "ies");
	}
	fflush(stdout);
	if (pthread_create(&thread, NULL, signal_thread, &w) != 0) {
		fprintf(stderr, "%s: cannot start the signal thread\n", ctl->prog);
		(void)bk_watch_stop(w.c, w.first, NULL);
		code = BKCTL_EXIT_STATUS;
		goto out;
	}
	code = watch_loop(&w, path);
	bk_close(w.stop[1]);
	w.stop[1] = -1;
	pthread_join(thread, NULL);
out:
	bk_client_close(w.c);
	bk_close(w.sigfd);
	bk_close(w.stop[0]);
	bk_close(w.stop[1]);
	return code;
}
