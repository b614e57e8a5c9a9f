/* bkctl's file commands: cp (either way, whole trees, several files at once), ls, stat, rm,
 * mkdir, mv. A sandbox path is written ":PATH" in cp, as kubectl writes POD:PATH; the other
 * commands only take sandbox paths, and the colon is optional there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bkctl.h"
#include "cleanup.h"
#include "clock.h"
#include "fullio.h"
#include "json.h"
#include "mkdir.h"

/* A bk_file_info freed when it goes out of scope (the library fills it whole, or leaves it empty). */
#define _cleanup_file_info_ _cleanup_(bk_file_info_free)

#define CP_JOBS_DEFAULT 8
#define CP_JOBS_MAX 64
#define PROGRESS_INTERVAL 0.1 /* seconds between redraws of the progress line */

/* --- the parts without a server -------------------------------------------------------------- */

bkctl_path bkctl_path_parse(const char *arg)
{
	if (arg[0] == ':')
		return (bkctl_path){ .path = arg[1] ? arg + 1 : ".", .remote = true };
	return (bkctl_path){ .path = arg, .remote = false };
}

const char *bkctl_sandbox_arg(const char *arg)
{
	const char *path = arg[0] == ':' ? arg + 1 : arg;

	return path[0] ? path : ".";
}

int bkctl_cp_direction(int n, char *const *args, const char **why)
{
	int remote_sources = 0;

	if (n < 2) {
		*why = "give one or more sources and a destination";
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!args[i][0]) {
			*why = "an empty path";
			return -1;
		}
		remote_sources += i < n - 1 && bkctl_path_parse(args[i]).remote;
	}
	if (remote_sources != 0 && remote_sources != n - 1) {
		*why = "the sources must all be local or all in the sandbox";
		return -1;
	}
	if (bkctl_path_parse(args[n - 1]).remote == (remote_sources != 0)) {
		*why = remote_sources ? "both sides are in the sandbox: use bkctl mv, or cp with bkctl exec"
				      : "neither side is in the sandbox: write a sandbox path as :PATH";
		return -1;
	}
	return remote_sources ? BKCTL_CP_DOWNLOAD : BKCTL_CP_UPLOAD;
}

void bkctl_path_base(const char *path, char *out, size_t size)
{
	size_t end = strlen(path), start;

	while (end > 1 && path[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (start == end && end > 0) /* "/" */
		start = end - 1;
	snprintf(out, size, "%.*s", (int)(end - start), path + start);
}

char *bkctl_path_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir);
	char *p;

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	if (asprintf(&p, "%.*s%s%s", (int)dl, dir, dl && dir[dl - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

char *bkctl_cp_target(const char *dst, bool dst_is_dir, const char *src)
{
	char base[4096];

	if (!dst_is_dir)
		return strdup(dst);
	bkctl_path_base(src, base, sizeof(base));
	return bkctl_path_join(dst, base);
}

int bkctl_parse_mode(const char *s, uint32_t *mode)
{
	char *end;
	unsigned long m;

	if (!*s || strspn(s, "01234567") != strlen(s))
		return -1;
	m = strtoul(s, &end, 8);
	if (*end || m > 0777)
		return -1;
	*mode = (uint32_t)m;
	return 0;
}

void bkctl_mode_string(int type, uint32_t mode, char out[11])
{
	static const char types[] = { [BK_FILE_REGULAR] = '-', [BK_FILE_DIRECTORY] = 'd', [BK_FILE_SYMLINK] = 'l' };
	static const char rwx[] = "rwxrwxrwx";

	out[0] = type > 0 && type < (int)sizeof(types) && types[type] ? types[type] : '?';
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	if (mode & 04000)
		out[3] = out[3] == 'x' ? 's' : 'S';
	if (mode & 02000)
		out[6] = out[6] == 'x' ? 's' : 'S';
	if (mode & 01000)
		out[9] = out[9] == 'x' ? 't' : 'T';
	out[10] = '\0';
}

/* s as one sh word: as it is when that is safe, else in single quotes. */
static void shell_quote(FILE *out, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";

	if (*s && strspn(s, safe) == strlen(s)) {
		fputs(s, out);
		return;
	}
	fputc('\'', out);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", out); /* end the quotes, a quoted quote, quote again */
		else
			fputc(*s, out);
	}
	fputc('\'', out);
}

char *bkctl_cp_resume_command(const char *flags, const char *upload_id, const char *src, const char *dst)
{
	char *buf = NULL, *remote;
	size_t len;
	FILE *out = open_memstream(&buf, &len);

	if (!out || asprintf(&remote, ":%s", dst) < 0)
		bkctl_die_oom();
	fprintf(out, "bkctl cp %s%s--resume ", flags, flags[0] ? " " : "");
	shell_quote(out, upload_id);
	fputc(' ', out);
	shell_quote(out, src);
	fputc(' ', out);
	shell_quote(out, remote);
	free(remote);
	if (fclose(out) != 0)
		bkctl_die_oom();
	return buf;
}

static void failures_json(bk_json *j, const bkctl_failures *f)
{
	bk_json_begin_array(j, "errors");
	for (size_t i = 0; i < f->n; i++) {
		const bkctl_failure *e = &f->v[i];
		bk_json_begin_object(j, NULL);
		bk_json_string(j, "path", e->path);
		bk_json_string(j, "status", bk_status_name(e->st.code));
		bk_json_int(j, "code", e->st.code);
		bk_json_string(j, "message", e->st.message);
		if (e->upload_id[0])
			bk_json_string(j, "upload_id", e->upload_id);
		if (e->resume)
			bk_json_string(j, "resume", e->resume);
		bk_json_end_object(j);
	}
	bk_json_end_array(j);
}

static const char *digest_hex(const uint8_t sha256[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", sha256[i]);
	return hex;
}

void bkctl_cp_summary_json(FILE *out, const bkctl_cp_summary *s)
{
	bk_json j = { .out = out };
	long long ms = (long long)(s->seconds * 1000 + 0.5);

	bk_json_begin_object(&j, NULL);
	bk_json_uint(&j, "files", s->files);
	bk_json_uint(&j, "directories", s->directories);
	bk_json_uint(&j, "symlinks", s->symlinks);
	bk_json_uint(&j, "bytes", s->bytes);
	bk_json_begin_array(&j, "skipped");
	for (size_t i = 0; i < s->n_skipped; i++) {
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "path", s->skipped[i].path);
		bk_json_string(&j, "reason", s->skipped[i].reason);
		bk_json_end_object(&j);
	}
	bk_json_end_array(&j);
	if (s->n_digests) {
		bk_json_begin_array(&j, "sha256");
		for (size_t i = 0; i < s->n_digests; i++) {
			char hex[65];
			bk_json_begin_object(&j, NULL);
			bk_json_string(&j, "path", s->digests[i].path);
			bk_json_string(&j, "sha256", digest_hex(s->digests[i].sha256, hex));
			bk_json_end_object(&j);
		}
		bk_json_end_array(&j);
	}
	failures_json(&j, &s->failures);
	/* bk_json writes integers only: the milliseconds follow the whole seconds directly. */
	bk_json_int(&j, "seconds", ms / 1000);
	fprintf(out, ".%03lld", ms % 1000);
	bk_json_end_object(&j);
}

void bkctl_cp_summary_text(FILE *out, const bkctl_cp_summary *s)
{
	char bytes[32], rate[32];

	bkctl_human_bytes(s->bytes, bytes, sizeof(bytes));
	bkctl_human_bytes(s->seconds > 0 ? (uint64_t)((double)s->bytes / s->seconds) : 0, rate, sizeof(rate));
	fprintf(out, "copied %llu file%s (%s), %llu director%s and %llu symlink%s in %.2f s (%s/s)",
		(unsigned long long)s->files, s->files == 1 ? "" : "s", bytes, (unsigned long long)s->directories,
		s->directories == 1 ? "y" : "ies", (unsigned long long)s->symlinks, s->symlinks == 1 ? "" : "s",
		s->seconds, rate);
	if (s->n_skipped)
		fprintf(out, "; skipped %zu", s->n_skipped);
	if (s->failures.n)
		fprintf(out, "; %zu failed", s->failures.n);
	fputc('\n', out);
	for (size_t i = 0; i < s->n_skipped; i++) {
		fputs("skipped ", out);
		bkctl_put_text(out, s->skipped[i].path);
		fprintf(out, " (%s)\n", s->skipped[i].reason);
	}
	bkctl_cp_digests_text(out, s);
}

void bkctl_cp_digests_text(FILE *out, const bkctl_cp_summary *s)
{
	/* As sha256sum prints them: two spaces between the hash and the name. */
	for (size_t i = 0; i < s->n_digests; i++) {
		char hex[65];
		fprintf(out, "%s  ", digest_hex(s->digests[i].sha256, hex));
		bkctl_put_text(out, s->digests[i].path);
		fputc('\n', out);
	}
}

/* --- shared by the commands ------------------------------------------------------------------ */

/* Parse the command's options (each handled by on_opt); false on a usage error or after --help,
 * with *exit_code set. */
typedef bool (*option_fn)(bkctl *ctl, void *arg, int opt, const char *optarg_);

static bool parse_options(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, option_fn on_opt, void *arg,
			  int min_args, int max_args, int *exit_code)
{
	int opt, help = 0;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (opt == '?' || opt == ':' || !on_opt(ctl, arg, opt, optarg)) {
			*exit_code = BKCTL_EXIT_USAGE;
			return false;
		}
	}
	if (help) {
		*exit_code = BKCTL_EXIT_OK;
		return false;
	}
	if (!bkctl_args_fit(ctl, cmd, argc, argv, min_args, max_args)) {
		*exit_code = BKCTL_EXIT_USAGE;
		return false;
	}
	return true;
}

static void info_json(bk_json *j, const char *key, const bk_file_info *i)
{
	static const char *const types[] = { "unknown", "regular", "directory", "symlink", "other" };

	bk_json_begin_object(j, key);
	bk_json_string(j, "path", i->path);
	bk_json_string(j, "type", types[i->type >= 0 && i->type <= BK_FILE_OTHER ? i->type : 0]);
	bk_json_uint(j, "size", i->size);
	bk_json_uint(j, "mode", i->mode);
	bk_json_uint(j, "uid", i->uid);
	bk_json_uint(j, "gid", i->gid);
	bk_json_int(j, "mtime_ns", i->mtime_ns);
	if (i->type == BK_FILE_SYMLINK)
		bk_json_string(j, "symlink_target", i->symlink_target);
	bk_json_end_object(j);
}

static void mtime_string(int64_t mtime_ns, bool precise, char *out, size_t size)
{
	time_t t = (time_t)(mtime_ns / 1000000000);
	struct tm tm;
	size_t n;

	localtime_r(&t, &tm);
	n = strftime(out, size, precise ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d %H:%M", &tm);
	if (precise)
		snprintf(out + n, size - n, ".%09lld %s", (long long)(mtime_ns % 1000000000), tm.tm_zone);
}

/* One line of ls -l. */
static void print_long(const bk_file_info *i, const char *name, bool tty)
{
	char mode[11], mtime[64];

	bkctl_mode_string(i->type, i->mode, mode);
	mtime_string(i->mtime_ns, false, mtime, sizeof(mtime));
	printf("%s %5u:%-5u %12llu %s ", mode, i->uid, i->gid, (unsigned long long)i->size, mtime);
	bkctl_put_name(stdout, name, tty);
	if (i->type == BK_FILE_SYMLINK) {
		fputs(" -> ", stdout);
		bkctl_put_name(stdout, i->symlink_target, tty);
	}
	putchar('\n');
}

/* Entries of a remote directory are names in it, never paths that lead elsewhere. */
static bool safe_entry_name(const char *name)
{
	return name[0] && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/');
}

void bkctl_path_dir(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, size, ".");
	else
		snprintf(out, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* --- cp -------------------------------------------------------------------------------------- */

typedef struct cp_file {
	char *src, *dst;
	uint64_t size;
	uint32_t mode;
	bool has_sha256;    /* copied with --sha256: sha256 is its plain SHA-256, checked both sides */
	uint8_t sha256[32];
	uint64_t reported;  /* bytes of it counted in the progress line */
	bool from_stdin;    /* cp - :FILE: the source is our standard input (cp_run.stdin_copy) */
	bool to_stdout;     /* cp :FILE -: the copy is our standard output */
	struct cp_run *run;
} cp_file;

typedef struct cp_link {
	char *src, *dst, *target;
} cp_link;

typedef struct cp_dir {
	char *path;         /* the destination directory */
	uint32_t mode;      /* the source directory's, when from_source */
	bool from_source;
} cp_dir;

typedef struct cp_run {
	bkctl *ctl;
	bk_client *client;
	int direction;      /* enum bkctl_cp_direction */
	bool recursive, no_clobber, keep_mode, compress, sha256, bar;
	const char *resume_id;
	unsigned jobs;
	mode_t umask;
	char flags[32];     /* the transfer options, for the resume command */
	int stdin_copy;     /* cp - :FILE: our standard input, spooled to an unnamed file; else -1 */

	/* The plan: directories to make first (parents before children), then files. */
	cp_dir *dirs;
	size_t n_dirs;
	cp_file *files;
	size_t n_files;
	uint64_t total_bytes;
	cp_link *links;     /* made last, once every file is in: none can be written through */
	size_t n_links;

	/* Shared by the transfer threads, under lock. */
	pthread_mutex_t lock;
	size_t next, files_done;
	uint64_t bytes_done;
	struct timespec start;  /* CLOCK_MONOTONIC */
	double last_draw;       /* seconds after start */
	bkctl_cp_summary sum;
} cp_run;

/* Set by SIGINT/SIGTERM: transfers stop at their next chunk, and uploads stay resumable. */
static volatile sig_atomic_t cp_interrupted;

static void cp_on_signal(int sig)
{
	(void)sig;
	cp_interrupted = 1;
}

static void cp_add_dir(cp_run *r, char *path, uint32_t mode, bool from_source)
{
	r->dirs = bkctl_grow(r->dirs, r->n_dirs, sizeof(*r->dirs));
	r->dirs[r->n_dirs++] = (cp_dir){ .path = path, .mode = mode, .from_source = from_source };
}

static void cp_add_file(cp_run *r, const char *src, char *dst, uint64_t size, uint32_t mode)
{
	r->files = bkctl_grow(r->files, r->n_files, sizeof(*r->files));
	r->files[r->n_files++] = (cp_file){ .src = bkctl_strdup(src), .dst = dst, .size = size, .mode = mode, .run = r };
	r->total_bytes += size;
}

static void cp_add_link(cp_run *r, const char *src, char *dst, const char *target)
{
	r->links = bkctl_grow(r->links, r->n_links, sizeof(*r->links));
	r->links[r->n_links++] = (cp_link){ .src = bkctl_strdup(src), .dst = dst, .target = bkctl_strdup(target) };
}

static void cp_skip(cp_run *r, const char *path, const char *reason)
{
	fprintf(stderr, "%s: warning: skipping ", r->ctl->prog);
	bkctl_put_text(stderr, path);
	fprintf(stderr, " (%s)\n", reason);
	r->sum.skipped = bkctl_grow(r->sum.skipped, r->sum.n_skipped, sizeof(*r->sum.skipped));
	r->sum.skipped[r->sum.n_skipped++] = (bkctl_skip){ .path = bkctl_strdup(path), .reason = reason };
}

/* The progress line, at most every PROGRESS_INTERVAL unless forced; under r->lock. */
static void cp_draw(cp_run *r, bool force)
{
	char line[160];
	double seconds = (double)bk_elapsed_us(&r->start) / 1e6;

	if (!r->bar || (!force && seconds - r->last_draw < PROGRESS_INTERVAL))
		return;
	r->last_draw = seconds;
	bkctl_progress_line(line, sizeof(line), r->bytes_done, r->total_bytes, seconds, r->files_done, r->n_files);
	fprintf(stderr, "\r\033[K%s", line);
}

static void cp_clear_bar(const cp_run *r)
{
	if (r->bar)
		fputs("\r\033[K", stderr);
}

/* Record a failure while the transfers run; false. */
static bool cp_failed(cp_run *r, const char *path, const bk_status *st, const char *upload_id, char *resume)
{
	pthread_mutex_lock(&r->lock);
	cp_clear_bar(r);
	bkctl_failures_add(r->ctl, &r->sum.failures, path, st, upload_id, resume);
	pthread_mutex_unlock(&r->lock);
	return false;
}

static bool cp_progress(void *arg, uint64_t done, uint64_t total)
{
	cp_file *f = arg;
	cp_run *r = f->run;

	(void)total;
	pthread_mutex_lock(&r->lock);
	r->bytes_done += done - f->reported;
	f->reported = done;
	cp_draw(r, false);
	pthread_mutex_unlock(&r->lock);
	return !cp_interrupted;
}

/* Whether an upload that failed with code can still be finished with its id. */
static bool cp_resumable(int code)
{
	switch (code) {
	case BK_DATA_LOSS:           /* the content does not match its hash: start again */
	case BK_INVALID_ARGUMENT:
	case BK_NOT_FOUND:           /* the server no longer has it */
	case BK_ALREADY_EXISTS:
	case BK_PERMISSION_DENIED:
	case BK_FAILED_PRECONDITION:
		return false;
	default:
		return true;
	}
}

static bool cp_upload(cp_run *r, cp_file *f)
{
	bk_transfer_options o = {
		.mode = r->keep_mode ? f->mode & 0777 : 0,
		.overwrite = !r->no_clobber,
		.make_parents = true,
		.compress = r->compress,
		.sha256 = r->sha256,
		.upload_id = r->resume_id,
		.progress = cp_progress,
		.progress_arg = f,
	};
	_cleanup_close_ int fd = f->from_stdin ? fcntl(r->stdin_copy, F_DUPFD_CLOEXEC, 0)
					       : open(f->src, O_RDONLY | O_CLOEXEC);
	_cleanup_file_info_ bk_file_info info = { 0 };
	char id[64] = "";
	bk_status st;
	int code;

	if (fd < 0) {
		bk_status_errno(&st, errno, "%s", f->src);
		return cp_failed(r, f->src, &st, NULL, NULL);
	}
	code = bk_upload_fd(r->client, fd, f->dst, &o, &info, id, &st);
	if (code == BK_OK) {
		f->has_sha256 = info.has_sha256;
		memcpy(f->sha256, info.sha256, sizeof(f->sha256));
		return true;
	}
	/* What was read from our standard input is not there to read again. */
	if (id[0] && cp_resumable(code) && !f->from_stdin)
		return cp_failed(r, f->src, &st, id, bkctl_cp_resume_command(r->flags, id, f->src, f->dst));
	/* Nothing to resume: let the server drop what it holds now rather than at expiry. */
	if (id[0])
		bk_upload_abort(r->client, id, NULL);
	return cp_failed(r, f->src, &st, NULL, NULL);
}

/* Download into a temporary file beside the destination, renamed over it only when complete
 * and verified: nobody sees half a file, and a failure leaves nothing behind. */
static bool cp_download(cp_run *r, cp_file *f)
{
	bk_transfer_options o = {
		.compress = r->compress,
		.sha256 = r->sha256,
		.progress = cp_progress,
		.progress_arg = f,
	};
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	char dir[4096];
	bk_file_info info;
	bk_status st;
	struct stat sb;
	bool ok;

	if (f->to_stdout) {
		/* As it arrives, as cat shows a file: what came before a failure stays written (the exit
		 * status says it failed). */
		if (bk_download_fd(r->client, f->src, STDOUT_FILENO, &o, &info, &st) != BK_OK)
			return cp_failed(r, f->src, &st, NULL, NULL);
		f->size = info.size;
		f->has_sha256 = info.has_sha256;
		memcpy(f->sha256, info.sha256, sizeof(f->sha256));
		bk_file_info_free(&info);
		return true;
	}
	if (r->no_clobber && lstat(f->dst, &sb) == 0) {
		bk_status_errno(&st, EEXIST, "%s", f->dst);
		return cp_failed(r, f->src, &st, NULL, NULL);
	}
	bkctl_path_dir(f->dst, dir, sizeof(dir));
	tmp = bkctl_path_join(dir, ".bkctl-XXXXXX");
	if (!tmp)
		bkctl_die_oom();
	fd = mkostemp(tmp, O_CLOEXEC);
	/* The destination's parents are made as needed (mkostemp consumed the template). */
	if (fd < 0 && errno == ENOENT) {
		int rv = bk_mkdir_p(dir, 0777, 0777, false, NULL, 0);
		if (rv < 0) {
			bk_status_errno(&st, -rv, "%s", dir);
			return cp_failed(r, f->src, &st, NULL, NULL);
		}
		strcpy(tmp + strlen(tmp) - 6, "XXXXXX");
		fd = mkostemp(tmp, O_CLOEXEC);
	}
	if (fd < 0) {
		bk_status_errno(&st, errno, "%s", f->dst);
		return cp_failed(r, f->src, &st, NULL, NULL);
	}
	if (bk_download_fd(r->client, f->src, fd, &o, &info, &st) == BK_OK) {
		ok = fchmod(fd, r->keep_mode ? info.mode & 0777 : 0666 & ~r->umask) == 0 && close(TAKE_FD(fd)) == 0 &&
		     renameat2(AT_FDCWD, tmp, AT_FDCWD, f->dst, r->no_clobber ? RENAME_NOREPLACE : 0) == 0;
		f->size = info.size;
		f->has_sha256 = info.has_sha256;
		memcpy(f->sha256, info.sha256, sizeof(f->sha256));
		bk_file_info_free(&info);
		if (ok)
			return true;
		bk_status_errno(&st, errno, "%s", f->dst);
	}
	unlink(tmp);
	return cp_failed(r, f->src, &st, NULL, NULL);
}

static void *cp_worker(void *arg)
{
	cp_run *r = arg;

	for (;;) {
		cp_file *f;
		bool ok;

		pthread_mutex_lock(&r->lock);
		if (cp_interrupted || r->next == r->n_files) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		f = &r->files[r->next++];
		pthread_mutex_unlock(&r->lock);

		ok = r->direction == BKCTL_CP_UPLOAD ? cp_upload(r, f) : cp_download(r, f);

		pthread_mutex_lock(&r->lock);
		r->files_done++;
		if (ok) {
			r->sum.files++;
			r->sum.bytes += f->size;
		}
		cp_draw(r, true);
		pthread_mutex_unlock(&r->lock);
	}
}

/* Run the transfers on r->jobs threads sharing the one client. */
static void cp_transfer(cp_run *r)
{
	struct sigaction sa = { .sa_handler = cp_on_signal, .sa_flags = SA_RESETHAND | SA_RESTART }, old_int, old_term;
	pthread_t threads[CP_JOBS_MAX];
	size_t n = r->jobs < r->n_files ? r->jobs : r->n_files, started;

	/* A first ^C stops the transfers cleanly (printing how to resume); a second one kills. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	for (started = 0; started < n; started++)
		if (pthread_create(&threads[started], NULL, cp_worker, r) != 0)
			break;
	if (started == 0 && n > 0)
		cp_worker(r);
	for (size_t i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (cp_interrupted && r->next < r->n_files) {
		bk_status st;
		bk_status_set(&st, BK_CANCELLED, 0, false, "interrupted: %zu files not copied, from %s on",
			      r->n_files - r->next, r->files[r->next].src);
		cp_clear_bar(r);
		bkctl_failures_add(r->ctl, &r->sum.failures, r->files[r->next].src, &st, NULL, NULL);
	}
}

/* Make the destination directories, parents first. */
static void cp_make_dirs(cp_run *r)
{
	for (size_t i = 0; i < r->n_dirs; i++) {
		const cp_dir *d = &r->dirs[i];
		bool keep = r->keep_mode && d->from_source;
		bk_status st;
		int rv;

		if (r->direction == BKCTL_CP_UPLOAD) {
			/* There is no chmod rpc: a kept mode gets u+rwx, for the files to go in. */
			rv = bk_file_mkdir(r->client, d->path, true, keep ? (d->mode & 0777) | 0700 : 0, &st);
		} else {
			/* Locally the kept mode is set once the files are in (cp_keep_dir_modes). */
			rv = bk_mkdir_p(d->path, 0777, keep ? 0700 : 0777, false, NULL, 0);
			if (rv < 0)
				bk_status_errno(&st, -rv, "%s", d->path);
		}
		if (rv == 0)
			r->sum.directories++;
		else
			bkctl_failures_add(r->ctl, &r->sum.failures, d->path, &st, NULL, NULL);
	}
}

/* Downloads with -p: the directories' own modes, children first. */
static void cp_keep_dir_modes(cp_run *r)
{
	for (size_t i = r->n_dirs; i-- > 0;) {
		const cp_dir *d = &r->dirs[i];

		if (d->from_source && chmod(d->path, d->mode & 0777) < 0) {
			bk_status st;
			bk_status_errno(&st, errno, "%s", d->path);
			bkctl_failures_add(r->ctl, &r->sum.failures, d->path, &st, NULL, NULL);
		}
	}
}

/* One symlink at the destination; an existing file there is replaced unless -n (as cp -a). */
static int cp_make_link(cp_run *r, const cp_link *l, bk_status *st)
{
	int code;

	if (r->direction == BKCTL_CP_UPLOAD) {
		code = bk_file_symlink(r->client, l->dst, l->target, st);
		if (code == BK_ALREADY_EXISTS && !r->no_clobber &&
		    bk_file_remove(r->client, l->dst, false, NULL, st) == BK_OK)
			code = bk_file_symlink(r->client, l->dst, l->target, st);
		return code;
	}
	if (symlink(l->target, l->dst) == 0)
		return BK_OK;
	if (errno == EEXIST && !r->no_clobber && unlink(l->dst) == 0 && symlink(l->target, l->dst) == 0)
		return BK_OK;
	return bk_status_errno(st, errno, "%s", l->dst);
}

/* The symlinks, after the files: a symlink made earlier could lead a later file elsewhere (GNU
 * tar delays its symlinks for the same reason). */
static void cp_make_links(cp_run *r)
{
	for (size_t i = 0; i < r->n_links && !cp_interrupted; i++) {
		bk_status st;

		if (cp_make_link(r, &r->links[i], &st) == BK_OK)
			r->sum.symlinks++;
		else
			bkctl_failures_add(r->ctl, &r->sum.failures, r->links[i].src, &st, NULL, NULL);
	}
}

static void plan_local(cp_run *r, const char *src, char *dst);

/* A local directory tree into the sandbox directory dst (taken). */
static void plan_local_tree(cp_run *r, const char *src, char *dst, uint32_t mode)
{
	struct dirent **names = NULL;
	int n;

	cp_add_dir(r, dst, mode, true);
	n = scandir(src, &names, NULL, alphasort);
	if (n < 0) {
		bk_status st;
		bk_status_errno(&st, errno, "%s", src);
		bkctl_failures_add(r->ctl, &r->sum.failures, src, &st, NULL, NULL);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;

		if (strcmp(name, ".") && strcmp(name, "..")) {
			_cleanup_free_ char *child = bkctl_path_join(src, name);
			char *to = bkctl_path_join(dst, name);
			if (!child || !to)
				bkctl_die_oom();
			plan_local(r, child, to);
		}
		free(names[i]);
	}
	free(names);
}

/* A local symlink in a tree, to be made at sandbox path dst (taken). */
static void plan_local_link(cp_run *r, const char *src, char *dst, size_t size)
{
	char target[4096];
	ssize_t n = readlink(src, target, sizeof(target));
	bk_status st;

	/* st_size is the target's length; a link that changed meanwhile is read again next time. */
	if (n < 0 || (size_t)n >= sizeof(target) || (size_t)n != size) {
		bk_status_errno(&st, n < 0 ? errno : (size_t)n >= sizeof(target) ? ENAMETOOLONG : EAGAIN, "%s", src);
		bkctl_failures_add(r->ctl, &r->sum.failures, src, &st, NULL, NULL);
		free(dst);
		return;
	}
	target[n] = '\0';
	cp_add_link(r, src, dst, target);
}

/* Local src to sandbox path dst (taken). A symlink named on the command line is followed
 * without -r, as cp does; inside trees symlinks are copied as symlinks, never followed. */
static void plan_local(cp_run *r, const char *src, char *dst)
{
	struct stat sb;

	if ((r->recursive ? lstat(src, &sb) : stat(src, &sb)) < 0) {
		bk_status st;
		bk_status_errno(&st, errno, "%s", src);
		bkctl_failures_add(r->ctl, &r->sum.failures, src, &st, NULL, NULL);
		free(dst);
	} else if (S_ISREG(sb.st_mode)) {
		cp_add_file(r, src, dst, (uint64_t)sb.st_size, sb.st_mode & 07777);
	} else if (S_ISDIR(sb.st_mode) && r->recursive) {
		plan_local_tree(r, src, dst, sb.st_mode & 07777);
	} else if (S_ISDIR(sb.st_mode)) {
		bk_status st;
		bk_status_set(&st, BK_INVALID_ARGUMENT, 0, false, "%s is a directory (copy it with -r)", src);
		bkctl_failures_add(r->ctl, &r->sum.failures, src, &st, NULL, NULL);
		free(dst);
	} else if (S_ISLNK(sb.st_mode)) {
		plan_local_link(r, src, dst, (size_t)sb.st_size);
	} else {
		cp_skip(r, src, "not a regular file, directory or symlink");
		free(dst);
	}
}

static void plan_remote(cp_run *r, const bk_file_info *info, const char *src, char *dst);

/* A sandbox directory still to walk, and where its copy goes. */
typedef struct remote_dir {
	char *src, *dst;
	uint32_t mode;
} remote_dir;

/* A sandbox directory tree into the local directory dst (taken). Walked from a work list, not
 * by recursion: the sandbox decides how deep the tree is, and it must not decide how deep our
 * stack goes. Breadth first, so each directory is planned before what it holds. */
static void plan_remote_tree(cp_run *r, const char *src, char *dst, uint32_t mode)
{
	remote_dir *todo = bkctl_grow(NULL, 0, sizeof(*todo));
	size_t n_todo = 0;

	todo[n_todo++] = (remote_dir){ .src = bkctl_strdup(src), .dst = dst, .mode = mode };
	for (size_t k = 0; k < n_todo; k++) {
		remote_dir d = todo[k]; /* a copy: adding to todo may move it */
		char token[BK_PAGE_TOKEN_MAX] = "", next[BK_PAGE_TOKEN_MAX];
		bk_status st;

		cp_add_dir(r, d.dst, d.mode, true);
		do {
			bk_file_info *v;
			size_t n;

			if (bk_file_list(r->client, d.src, 0, token, &v, &n, next, &st) != BK_OK) {
				bkctl_failures_add(r->ctl, &r->sum.failures, d.src, &st, NULL, NULL);
				break;
			}
			for (size_t i = 0; i < n; i++) {
				char *from, *to;

				if (!safe_entry_name(v[i].path)) {
					bk_status_set(&st, BK_DATA_LOSS, 0, false, "the server listed an entry \"%s\" in %s",
						      v[i].path, d.src);
					bkctl_failures_add(r->ctl, &r->sum.failures, d.src, &st, NULL, NULL);
					continue;
				}
				from = bkctl_path_join(d.src, v[i].path);
				to = bkctl_path_join(d.dst, v[i].path);
				if (!from || !to)
					bkctl_die_oom();
				if (v[i].type == BK_FILE_DIRECTORY) {
					todo = bkctl_grow(todo, n_todo, sizeof(*todo));
					todo[n_todo++] = (remote_dir){ .src = from, .dst = to, .mode = v[i].mode };
					continue;
				}
				plan_remote(r, &v[i], from, to);
				free(from);
			}
			bk_file_list_free(v, n);
			strcpy(token, next);
		} while (token[0]);
		free(d.src);
	}
	free(todo);
}

/* Sandbox path src, described by info, to local path dst (taken). */
static void plan_remote(cp_run *r, const bk_file_info *info, const char *src, char *dst)
{
	bk_status st;

	switch (info->type) {
	case BK_FILE_REGULAR:
		cp_add_file(r, src, dst, info->size, info->mode);
		return;
	case BK_FILE_DIRECTORY:
		if (r->recursive) {
			plan_remote_tree(r, src, dst, info->mode);
			return;
		}
		bk_status_set(&st, BK_INVALID_ARGUMENT, 0, false, "%s is a directory (copy it with -r)", src);
		bkctl_failures_add(r->ctl, &r->sum.failures, src, &st, NULL, NULL);
		break;
	case BK_FILE_SYMLINK:
		/* Without -r it was named on the command line: followed, as cp does (the server
		 * refuses one that leads out of its root); its target's size is not known yet. In a
		 * tree it is copied as a symlink, as cp -a and tar do. */
		if (!r->recursive) {
			cp_add_file(r, src, dst, 0, 0);
			return;
		}
		cp_add_link(r, src, dst, info->symlink_target);
		return;
	default:
		cp_skip(r, src, "not a regular file, directory or symlink");
		break;
	}
	free(dst);
}

/* Whether path exists on the destination's side, and is a directory. */
static int cp_dst_kind(cp_run *r, const char *path, bool *exists, bool *is_dir, bk_status *st)
{
	_cleanup_file_info_ bk_file_info info = { 0 };
	struct stat sb;
	int code;

	*exists = *is_dir = false;
	if (r->direction == BKCTL_CP_UPLOAD) {
		code = bk_file_stat(r->client, path, &info, st);
		if (code == BK_NOT_FOUND)
			return BK_OK;
		*exists = code == BK_OK;
		*is_dir = *exists && info.type == BK_FILE_DIRECTORY;
		return code;
	}
	if (stat(path, &sb) < 0) {
		if (errno == ENOENT)
			return BK_OK;
		return bk_status_errno(st, errno, "%s", path);
	}
	*exists = true;
	*is_dir = S_ISDIR(sb.st_mode);
	return BK_OK;
}

/* What to copy where. Fails only when the destination itself is unusable; a source that cannot
 * be copied is a failure of the run, and the others go ahead. */
static int cp_plan(cp_run *r, char *const *args, int n, bk_status *st)
{
	const char *dst = bkctl_path_parse(args[n - 1]).path;
	bool must_be_dir = n > 2 || dst[strlen(dst) - 1] == '/', exists, is_dir;
	int code = cp_dst_kind(r, dst, &exists, &is_dir, st);

	if (code != BK_OK)
		return code;
	if (must_be_dir && exists && !is_dir)
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "%s is not a directory", dst);
	if (must_be_dir && !exists) {
		cp_add_dir(r, bkctl_strdup(dst), 0, false);
		is_dir = true;
	}
	for (int i = 0; i < n - 1; i++) {
		const char *src = bkctl_path_parse(args[i]).path;
		char *target = bkctl_cp_target(dst, is_dir, src);
		_cleanup_file_info_ bk_file_info info = { 0 };
		bk_status sst;

		if (!target)
			bkctl_die_oom();
		if (r->direction == BKCTL_CP_UPLOAD) {
			plan_local(r, src, target);
		} else if (bk_file_stat(r->client, src, &info, &sst) != BK_OK) {
			bkctl_failures_add(r->ctl, &r->sum.failures, src, &sst, NULL, NULL);
			free(target);
		} else {
			plan_remote(r, &info, src, target);
		}
	}
	return BK_OK;
}

/* Our standard input to its end into an unnamed temporary file (it is uploaded as a file is: its
 * size known, read with pread): the file, or -errno. */
static int cp_spool_stdin(uint64_t *size)
{
	const char *dir = getenv("TMPDIR");
	_cleanup_free_ uint8_t *buf = malloc(1u << 20);
	_cleanup_close_ int fd = -1;

	if (!buf)
		return -ENOMEM;
	fd = open(dir && dir[0] ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (*size = 0;;) {
		ssize_t n = read(STDIN_FILENO, buf, 1u << 20);
		int rv;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return TAKE_FD(fd);
		if ((rv = bk_write_full(fd, buf, (size_t)n)) < 0)
			return rv;
		*size += (uint64_t)n;
	}
}

/* cp - :FILE and cp :FILE -: our standard input or output stands for the local file (as with
 * docker cp, though it carries the file's bytes here, not a tar archive); ./- is a file named -. */
static int cp_plan_std(cp_run *r, char *const *args, int n, bk_status *st)
{
	const char *remote = bkctl_path_parse(args[r->direction == BKCTL_CP_UPLOAD ? 1 : 0]).path;
	_cleanup_file_info_ bk_file_info info = { 0 };
	uint64_t size = 0;
	int fd, code;

	if (n != 2)
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "- (standard %s) goes with one %s only",
				     r->direction == BKCTL_CP_UPLOAD ? "input" : "output",
				     r->direction == BKCTL_CP_UPLOAD ? "destination" : "source");
	if (r->recursive || r->resume_id || r->keep_mode)
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
				     "-r, -p and --resume need a local file or directory, not -");
	code = bk_file_stat(r->client, remote, &info, st);
	if (r->direction == BKCTL_CP_DOWNLOAD) {
		if (code != BK_OK)
			return code;
		if (info.type != BK_FILE_REGULAR)
			return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
					     "%s is not a regular file: - takes one file's bytes", remote);
		cp_add_file(r, remote, bkctl_strdup("-"), info.size, info.mode);
		r->files[r->n_files - 1].to_stdout = true;
		return BK_OK;
	}
	if (remote[strlen(remote) - 1] == '/' || (code == BK_OK && info.type == BK_FILE_DIRECTORY))
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
				     "%s is a directory, and standard input has no name: give the file's path, :%s/NAME",
				     remote, remote);
	fd = cp_spool_stdin(&size);
	if (fd < 0)
		return bk_status_errno(st, -fd, "reading our standard input into a temporary file");
	r->stdin_copy = fd;
	cp_add_file(r, "-", bkctl_strdup(remote), size, 0644);
	r->files[r->n_files - 1].from_stdin = true;
	return BK_OK;
}

/* The files copied with their plain SHA-256, in the order of the plan, named by their local
 * side (the source of an upload, the copy of a download): what sha256sum -c checks. */
static void cp_collect_digests(cp_run *r)
{
	for (size_t i = 0; i < r->n_files; i++) {
		const cp_file *f = &r->files[i];
		bkctl_digest *d;

		if (!f->has_sha256)
			continue;
		r->sum.digests = bkctl_grow(r->sum.digests, r->sum.n_digests, sizeof(*r->sum.digests));
		d = &r->sum.digests[r->sum.n_digests++];
		d->path = r->direction == BKCTL_CP_UPLOAD ? f->src : f->dst;
		memcpy(d->sha256, f->sha256, sizeof(d->sha256));
	}
}

static void cp_run_free(cp_run *r)
{
	for (size_t i = 0; i < r->n_dirs; i++)
		free(r->dirs[i].path);
	for (size_t i = 0; i < r->n_files; i++) {
		free(r->files[i].src);
		free(r->files[i].dst);
	}
	for (size_t i = 0; i < r->n_links; i++) {
		free(r->links[i].src);
		free(r->links[i].dst);
		free(r->links[i].target);
	}
	for (size_t i = 0; i < r->sum.n_skipped; i++)
		free(r->sum.skipped[i].path);
	free(r->dirs);
	free(r->files);
	free(r->links);
	free(r->sum.skipped);
	free(r->sum.digests);
	bkctl_failures_free(&r->sum.failures);
	if (r->stdin_copy >= 0)
		close(r->stdin_copy);
	pthread_mutex_destroy(&r->lock);
}

static bool cp_option(bkctl *ctl, void *arg, int opt, const char *val)
{
	cp_run *r = arg;
	unsigned long jobs;
	char *end;

	switch (opt) {
	case 'r':
		r->recursive = true;
		return true;
	case 'n':
		r->no_clobber = true;
		return true;
	case 'p':
		r->keep_mode = true;
		return true;
	case 'z':
		r->compress = true;
		return true;
	case 'j':
		jobs = strtoul(val, &end, 10);
		if (*end || jobs < 1 || jobs > CP_JOBS_MAX) {
			fprintf(stderr, "%s: --jobs %s: expected 1 to %d\n", ctl->prog, val, CP_JOBS_MAX);
			return false;
		}
		r->jobs = (unsigned)jobs;
		return true;
	case BKCTL_OPT_RESUME:
		r->resume_id = val;
		return true;
	case BKCTL_OPT_SHA256:
		r->sha256 = true;
		return true;
	default:
		return false;
	}
}

int bkctl_cp(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	cp_run r = { .ctl = ctl, .jobs = CP_JOBS_DEFAULT, .lock = PTHREAD_MUTEX_INITIALIZER, .stdin_copy = -1 };
	bool std_in, std_out;
	const char *why;
	char *const *args;
	bk_status st;
	int n, code;

	if (!parse_options(ctl, cmd, argc, argv, cp_option, &r, 2, -1, &code))
		return code;
	args = argv + optind;
	n = argc - optind;
	r.direction = bkctl_cp_direction(n, args, &why);
	if (r.direction < 0) {
		fprintf(stderr, "%s: %s\n", ctl->prog, why);
		return BKCTL_EXIT_USAGE;
	}
	std_out = r.direction == BKCTL_CP_DOWNLOAD && strcmp(args[n - 1], "-") == 0;
	std_in = false;
	for (int i = 0; r.direction == BKCTL_CP_UPLOAD && i < n - 1; i++)
		std_in = std_in || strcmp(args[i], "-") == 0;
	if (std_out && ctl->json) {
		fprintf(stderr, "%s: -o json and - both write to standard output\n", ctl->prog);
		return BKCTL_EXIT_USAGE;
	}
	if (r.resume_id && (r.direction != BKCTL_CP_UPLOAD || n != 2 || r.recursive)) {
		fprintf(stderr, "%s: --resume takes one local file and its sandbox destination\n", ctl->prog);
		return BKCTL_EXIT_USAGE;
	}
	snprintf(r.flags, sizeof(r.flags), "%s%s%s%s", r.compress ? "-z " : "", r.keep_mode ? "-p " : "",
		 r.no_clobber ? "-n " : "", r.sha256 ? "--sha256 " : "");
	if (r.flags[0])
		r.flags[strlen(r.flags) - 1] = '\0';
	r.umask = umask(0);
	umask(r.umask);
	r.bar = isatty(STDERR_FILENO) && !ctl->json;
	r.client = bkctl_connect(ctl, &code);
	if (!r.client)
		return code;
	clock_gettime(CLOCK_MONOTONIC, &r.start);
	code = std_in || std_out ? cp_plan_std(&r, args, n, &st) : cp_plan(&r, args, n, &st);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		goto out;
	}
	cp_make_dirs(&r);
	cp_transfer(&r);
	cp_make_links(&r);
	if (r.direction == BKCTL_CP_DOWNLOAD && r.keep_mode)
		cp_keep_dir_modes(&r);
	r.sum.seconds = (double)bk_elapsed_us(&r.start) / 1e6;
	cp_collect_digests(&r);
	cp_clear_bar(&r);
	if (ctl->json)
		bkctl_cp_summary_json(stdout, &r.sum);
	else if (std_out) /* the file's bytes are our output; with --sha256 its line goes to stderr */
		bkctl_cp_digests_text(stderr, &r.sum);
	else
		bkctl_cp_summary_text(stdout, &r.sum);
	code = r.sum.failures.exit_code;
out:
	bk_client_close(r.client);
	cp_run_free(&r);
	return code;
}

/* --- ls, stat -------------------------------------------------------------------------------- */

typedef struct ls_opts {
	bool long_format, all;
	bool tty;           /* stdout is a terminal: names quoted as GNU ls quotes them */
} ls_opts;

static bool ls_option(bkctl *ctl, void *arg, int opt, const char *val)
{
	ls_opts *o = arg;

	(void)ctl;
	(void)val;
	if (opt == 'l')
		o->long_format = true;
	else if (opt == 'a')
		o->all = true;
	else
		return false;
	return true;
}

static void ls_entry(const bkctl *ctl, bk_json *j, const ls_opts *o, const bk_file_info *i, const char *name)
{
	if (ctl->json) {
		info_json(j, NULL, i);
	} else if (o->long_format) {
		print_long(i, name, o->tty);
	} else {
		bkctl_put_name(stdout, name, o->tty);
		putchar('\n');
	}
}

int bkctl_ls(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	char token[BK_PAGE_TOKEN_MAX] = "", next[BK_PAGE_TOKEN_MAX];
	bk_json j = { .out = stdout };
	ls_opts o = { .tty = isatty(STDOUT_FILENO) };
	const char *path;
	_cleanup_file_info_ bk_file_info info = { 0 };
	bk_status st;
	bk_client *c;
	int code;

	if (!parse_options(ctl, cmd, argc, argv, ls_option, &o, 0, 1, &code))
		return code;
	path = optind < argc ? bkctl_sandbox_arg(argv[optind]) : ".";
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_file_stat(c, path, &info, &st);
	if (code != BK_OK)
		goto fail;
	if (ctl->json) {
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "path", path);
		bk_json_begin_array(&j, "entries");
	}
	if (info.type != BK_FILE_DIRECTORY) {
		ls_entry(ctl, &j, &o, &info, path);
		goto done;
	}
	/* Page by page: a directory of any size in bounded memory. */
	do {
		bk_file_info *v;
		size_t n;

		code = bk_file_list(c, path, 0, token, &v, &n, next, &st);
		if (code != BK_OK)
			goto fail;
		for (size_t i = 0; i < n; i++)
			if (o.all || v[i].path[0] != '.')
				ls_entry(ctl, &j, &o, &v[i], v[i].path);
		bk_file_list_free(v, n);
		strcpy(token, next);
	} while (token[0]);
done:
	if (ctl->json) {
		bk_json_end_array(&j);
		bk_json_end_object(&j);
	}
	bk_client_close(c);
	return BKCTL_EXIT_OK;
fail:
	/* A later page that fails ends the listing already printed, then reports the error. */
	if (ctl->json && j.depth > 0) {
		bk_json_end_array(&j);
		bk_json_end_object(&j);
	}
	bk_client_close(c);
	return bkctl_fail(ctl, &st);
}

static bool no_option(bkctl *ctl, void *arg, int opt, const char *val)
{
	(void)ctl;
	(void)arg;
	(void)opt;
	(void)val;
	return false;
}

int bkctl_stat(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	static const char *const types[] = { "unknown", "regular file", "directory", "symlink", "other" };
	char mode[11], mtime[96];
	_cleanup_file_info_ bk_file_info info = { 0 };
	bool tty = isatty(STDOUT_FILENO);
	bk_status st;
	bk_client *c;
	int code;

	if (!parse_options(ctl, cmd, argc, argv, no_option, NULL, 1, 1, &code))
		return code;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_file_stat(c, bkctl_sandbox_arg(argv[optind]), &info, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		info_json(&j, NULL, &info);
		return BKCTL_EXIT_OK;
	}
	bkctl_mode_string(info.type, info.mode, mode);
	mtime_string(info.mtime_ns, true, mtime, sizeof(mtime));
	fputs("  path: ", stdout);
	bkctl_put_name(stdout, info.path, tty);
	printf("\n  type: %s\n  size: %llu\n  mode: %04o (%s)\n owner: %u:%u\n mtime: %s\n",
	       types[info.type >= 0 && info.type <= BK_FILE_OTHER ? info.type : 0], (unsigned long long)info.size,
	       info.mode, mode, info.uid, info.gid, mtime);
	if (info.type == BK_FILE_SYMLINK) {
		fputs("target: ", stdout);
		bkctl_put_name(stdout, info.symlink_target, tty);
		putchar('\n');
	}
	return BKCTL_EXIT_OK;
}

/* --- rm, mkdir, mv --------------------------------------------------------------------------- */

/* The options of rm, mkdir and mv. */
typedef struct path_opts {
	bool recursive;     /* rm -r */
	bool parents;       /* mkdir -p */
	bool force;         /* mv -f */
	uint32_t mode;      /* mkdir -m */
} path_opts;

static bool path_option(bkctl *ctl, void *arg, int opt, const char *val)
{
	path_opts *o = arg;

	switch (opt) {
	case 'r':
		o->recursive = true;
		return true;
	case 'p':
		o->parents = true;
		return true;
	case 'f':
		o->force = true;
		return true;
	case 'm':
		if (bkctl_parse_mode(val, &o->mode) < 0) {
			fprintf(stderr, "%s: -m %s: expected octal permission bits (at most 777)\n", ctl->prog, val);
			return false;
		}
		return true;
	default:
		return false;
	}
}

/* rm and mkdir: one call per path, going on after a failure; -o json prints
 * {"<count_key>": N, "errors": [...]}. */
typedef int (*path_op)(bk_client *c, const char *path, const path_opts *o, uint64_t *count, bk_status *st);

static int each_path(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, path_op op,
		     const char *count_key)
{
	bkctl_failures failures = { 0 };
	path_opts o = { 0 };
	uint64_t count = 0;
	bk_client *c;
	int code;

	if (!parse_options(ctl, cmd, argc, argv, path_option, &o, 1, -1, &code))
		return code;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	for (int i = optind; i < argc; i++) {
		const char *path = bkctl_sandbox_arg(argv[i]);
		bk_status st;

		if (op(c, path, &o, &count, &st) != BK_OK)
			bkctl_failures_add(ctl, &failures, path, &st, NULL, NULL);
	}
	bk_client_close(c);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_uint(&j, count_key, count);
		failures_json(&j, &failures);
		bk_json_end_object(&j);
	}
	code = failures.exit_code;
	bkctl_failures_free(&failures);
	return code;
}

static int rm_one(bk_client *c, const char *path, const path_opts *o, uint64_t *count, bk_status *st)
{
	uint64_t removed = 0;
	int code = bk_file_remove(c, path, o->recursive, &removed, st);

	*count += removed;
	return code;
}

int bkctl_rm(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{

	return each_path(ctl, cmd, argc, argv, rm_one, "removed");
}

static int mkdir_one(bk_client *c, const char *path, const path_opts *o, uint64_t *count, bk_status *st)
{
	int code = bk_file_mkdir(c, path, o->parents, o->mode, st);

	*count += code == BK_OK;
	return code;
}

int bkctl_mkdir(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{

	return each_path(ctl, cmd, argc, argv, mkdir_one, "created");
}

int bkctl_mv(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	_cleanup_free_ char *to = NULL;
	const char *from, *dst;
	_cleanup_file_info_ bk_file_info info = { 0 };
	path_opts o = { 0 };
	bk_status st;
	bk_client *c;
	int code;

	if (!parse_options(ctl, cmd, argc, argv, path_option, &o, 2, 2, &code))
		return code;
	from = bkctl_sandbox_arg(argv[optind]);
	dst = bkctl_sandbox_arg(argv[optind + 1]);
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	/* As mv: onto an existing directory, the source moves inside it. */
	to = bkctl_cp_target(dst, bk_file_stat(c, dst, &info, &st) == BK_OK && info.type == BK_FILE_DIRECTORY, from);
	if (!to)
		bkctl_die_oom();
	code = bk_file_move(c, from, to, o.force, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "from", from);
		bk_json_string(&j, "to", to);
		bk_json_end_object(&j);
	}
	return BKCTL_EXIT_OK;
}
