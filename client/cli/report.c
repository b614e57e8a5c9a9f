/* What bkctl tells its operator: a failed call's message and exit code, failures of commands
 * that go on past them, byte counts and progress, the size of the terminal; and the connection
 * every command makes with the global options. */
#include "bkctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"

/* The client options the global options say: every connection bkctl makes uses these. */
bk_client_options bkctl_client_options(const bkctl *ctl)
{
	return (bk_client_options){ .key_file = ctl->key_file, .key_id = ctl->key_id, .timeout_ms = ctl->timeout_ms,
				    .tls_cert = ctl->tls_cert };
}

bk_client *bkctl_connect(bkctl *ctl, int *exit_code)
{
	bk_client_options o = bkctl_client_options(ctl);
	bk_client *c = NULL;
	bk_status st;

	if (bk_client_open(&c, ctl->url, &o, &st) != BK_OK) {
		*exit_code = bkctl_fail(ctl, &st);
		return NULL;
	}
	return c;
}

/* What to do about a failure, when bkctl can tell; NULL otherwise. */
static const char *fail_hint(const bkctl *ctl, const bk_status *st)
{
	switch (st->detail) {
	case BK_DETAIL_UNKNOWN_KEY:
		return ctl->key_file ? "boxkited has no key with this id: use its key (the file it was started with, or the "
				       "one the last bkctl reset --new-key installed), or name one of its keys with --key-id"
				     : "give the key file boxkited was started with (or the one the last bkctl reset "
				       "--new-key installed): --key-file PATH, or export BOXKITE_KEY_FILE=PATH";
	case BK_DETAIL_BAD_MAC:
		return "the key does not match the server's: use its key (the file boxkited was started with, or the one "
		       "the last bkctl reset --new-key installed), --key-file PATH or BOXKITE_KEY_FILE";
	case BK_DETAIL_AUTH_NOT_CONFIGURED:
		return "boxkited was started without --key-file: only health is served";
	case BK_DETAIL_CLAIM_KEY:
		return "this is a warm pool's claim key: it serves health and reset only; claim the sandbox with "
		       "bkctl reset --new-key TENANT-KEY-FILE (a key of the tenant's own), then use that key";
	case BK_DETAIL_STALE:
	case BK_DETAIL_FUTURE:
		return "this machine's clock and the server's differ by more than the server's --window";
	default:
		break;
	}
	if (st->code == BK_UNAVAILABLE && strncmp(st->message, "cannot connect", 14) == 0)
		return "is boxkited running and listening there? (--url URL or BOXKITE_URL)";
	return NULL;
}

int bkctl_fail(const bkctl *ctl, const bk_status *st)
{
	const char *hint = fail_hint(ctl, st);

	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_begin_object(&j, "error");
		bk_json_string(&j, "status", bk_status_name(st->code));
		bk_json_int(&j, "code", st->code);
		if (st->detail)
			bk_json_string(&j, "detail", bk_detail_name(st->detail));
		bk_json_bool(&j, "verified", st->verified);
		bk_json_string(&j, "message", st->message);
		if (hint)
			bk_json_string(&j, "hint", hint);
		bk_json_end_object(&j);
		bk_json_end_object(&j);
	}
	/* The message may quote names the sandbox chose: their unprintable bytes are escaped. */
	fprintf(stderr, "%s: %s%s%s: ", ctl->prog, bk_status_name(st->code), st->detail ? "/" : "",
		st->detail ? bk_detail_name(st->detail) : "");
	bkctl_put_text(stderr, st->message);
	fputc('\n', stderr);
	if (hint)
		fprintf(stderr, "%s: %s\n", ctl->prog, hint);
	switch (st->code) {
	case BK_UNAUTHENTICATED:
		return BKCTL_EXIT_AUTH;
	case BK_PERMISSION_DENIED:
		return st->detail == BK_DETAIL_CLAIM_KEY ? BKCTL_EXIT_AUTH : BKCTL_EXIT_STATUS;
	case BK_UNAVAILABLE:
		return st->detail == BK_DETAIL_AUTH_NOT_CONFIGURED ? BKCTL_EXIT_AUTH : BKCTL_EXIT_UNREACHABLE;
	case BK_DEADLINE_EXCEEDED:
	case BK_DATA_LOSS:
		return BKCTL_EXIT_UNREACHABLE;
	default:
		return BKCTL_EXIT_STATUS;
	}
}

void bkctl_human_bytes(uint64_t n, char *out, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	size_t u = 0;

	if (n < 1024) {
		snprintf(out, size, "%llu B", (unsigned long long)n);
		return;
	}
	v /= 1024;
	while (v >= 1024 && u + 1 < BK_ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	snprintf(out, size, "%.1f %s", v, units[u]);
}

void bkctl_progress_line(char *out, size_t size, uint64_t done, uint64_t total, double seconds,
			 size_t files_done, size_t files_total)
{
	enum { WIDTH = 20 };
	char bar[WIDTH + 1], d[32], t[32], rate[32];
	unsigned pct = total ? (unsigned)(done >= total ? 100 : done * 100 / total) : 100;

	for (int i = 0; i < WIDTH; i++)
		bar[i] = (unsigned)i < pct * WIDTH / 100 ? '#' : '-';
	bar[WIDTH] = '\0';
	bkctl_human_bytes(done, d, sizeof(d));
	bkctl_human_bytes(total, t, sizeof(t));
	bkctl_human_bytes(seconds > 0 ? (uint64_t)((double)done / seconds) : 0, rate, sizeof(rate));
	snprintf(out, size, "[%s] %3u%%  %s / %s  %s/s  %zu/%zu files", bar, pct, d, t, rate, files_done,
		 files_total);
}

void bkctl_failures_add(const bkctl *ctl, bkctl_failures *f, const char *path, const bk_status *st,
			const char *upload_id, char *resume)
{
	bkctl text = *ctl;
	bkctl_failure *e;
	int code;

	f->v = bkctl_grow(f->v, f->n, sizeof(*f->v));
	e = &f->v[f->n++];
	*e = (bkctl_failure){ .path = bkctl_strdup(path), .st = *st, .resume = resume };
	snprintf(e->upload_id, sizeof(e->upload_id), "%s", upload_id ? upload_id : "");
	/* On stderr as text: with -o json the failures are part of the command's one JSON object. */
	text.json = false;
	code = bkctl_fail(&text, st);
	if (resume)
		fprintf(stderr, "%s: the upload of %s can resume: %s\n", ctl->prog, path, resume);
	if (code > f->exit_code)
		f->exit_code = code;
}

void bkctl_failures_free(bkctl_failures *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].path);
		free(f->v[i].resume);
	}
	free(f->v);
	*f = (bkctl_failures){ 0 };
}

int bkctl_terminal_size(uint32_t *rows, uint32_t *cols)
{
	struct winsize ws;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
		return -errno;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return 0;
}

void bkctl_die_oom(void)
{
	fputs("bkctl: out of memory\n", stderr);
	exit(BKCTL_EXIT_STATUS);
}

char *bkctl_strdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		bkctl_die_oom();
	return d;
}

/* Room for element n of a vector of n that grows by doubling. */
void *bkctl_grow(void *v, size_t n, size_t size)
{
	size_t cap = n ? 2 * n : 1;

	if (n & (n - 1))
		return v;
	if (cap > SIZE_MAX / size || !(v = realloc(v, cap * size)))
		bkctl_die_oom();
	return v;
}
