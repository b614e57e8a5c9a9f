/* bkctl sync push | pull | ls: snapshots of the workspace in a store boxkited was configured with
 * (--sync-store). On a terminal, a progress line from SyncStatus, polled on a second connection
 * while the push or pull runs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bkctl.h"
#include "clock.h"
#include "json.h"

#define PATTERNS_MAX 64
#define POLL_NS (200 * 1000 * 1000)

typedef struct sync_opts {
	bk_sync_request rq;
	const char *patterns[PATTERNS_MAX];
} sync_opts;

/* --- the progress line ------------------------------------------------------------------------- */

struct bar {
	bkctl *ctl;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, drawn;
};

static void *bar_thread(void *arg)
{
	struct bar *b = arg;
	struct timespec start;
	int code;
	bk_client *c = bkctl_connect(b->ctl, &code);

	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_mutex_lock(&b->lock);
	while (c && !b->done) {
		struct timespec until;
		bk_sync_progress p;
		bk_status st;
		char line[200];

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += POLL_NS;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&b->cond, &b->lock, &until);
		if (b->done)
			break;
		pthread_mutex_unlock(&b->lock);
		code = bk_sync_status(c, &p, &st);
		pthread_mutex_lock(&b->lock);
		if (code != BK_OK || !p.running || b->done)
			continue;
		if (strcmp(p.operation, "push") == 0) {
			/* A push learns its total only at its end: what it did so far, this push's own
			 * work (an unchanged file is walked, not read: its bytes are not this push's). */
			char walked[32], up[32];
			bkctl_human_bytes(p.bytes_done, walked, sizeof(walked));
			bkctl_human_bytes(p.bytes_uploaded, up, sizeof(up));
			snprintf(line, sizeof(line), "%llu files (%s) walked, %llu read, %llu blobs uploaded (%s)  %.1f s",
				 (unsigned long long)p.files_done, walked, (unsigned long long)p.files_read,
				 (unsigned long long)p.blobs_uploaded, up, (double)bk_elapsed_us(&start) / 1e6);
		} else {
			bkctl_progress_line(line, sizeof(line), p.bytes_done, p.bytes_total, (double)bk_elapsed_us(&start) / 1e6,
					    (size_t)p.files_done, (size_t)p.files_total);
		}
		fprintf(stderr, "\r\033[K%s %s", p.operation, line);
		b->drawn = true;
	}
	if (b->drawn)
		fputs("\r\033[K", stderr);
	pthread_mutex_unlock(&b->lock);
	if (c)
		bk_client_close(c);
	return NULL;
}

/* Start the line when stderr is a terminal and the output is text: true if it runs. */
static bool bar_start(struct bar *b, bkctl *ctl)
{
	*b = (struct bar){ .ctl = ctl };
	if (ctl->json || !isatty(STDERR_FILENO))
		return false;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	return pthread_create(&b->thread, NULL, bar_thread, b) == 0;
}

static void bar_stop(struct bar *b, bool running)
{
	if (!running)
		return;
	pthread_mutex_lock(&b->lock);
	b->done = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
}

/* --- options ------------------------------------------------------------------------------------ */

static bool parse(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, bool push, bool pull,
		  sync_opts *o, int *exit_code)
{
	int opt, help = 0;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		bool ok = true;
		switch (opt) {
		case BKCTL_OPT_TO:
			ok = push;
			o->rq.url = optarg;
			break;
		case BKCTL_OPT_FROM:
			ok = !push;
			o->rq.url = optarg;
			break;
		case BKCTL_OPT_ID:
			ok = push || pull;
			o->rq.snapshot = optarg;
			break;
		case BKCTL_OPT_PATH:
			ok = push || pull;
			o->rq.path = optarg;
			break;
		case 'x':
			ok = (push || pull) && o->rq.n_exclude < PATTERNS_MAX;
			if (ok)
				o->patterns[o->rq.n_exclude++] = optarg;
			break;
		case BKCTL_OPT_MIRROR:
			ok = pull;
			o->rq.mirror = true;
			break;
		case BKCTL_OPT_DEFAULT_EXCLUDES:
			ok = push;
			o->rq.default_excludes = true;
			break;
		default:
			ok = false;
		}
		if (!ok) {
			if (opt != '?')
				fprintf(stderr, "%s: that option is not one of this subcommand's\n", ctl->prog);
			*exit_code = BKCTL_EXIT_USAGE;
			return false;
		}
	}
	if (help) {
		*exit_code = BKCTL_EXIT_OK;
		return false;
	}
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0)) {
		*exit_code = BKCTL_EXIT_USAGE;
		return false;
	}
	o->rq.exclude = o->patterns;
	return true;
}

/* --- push, pull, ls ----------------------------------------------------------------------------- */

static void result_json(const bk_sync_result *r, bool push)
{
	bk_json j = { .out = stdout };

	bk_json_begin_object(&j, NULL);
	bk_json_string(&j, "snapshot", r->snapshot);
	bk_json_uint(&j, "files", r->files);
	bk_json_uint(&j, "bytes", r->bytes);
	bk_json_uint(&j, "directories", r->directories);
	bk_json_uint(&j, "symlinks", r->symlinks);
	bk_json_uint(&j, "skipped", r->skipped);
	if (push) {
		bk_json_uint(&j, "blobs", r->blobs);
		bk_json_uint(&j, "blobs_uploaded", r->blobs_uploaded);
		bk_json_uint(&j, "bytes_uploaded", r->bytes_uploaded);
		bk_json_uint(&j, "files_read", r->files_read);
	} else {
		bk_json_uint(&j, "blobs_fetched", r->blobs_fetched);
		bk_json_uint(&j, "removed", r->removed);
	}
	bk_json_end_object(&j);
}

static int run_sync(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, bool push)
{
	sync_opts o = { 0 };
	bk_sync_result r;
	struct bar bar;
	bool bar_on;
	bk_status st;
	bk_client *c;
	char b[32], up[32];
	int code;

	if (!parse(ctl, cmd, argc, argv, push, !push, &o, &code))
		return code;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	bar_on = bar_start(&bar, ctl);
	code = push ? bk_sync_push(c, &o.rq, &r, &st) : bk_sync_pull(c, &o.rq, &r, &st);
	bar_stop(&bar, bar_on);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		result_json(&r, push);
		return BKCTL_EXIT_OK;
	}
	bkctl_human_bytes(r.bytes, b, sizeof(b));
	if (push) {
		bkctl_human_bytes(r.bytes_uploaded, up, sizeof(up));
		printf("pushed %s: %llu file%s (%s), %llu director%s, %llu symlink%s; %llu of %llu blob%s uploaded (%s), "
		       "%llu file%s read, %llu skipped\n",
		       r.snapshot, (unsigned long long)r.files, r.files == 1 ? "" : "s", b,
		       (unsigned long long)r.directories, r.directories == 1 ? "y" : "ies", (unsigned long long)r.symlinks,
		       r.symlinks == 1 ? "" : "s", (unsigned long long)r.blobs_uploaded, (unsigned long long)r.blobs,
		       r.blobs == 1 ? "" : "s", up, (unsigned long long)r.files_read, r.files_read == 1 ? "" : "s",
		       (unsigned long long)r.skipped);
	} else {
		printf("pulled %s: %llu file%s (%s), %llu director%s, %llu symlink%s; %llu removed, %llu skipped\n",
		       r.snapshot, (unsigned long long)r.files, r.files == 1 ? "" : "s", b,
		       (unsigned long long)r.directories, r.directories == 1 ? "y" : "ies", (unsigned long long)r.symlinks,
		       r.symlinks == 1 ? "" : "s", (unsigned long long)r.removed, (unsigned long long)r.skipped);
	}
	return BKCTL_EXIT_OK;
}

static int run_ls(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	sync_opts o = { 0 };
	bk_snapshot_info *v;
	bk_status st;
	bk_client *c;
	size_t n;
	int code;

	if (!parse(ctl, cmd, argc, argv, false, false, &o, &code))
		return code;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_sync_list(c, o.rq.url, &v, &n, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_array(&j, NULL);
		for (size_t i = 0; i < n; i++) {
			bk_json_begin_object(&j, NULL);
			bk_json_string(&j, "snapshot", v[i].name);
			bk_json_uint(&j, "files", v[i].files);
			bk_json_uint(&j, "bytes", v[i].bytes);
			bk_json_int(&j, "created_ms", v[i].created_ms);
			bk_json_string(&j, "path", v[i].path);
			bk_json_end_object(&j);
		}
		bk_json_end_array(&j);
		fputc('\n', stdout);
	} else {
		for (size_t i = 0; i < n; i++) {
			char when[64], b[32];
			time_t t = (time_t)(v[i].created_ms / 1000);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%SZ", &tm);
			bkctl_human_bytes(v[i].bytes, b, sizeof(b));
			printf("%s  %s  %8llu files  %10s  %s\n", v[i].name, when, (unsigned long long)v[i].files, b,
			       v[i].path);
		}
	}
	bk_snapshot_list_free(v, n);
	return BKCTL_EXIT_OK;
}

/* sync prefix: where the key's snapshots are in every store (docs/PROTOCOL.md, "Sync"), for an
 * operator who hands a tenant its snapshots back (--restore-from STORE/PREFIX). Computed here
 * from the key: nothing is asked of a server. */
static int run_prefix(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	_cleanup_(bk_keyring_freep) bk_keyring *ring = NULL;
	char prefix[BK_STORE_PREFIX_LEN + 1];
	const bk_key *key;
	int help = 0, c;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1)
		return BKCTL_EXIT_USAGE;
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	if ((c = bkctl_key(ctl, "a store prefix is the key's", &ring, &key)) != 0)
		return c;
	if (bk_key_store_prefix(key, prefix) < 0) {
		fprintf(stderr, "%s: HMAC-SHA256 failed in libcrypto\n", ctl->prog);
		return BKCTL_EXIT_STATUS;
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "key_id", key->id);
		bk_json_string(&j, "prefix", prefix);
		bk_json_end_object(&j);
	} else {
		printf("%s\n", prefix);
	}
	return BKCTL_EXIT_OK;
}

int bkctl_sync(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const char *sub = argc >= 2 ? argv[1] : "";
	char prog[64];

	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
		bkctl_usage(stdout, cmd);
		return BKCTL_EXIT_OK;
	}
	snprintf(prog, sizeof(prog), "%s %s", ctl->prog, sub);
	ctl->prog = prog;
	/* The subcommand's options follow it: parse from there. */
	optind = 1;
	if (strcmp(sub, "push") == 0)
		return run_sync(ctl, cmd, argc - 1, argv + 1, true);
	if (strcmp(sub, "pull") == 0)
		return run_sync(ctl, cmd, argc - 1, argv + 1, false);
	if (strcmp(sub, "ls") == 0)
		return run_ls(ctl, cmd, argc - 1, argv + 1);
	if (strcmp(sub, "prefix") == 0)
		return run_prefix(ctl, cmd, argc - 1, argv + 1);
	fprintf(stderr, "bkctl sync: push, pull, ls or prefix, not '%s'\n", sub);
	return bkctl_usage_error(cmd);
}
