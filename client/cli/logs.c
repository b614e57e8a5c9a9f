/* bkctl logs: a background process's output, both streams in the order boxkited read them (each
 * to ours: its stdout to our stdout, its stderr to our stderr, as docker logs), or one of them;
 * --tail N lines, --since a time, --timestamps, -f to go on as it is written. The order and the
 * times are the server's marks (docs/PROTOCOL.md, "ProcessRead"), put back together by
 * bk_process_follow(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bkctl.h"
#include "clock.h"
#include "json.h"

/* -o json: what one read asks of the stream. */
#define LOGS_READ_MAX (1u << 20)

/* --- the parts that need no server (tests/unit/test_bkctl_text.c) --------------------------- */

void bkctl_format_time(int64_t ms, char out[BKCTL_TIME_LEN])
{
	time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	int milli = (int)(ms - (int64_t)secs * 1000);
	struct tm tm;
	size_t n;

	if (!gmtime_r(&secs, &tm) || !(n = strftime(out, BKCTL_TIME_LEN - 5, "%Y-%m-%dT%H:%M:%S", &tm))) {
		snprintf(out, BKCTL_TIME_LEN, "?");
		return;
	}
	out[n++] = '.';
	out[n++] = (char)('0' + milli / 100);
	out[n++] = (char)('0' + milli / 10 % 10);
	out[n++] = (char)('0' + milli % 10);
	out[n++] = 'Z';
	out[n] = '\0';
}

/* "2026-12-02T10:20:30[.123](Z|+01:00)" as ms since the epoch: 0, or -1. */
static int parse_rfc3339(const char *s, int64_t *ms)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t frac = 0, scale = 1000, offset_s = 0;

	if (!p)
		return -1;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, n = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5 || hh > 23 || mm > 59)
			return -1;
		offset_s = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
		p += 1 + n;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*ms = ((int64_t)timegm(&tm) - offset_s) * 1000 + frac;
	return 0;
}

int bkctl_parse_since(const char *s, int64_t now_ms, int64_t *since_ms)
{
	char *end;
	double v;

	if (!s[0])
		return -1;
	if (strchr(s, 'T'))
		return parse_rfc3339(s, since_ms);
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !(v >= 0))
		return -1;
	switch (*end) {
	case '\0':
	case 's':
		break;
	case 'm':
		v *= 60;
		break;
	case 'h':
		v *= 3600;
		break;
	case 'd':
		v *= 86400;
		break;
	default:
		return -1;
	}
	if (*end && end[1])
		return -1;
	if (v > 100 * 365 * 86400.0)
		return -1;
	*since_ms = now_ms - (int64_t)(v * 1000);
	return 0;
}

void bkctl_tail_init(bkctl_tail *t, uint64_t lines)
{
	*t = (bkctl_tail){ .lines = lines };
}

void bkctl_tail_add(bkctl_tail *t, int stream, int64_t time_ms, const uint8_t *data, size_t len)
{
	bkctl_tail_piece *p;

	if (!len)
		return;
	t->v = bkctl_grow(t->v, t->n, sizeof(*t->v));
	p = &t->v[t->n++];
	*p = (bkctl_tail_piece){ .stream = stream, .time_ms = time_ms, .len = len, .data = malloc(len) };
	if (!p->data)
		bkctl_die_oom();
	memcpy(p->data, data, len);
	for (size_t i = 0; i < len; i++)
		t->newlines += data[i] == '\n';
	/* Keep only what the last `lines` lines need: the pieces after the line end that precedes
	 * them (one more newline than lines, and the one that ends the output's last line). */
	while (t->n - t->head > 1) {
		const bkctl_tail_piece *f = &t->v[t->head];
		uint64_t in_front = 0;
		for (size_t i = 0; i < f->len; i++)
			in_front += f->data[i] == '\n';
		if (t->newlines - in_front < t->lines + 1)
			break;
		t->newlines -= in_front;
		free(t->v[t->head].data);
		t->head++;
	}
}

size_t bkctl_tail_start(const bkctl_tail *t, size_t *skip)
{
	bool last = true; /* at the output's last byte: its newline ends a line, starts none */
	uint64_t seen = 0;

	*skip = 0;
	if (!t->lines)
		return t->n;
	for (size_t k = t->n; k-- > t->head;) {
		const bkctl_tail_piece *p = &t->v[k];
		for (size_t i = p->len; i-- > 0; last = false) {
			if (p->data[i] == '\n' && !last && ++seen == t->lines) {
				*skip = i + 1;
				return k;
			}
		}
	}
	return t->head;
}

void bkctl_tail_free(bkctl_tail *t)
{
	for (size_t k = t->head; k < t->n; k++)
		free(t->v[k].data);
	free(t->v);
	*t = (bkctl_tail){ 0 };
}

/* --- following ------------------------------------------------------------------------------ */

typedef struct logs_state {
	const bkctl *ctl;
	int only;                /* 0: both streams; else the one shown (enum bk_stream) */
	int64_t since_ms;        /* pieces read before it are not shown; INT64_MIN: all */
	bool timestamps;
	bool tailing;            /* catching up with --tail: pieces go to tail, not out */
	bkctl_tail tail;
	bkctl_term term[2];      /* our stdout and stderr: control sequences escaped on a terminal */
	bool line_start[2];      /* each of ours is at the start of a line */
	bool gone;               /* our stdout was closed: stop */
} logs_state;

/* Bytes of stream on their way to our stream of the same name, each line that starts in them
 * after the time they were read (--timestamps). */
static bool logs_write(logs_state *l, int stream, int64_t time_ms, const uint8_t *data, size_t len)
{
	int i = stream == BK_STREAM_STDERR;

	while (len) {
		const uint8_t *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) + 1 : len;

		if (l->timestamps && l->line_start[i]) {
			char ts[BKCTL_TIME_LEN + 1];
			bkctl_format_time(time_ms, ts);
			strcat(ts, " "); /* room for it: BKCTL_TIME_LEN holds more than the time */
			if (bkctl_term_write(&l->term[i], (const uint8_t *)ts, strlen(ts)) == -EPIPE)
				return false;
		}
		if (bkctl_term_write(&l->term[i], data, n) == -EPIPE)
			return false;
		l->line_start[i] = data[n - 1] == '\n';
		data += n;
		len -= n;
	}
	return true;
}

static bool logs_output(void *arg, int stream, uint64_t offset, int64_t time_ms, const uint8_t *data, size_t len)
{
	logs_state *l = arg;

	(void)offset;
	if ((l->only && stream != l->only) || time_ms < l->since_ms)
		return true;
	if (l->tailing) {
		bkctl_tail_add(&l->tail, stream, time_ms, data, len);
		return true;
	}
	if (!logs_write(l, stream, time_ms, data, len)) {
		l->gone = true;
		return false; /* nobody reads us any more */
	}
	return true;
}

static void logs_lost(void *arg, int stream, uint64_t offset, uint64_t bytes)
{
	logs_state *l = arg;

	if (!l->only || stream == l->only)
		fprintf(stderr, "%s: %llu bytes of its %s lost: the ring dropped them before they were read; "
				"output goes on from offset %llu\n",
			l->ctl->prog, (unsigned long long)bytes, stream == BK_STREAM_STDERR ? "stderr" : "stdout",
			(unsigned long long)offset);
}

/* The last --tail lines caught up with, written out. */
static bool logs_tail_flush(logs_state *l)
{
	size_t skip, k = bkctl_tail_start(&l->tail, &skip);
	bool ok = true;

	for (; ok && k < l->tail.n; k++, skip = 0) {
		const bkctl_tail_piece *p = &l->tail.v[k];
		ok = logs_write(l, p->stream, p->time_ms, p->data + skip, p->len - skip);
	}
	l->gone = !ok;
	return ok;
}

/* -o json: one read of the one stream, from `from`: "next" says where the following call goes on. */
static int logs_json(bk_client *c, const char *id, uint64_t epoch, int stream, uint64_t from, uint64_t other,
		     bk_status *st)
{
	uint64_t so = stream == BK_STREAM_STDOUT ? from : other, se = stream == BK_STREAM_STDERR ? from : other;
	bk_json j = { .out = stdout };
	bk_process_output o;
	bk_stream_chunk *ch;
	int code = bk_process_read(c, id, &epoch, so, se, LOGS_READ_MAX, 0, &o, st);

	if (code != BK_OK)
		return code;
	ch = stream == BK_STREAM_STDERR ? &o.err : &o.out;
	bk_json_begin_object(&j, NULL);
	bk_json_string(&j, "process_id", id);
	bk_json_string(&j, "stream", stream == BK_STREAM_STDERR ? "stderr" : "stdout");
	bk_json_uint(&j, "offset", ch->offset);
	bk_json_uint(&j, "lost", ch->lost);
	bk_json_bytes(&j, "data", ch->data, ch->len);
	bk_json_uint(&j, "next", ch->offset + ch->len);
	bk_json_uint(&j, "end", ch->end);
	bk_json_bool(&j, "eof", ch->eof);
	bkctl_process_status_json(&j, "status", &o.status);
	bk_json_end_object(&j);
	bk_process_output_free(&o);
	return BK_OK;
}

int bkctl_logs(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	logs_state l = { .ctl = ctl, .since_ms = INT64_MIN, .line_start = { true, true } };
	bk_process_handlers h = { .output_at = logs_output, .lost = logs_lost, .arg = &l };
	bool follow = false, raw = false, has_from = false, has_tail = false, running;
	uint64_t from = 0, lines = 0, offsets[2] = { 0, 0 }, ends[2], epoch;
	const char *id;
	char *end;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		switch (opt) {
		case 'f':
			follow = true;
			break;
		case BKCTL_OPT_FROM:
			errno = 0;
			from = strtoull(optarg, &end, 10);
			if (end == optarg || *end || errno || optarg[0] == '-') {
				fprintf(stderr, "%s: --from %s: expected a byte offset\n", ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			has_from = true;
			break;
		case BKCTL_OPT_STDOUT:
			l.only = BK_STREAM_STDOUT;
			break;
		case BKCTL_OPT_STDERR:
			l.only = BK_STREAM_STDERR;
			break;
		case 'n':
			errno = 0;
			lines = strtoull(optarg, &end, 10);
			if (end == optarg || *end || errno || optarg[0] == '-') {
				fprintf(stderr, "%s: --tail %s: expected a number of lines\n", ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			has_tail = true;
			break;
		case BKCTL_OPT_SINCE:
			if (bkctl_parse_since(optarg, bk_clock_realtime_ms(), &l.since_ms) < 0) {
				fprintf(stderr, "%s: --since %s: expected a time ago (30s, 10m, 2h, 1d) or an RFC 3339 time "
						"(2026-01-02T15:04:05Z)\n",
					ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			break;
		case 't':
			l.timestamps = true;
			break;
		case BKCTL_OPT_RAW:
			raw = true;
			break;
		default:
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!(id = bkctl_process_id_arg(ctl, cmd, argc, argv)))
		return BKCTL_EXIT_USAGE;
	/* An offset is one stream's: stdout's unless --stderr says otherwise. */
	if (has_from && !l.only)
		l.only = BK_STREAM_STDOUT;
	if (ctl->json && (follow || has_tail || l.timestamps || l.since_ms != INT64_MIN)) {
		fprintf(stderr, "%s: -o json prints one read of one stream; -f, --tail, --since and --timestamps shape "
				"text\n",
			ctl->prog);
		return BKCTL_EXIT_USAGE;
	}
	bkctl_term_init(&l.term[0], STDOUT_FILENO, raw);
	bkctl_term_init(&l.term[1], STDERR_FILENO, raw);
	bkctl_tail_init(&l.tail, lines);
	l.tailing = has_tail;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	/* The stream not shown starts where it ends now: its bytes so far are not read. Every read
	 * after names the epoch the id is of now. */
	code = bkctl_process_now(c, id, ends, &running, &epoch, &st);
	if (l.only) {
		int other = l.only == BK_STREAM_STDOUT ? 1 : 0;
		offsets[other] = ends[other];
		offsets[!other] = from;
	}
	if (code == BK_OK && ctl->json) {
		code = logs_json(c, id, epoch, l.only ? l.only : BK_STREAM_STDOUT, from,
				 offsets[l.only == BK_STREAM_STDOUT], &st);
		goto out;
	}
	/* What it wrote so far (a process that runs), or all of it (one that ended: its last bytes may
	 * reach its rings just after its end, and following it to its end shows them too), for
	 * --tail to pick its last lines from, or without -f to show; then with -f what comes. */
	if (code == BK_OK && (has_tail || !follow)) {
		h.until_now = running;
		code = bk_process_follow(c, id, &epoch, &offsets[0], &offsets[1], &h, NULL, &st);
		l.tailing = false;
		if (code == BK_OK && has_tail)
			logs_tail_flush(&l);
		follow = follow && running;
		h.until_now = false;
	}
	if (code == BK_OK && !l.gone && follow)
		code = bk_process_follow(c, id, &epoch, &offsets[0], &offsets[1], &h, NULL, &st);
	if (code == BK_CANCELLED && l.gone)
		code = BK_OK; /* our stdout was closed */
out:
	bkctl_term_flush(&l.term[0]);
	bkctl_term_flush(&l.term[1]);
	bkctl_tail_free(&l.tail);
	bk_client_close(c);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		if (st.code == BK_OUT_OF_RANGE) {
			const char *stream = l.only == BK_STREAM_STDERR ? "stderr" : "stdout";

			fprintf(stderr, "%s: --from %llu is past what the process has written to its %s so far (bkctl ps "
					"-o json shows it as %s_end)\n",
				ctl->prog, (unsigned long long)from, stream, stream);
		}
		return code;
	}
	return BKCTL_EXIT_OK;
}
