#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048
#define FIELD_MAX 160

struct line {
	char buf[LINE_MAX_BYTES];
	size_t len;
};

static void put(struct line *l, const char *fmt, ...) BK_PRINTF(2, 3);
static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= sizeof(l->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len += (size_t)n < sizeof(l->buf) - l->len ? (size_t)n : sizeof(l->buf) - l->len - 1;
}

/* A JSON string of at most FIELD_MAX input bytes; control bytes and non-ASCII escaped, so
 * hostile text cannot break the line or the JSON. */
static void put_string(struct line *l, const char *s)
{
	size_t i;

	put(l, "\"");
	for (i = 0; s[i] && i < FIELD_MAX; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			put(l, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			put(l, "\\u%04x", c);
		else if (l->len < sizeof(l->buf) - 1)
			l->buf[l->len++] = (char)c;
	}
	put(l, "%s\"", s[i] ? "..." : "");
}

static void put_time(struct line *l)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	put(l, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	    tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

static void emit(struct line *l)
{
	if (l->len > sizeof(l->buf) - 3)
		l->len = sizeof(l->buf) - 3;
	l->buf[l->len++] = '}';
	l->buf[l->len++] = '\n';
	/* One write per line: atomic for a pipe up to PIPE_BUF, and never split by another thread's
	 * line in a file opened O_APPEND. A failed log write has nowhere to be reported. */
	if (write(STDERR_FILENO, l->buf, l->len) < 0)
		return;
}

void bk_log(enum bk_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info" };
	char msg[1024];
	struct line l = { .len = 0 };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	put_time(&l);
	put(&l, ",\"level\":\"%s\",\"msg\":", names[level]);
	put_string(&l, msg);
	emit(&l);
}

void bk_log_call(const bk_log_request *r)
{
	struct line l = { .len = 0 };

	put_time(&l);
	put(&l, ",\"level\":\"info\",\"method\":");
	put_string(&l, r->method ? r->method : "");
	put(&l, ",\"key\":");
	put_string(&l, r->key_id ? r->key_id : "");
	if (r->key_installed) {
		put(&l, ",\"key_installed\":");
		put_string(&l, r->key_installed);
	}
	put(&l, ",\"status\":\"%s\"", bk_status_name(r->status));
	if (r->detail)
		put(&l, ",\"detail\":\"%s\"", bk_detail_name(r->detail));
	put(&l, ",\"duration_us\":%llu,\"bytes_in\":%zu,\"bytes_out\":%zu", (unsigned long long)r->duration_us,
	    r->bytes_in, r->bytes_out);
	if (r->message) {
		put(&l, ",\"error\":");
		put_string(&l, r->message);
	}
	emit(&l);
}

void bk_log_egress_decision(const bk_log_egress *e)
{
	struct line l = { .len = 0 };

	put_time(&l);
	put(&l, ",\"level\":\"info\",\"egress\":\"%s\",\"exec\":%llu,\"key\":", e->verdict,
	    (unsigned long long)e->exec_id);
	put_string(&l, e->key_id ? e->key_id : "");
	put(&l, ",\"method\":");
	put_string(&l, e->method ? e->method : "");
	put(&l, ",\"asked\":");
	put_string(&l, e->asked ? e->asked : "");
	put(&l, ",\"addr\":");
	put_string(&l, e->addr ? e->addr : "");
	put(&l, ",\"brokered\":%s,\"bytes_up\":%llu,\"bytes_down\":%llu,\"duration_us\":%llu",
	    e->brokered ? "true" : "false", (unsigned long long)e->bytes_up, (unsigned long long)e->bytes_down,
	    (unsigned long long)e->duration_us);
	if (e->reason) {
		put(&l, ",\"reason\":");
		put_string(&l, e->reason);
	}
	emit(&l);
}
