/* FileWatch's front half (server/files/watch.c) against the stub file worker, through libboxkite:
 * cursors (a read repeated gets the same events, a later one says they arrived), names that are
 * not UTF-8, writes in a row as one event, the bounds on events and their bytes (an OVERFLOW
 * event counts exactly what was not kept), a read that waits (parked: the front's receiving
 * contexts stay free), stop, the bound on watches, the worker's end after its events, changes the
 * worker may not send, and cursors that are not ones. The file worker's half (inotify) is the
 * python tier's (tests/python/test_watch.py), against the real boxkited. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "boxkite/boxkite.h"
#include "boxkite/executor/order.pb-c.h"
#include "clock.h"
#include "fixture.h"
#include "watchbounds.h"

static const char *const flags_few_contexts[] = { "--contexts", "4", NULL };

static int setup(void **state)
{
	return wire_start_stubbed((wire **)state, NULL);
}

static int setup_few_contexts(void **state)
{
	return wire_start_stubbed((wire **)state, flags_few_contexts);
}

/* Start a watch of path: its cursor into cursor, the worker's id for it returned. */
static uint64_t start(wire *w, bk_client *c, const char *path, char *cursor)
{
	struct stub_state *ss = stub_state(w->stub);
	unsigned before = atomic_load(&ss->watches);
	uint32_t dirs = 0;
	bk_status st;

	if (bk_watch_start(c, path, cursor, &dirs, &st) != BK_OK)
		fail_msg("bk_watch_start %s: %s", path, st.message);
	assert_int_equal(dirs, 1);
	assert_int_equal(atomic_load(&ss->watches), before + 1);
	return atomic_load(&ss->watch_key);
}

/* n changes of one kind, paths "PREFIX<i>", sent by the stub worker. */
static void send_numbered(wire *w, uint64_t key, uint32_t kind, const char *prefix, size_t n, uint32_t end)
{
	Boxkite__Executor__Change *v = calloc(n ? n : 1, sizeof(*v)), **p = calloc(n ? n : 1, sizeof(*p));
	char (*names)[64] = calloc(n ? n : 1, sizeof(*names));

	assert_non_null(v);
	assert_non_null(p);
	assert_non_null(names);
	for (size_t i = 0; i < n; i++) {
		boxkite__executor__change__init(&v[i]);
		snprintf(names[i], sizeof(names[i]), "%s%zu", prefix, i);
		v[i].kind = kind;
		v[i].path = (ProtobufCBinaryData){ .len = strlen(names[i]), .data = (uint8_t *)names[i] };
		p[i] = &v[i];
	}
	stub_changes(w->stub, key, p, n, end);
	free(names);
	free(p);
	free(v);
}

static void send_one(wire *w, uint64_t key, uint32_t kind, const void *path, size_t plen, const void *to, size_t tlen,
		     bool dir, uint64_t lost)
{
	Boxkite__Executor__Change c = BOXKITE__EXECUTOR__CHANGE__INIT, *p = &c;

	c.kind = kind;
	c.path = (ProtobufCBinaryData){ .len = plen, .data = (uint8_t *)path };
	c.to = (ProtobufCBinaryData){ .len = tlen, .data = (uint8_t *)to };
	c.directory = dir;
	c.lost = lost;
	stub_changes(w->stub, key, &p, 1, 0);
}

/* Until the front has taken every change the stub sent: an order to the same worker, answered on
 * the same channel after them, and the link reads in order. */
static void settle(bk_client *c)
{
	bk_file_info info;
	bk_status st;

	assert_int_equal(bk_file_stat(c, "settle", &info, &st), BK_OK);
	bk_file_info_free(&info);
}

/* Read until at least `want` events came after cursor (the stub's events are on their way), or
 * the watch ends: the last answer, its events gathered from every read, cursor moved on. */
static bk_watch_batch read_until(bk_client *c, char *cursor, size_t want, bk_watch_event **all, size_t *n,
				 char **pool)
{
	bk_watch_batch b = { 0 };
	size_t used = 0;
	bk_status st;

	*all = NULL;
	*n = 0;
	*pool = NULL;
	for (int tries = 0; tries < 100; tries++) {
		bk_watch_batch_free(&b);
		if (bk_watch_read(c, cursor, 1000, 0, &b, &st) != BK_OK)
			fail_msg("bk_watch_read: %s", st.message);
		*all = realloc(*all, (*n + b.n + 1) * sizeof(**all));
		for (size_t i = 0; i < b.n; i++) {
			size_t pl = strlen(b.events[i].path) + 1, tl = strlen(b.events[i].to) + 1;
			*pool = realloc(*pool, used + pl + tl);
			memcpy(*pool + used, b.events[i].path, pl);
			memcpy(*pool + used + pl, b.events[i].to, tl);
			(*all)[*n] = b.events[i];
			/* Offsets for now: pointers once the pool stops moving. */
			(*all)[*n].path = (const char *)(uintptr_t)used;
			(*all)[*n].to = (const char *)(uintptr_t)(used + pl);
			used += pl + tl;
			(*n)++;
		}
		strcpy(cursor, b.cursor);
		if (*n >= want || b.end)
			break;
	}
	for (size_t i = 0; i < *n; i++) {
		(*all)[i].path = *pool + (uintptr_t)(*all)[i].path;
		(*all)[i].to = *pool + (uintptr_t)(*all)[i].to;
	}
	return b;
}

/* --- cursors ----------------------------------------------------------------------------------- */

static void test_start_read_again_and_on(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX], first[BK_WATCH_CURSOR_MAX], path[256];
	bk_watch_batch a, b;
	bk_status st;
	uint64_t key = start(w, c, "./proj//", cursor);

	pthread_mutex_lock(&stub_state(w->stub)->lock);
	snprintf(path, sizeof(path), "%s", stub_state(w->stub)->watch_path);
	pthread_mutex_unlock(&stub_state(w->stub)->lock);
	assert_string_equal(path, "/workspace/proj"); /* the worker is given the normalized path */
	/* Nothing yet, and no wait asked: at once, the cursor as it was. */
	assert_int_equal(bk_watch_read(c, cursor, 0, 0, &a, &st), BK_OK);
	assert_int_equal(a.n, 0);
	assert_int_equal(a.end, BK_WATCH_GOES_ON);
	assert_string_equal(a.cursor, cursor);
	bk_watch_batch_free(&a);
	send_one(w, key, BK_WATCH_CREATED, "d", 1, "", 0, true, 0);
	send_one(w, key, BK_WATCH_MOVED, "d/a", 3, "e", 1, false, 0);
	settle(c); /* both in one answer */
	strcpy(first, cursor);
	bk_watch_event *all;
	size_t n;
	char *pool;
	a = read_until(c, cursor, 2, &all, &n, &pool);
	assert_int_equal(n, 2);
	assert_int_equal(all[0].kind, BK_WATCH_CREATED);
	assert_string_equal(all[0].path, "d");
	assert_true(all[0].directory);
	assert_int_equal(all[1].kind, BK_WATCH_MOVED);
	assert_string_equal(all[1].path, "d/a");
	assert_string_equal(all[1].to, "e");
	bk_watch_batch_free(&a);
	free(all);
	free(pool);
	/* The answer was lost, say: from the same cursor, the same events again. */
	assert_int_equal(bk_watch_read(c, first, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.n, 2);
	assert_string_equal(b.events[1].to, "e");
	assert_string_equal(b.cursor, cursor);
	bk_watch_batch_free(&b);
	/* max_events: the first only, and the cursor between them. */
	assert_int_equal(bk_watch_read(c, first, 0, 1, &b, &st), BK_OK);
	assert_int_equal(b.n, 1);
	assert_string_not_equal(b.cursor, first);
	assert_string_not_equal(b.cursor, cursor);
	bk_watch_batch_free(&b);
	/* Reading on from the later cursor says they arrived: the first cursor is behind what the
	 * watch keeps now. */
	assert_int_equal(bk_watch_read(c, cursor, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.n, 0);
	bk_watch_batch_free(&b);
	assert_int_equal(bk_watch_read(c, first, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_END_EXPIRED);
	bk_watch_batch_free(&b);
	/* The watch itself goes on. */
	assert_int_equal(bk_watch_read(c, cursor, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_GOES_ON);
	bk_watch_batch_free(&b);
	bk_client_close(c);
}

static void test_names_that_are_not_utf8_keep_their_bytes(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX];
	uint64_t key = start(w, c, "/workspace", cursor);
	static const char name[] = "caf\xe9/\xff\x01\n";
	static const char to[] = "\xc3\x28";
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;

	send_one(w, key, BK_WATCH_MOVED, name, sizeof(name) - 1, to, sizeof(to) - 1, false, 0);
	b = read_until(c, cursor, 1, &all, &n, &pool);
	assert_int_equal(n, 1);
	assert_memory_equal(all[0].path, name, sizeof(name));
	assert_memory_equal(all[0].to, to, sizeof(to));
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	bk_client_close(c);
}

/* --- what a watch keeps -------------------------------------------------------------------------- */

static void test_writes_in_a_row_are_one_event(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX];
	uint64_t key = start(w, c, "/workspace", cursor);
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;

	for (int i = 0; i < 100; i++)
		send_one(w, key, BK_WATCH_MODIFIED, "f", 1, "", 0, false, 0);
	send_one(w, key, BK_WATCH_MODIFIED, "g", 1, "", 0, false, 0);
	send_one(w, key, BK_WATCH_CLOSED, "g", 1, "", 0, false, 0);
	settle(c);
	b = read_until(c, cursor, 3, &all, &n, &pool);
	assert_int_equal(n, 3);
	assert_string_equal(all[0].path, "f");
	assert_int_equal(all[1].kind, BK_WATCH_MODIFIED);
	assert_string_equal(all[1].path, "g");
	assert_int_equal(all[2].kind, BK_WATCH_CLOSED);
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	/* A write after the one a reader was given is news: never folded into what it read. */
	send_one(w, key, BK_WATCH_MODIFIED, "g", 1, "", 0, false, 0);
	send_one(w, key, BK_WATCH_MODIFIED, "g", 1, "", 0, false, 0);
	settle(c);
	b = read_until(c, cursor, 1, &all, &n, &pool);
	assert_int_equal(n, 1);
	assert_int_equal(all[0].kind, BK_WATCH_MODIFIED);
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	bk_client_close(c);
}

static void test_past_the_bound_an_overflow_counts_what_was_not_kept(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX];
	uint64_t key = start(w, c, "/workspace", cursor);
	const size_t sent = BK_WATCH_EVENTS_MAX + 904;
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;

	/* In batches as the worker sends them, none read meanwhile. */
	for (size_t done = 0; done < sent; done += 256)
		send_numbered(w, key, BK_WATCH_CREATED, done ? "m" : "f", sent - done < 256 ? sent - done : 256, 0);
	settle(c);
	b = read_until(c, cursor, BK_WATCH_EVENTS_MAX + 1, &all, &n, &pool);
	assert_int_equal(n, BK_WATCH_EVENTS_MAX + 1);
	for (size_t i = 0; i < BK_WATCH_EVENTS_MAX; i++)
		assert_int_equal(all[i].kind, BK_WATCH_CREATED);
	assert_int_equal(all[BK_WATCH_EVENTS_MAX].kind, BK_WATCH_OVERFLOW);
	assert_int_equal(all[BK_WATCH_EVENTS_MAX].lost, sent - BK_WATCH_EVENTS_MAX);
	assert_string_equal(all[BK_WATCH_EVENTS_MAX].path, "");
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	/* Read, it made room: what comes next is kept again, after the overflow. */
	send_one(w, key, BK_WATCH_REMOVED, "after", 5, "", 0, false, 0);
	b = read_until(c, cursor, 1, &all, &n, &pool);
	assert_int_equal(n, 1);
	assert_int_equal(all[0].kind, BK_WATCH_REMOVED);
	assert_string_equal(all[0].path, "after");
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	bk_client_close(c);
}

static void test_the_bound_on_bytes_holds_too(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX], name[4000];
	uint64_t key = start(w, c, "/workspace", cursor);
	size_t fit = BK_WATCH_BYTES_MAX / sizeof(name), total = 0;
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;

	memset(name, 'n', sizeof(name));
	for (size_t i = 0; i < fit + 10; i++) {
		name[0] = (char)('a' + i % 26); /* no two in a row alike */
		send_one(w, key, BK_WATCH_CREATED, name, sizeof(name), "", 0, false, 0);
	}
	settle(c);
	b = read_until(c, cursor, fit + 1, &all, &n, &pool);
	assert_int_equal(n, fit + 1);
	for (size_t i = 0; i < fit; i++)
		total += strlen(all[i].path);
	assert_true(total <= BK_WATCH_BYTES_MAX);
	assert_int_equal(all[fit].kind, BK_WATCH_OVERFLOW);
	assert_int_equal(all[fit].lost, 10);
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	bk_client_close(c);
}

/* --- waiting ---------------------------------------------------------------------------------- */

struct reader {
	wire *w;
	char cursor[BK_WATCH_CURSOR_MAX];
	uint32_t wait_ms;
	int code;
	bk_watch_batch b;
	int64_t took_ms;
};

static void *read_once(void *arg)
{
	struct reader *r = arg;
	bk_client *c = wire_client(r->w);
	int64_t t0 = bk_clock_monotonic_ms();

	r->code = bk_watch_read(c, r->cursor, r->wait_ms, 0, &r->b, NULL);
	r->took_ms = bk_clock_monotonic_ms() - t0;
	bk_client_close(c);
	return NULL;
}

static void test_a_read_waits_for_the_next_event(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	struct reader r = { .w = w, .wait_ms = 60000 };
	pthread_t t;
	uint64_t key = start(w, c, "/workspace", r.cursor);

	pthread_create(&t, NULL, read_once, &r);
	usleep(200 * 1000);
	send_one(w, key, BK_WATCH_CREATED, "x", 1, "", 0, false, 0);
	pthread_join(t, NULL);
	assert_int_equal(r.code, BK_OK);
	assert_int_equal(r.b.n, 1);
	assert_string_equal(r.b.events[0].path, "x");
	/* Answered by the event, not by the end of its wait. */
	assert_true(r.took_ms < 30000);
	bk_watch_batch_free(&r.b);
	/* With nothing to come, a wait ends empty, the cursor where it was. */
	strcpy(r.cursor, r.b.cursor);
	r.wait_ms = 300;
	read_once(&r);
	assert_int_equal(r.code, BK_OK);
	assert_int_equal(r.b.n, 0);
	assert_int_equal(r.b.end, BK_WATCH_GOES_ON);
	assert_string_equal(r.b.cursor, r.cursor);
	bk_watch_batch_free(&r.b);
	bk_client_close(c);
}

static void test_waiting_reads_hold_no_receiving_context(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	enum { READERS = 32 }; /* against --contexts 4 */
	struct reader r[READERS];
	pthread_t t[READERS];
	char cursor[BK_WATCH_CURSOR_MAX];
	bk_health_info h;
	bk_status st;

	start(w, c, "/workspace", cursor);
	for (int i = 0; i < READERS; i++) {
		r[i] = (struct reader){ .w = w, .wait_ms = 60000 };
		strcpy(r[i].cursor, cursor);
		pthread_create(&t[i], NULL, read_once, &r[i]);
	}
	usleep(500 * 1000);
	/* Every reader waits, and still the front answers. */
	for (int i = 0; i < 20; i++)
		assert_int_equal(bk_health(c, &h, &st), BK_OK);
	/* A stop answers every one of them. */
	assert_int_equal(bk_watch_stop(c, cursor, &st), BK_OK);
	for (int i = 0; i < READERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].code, BK_OK);
		assert_int_equal(r[i].b.end, BK_WATCH_END_STOPPED);
		bk_watch_batch_free(&r[i].b);
	}
	bk_client_close(c);
}

/* --- ends and bounds -------------------------------------------------------------------------- */

static void test_stop_ends_it_and_tells_the_worker(void **state)
{
	wire *w = *state;
	struct stub_state *ss = stub_state(w->stub);
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX];
	unsigned unwatches = atomic_load(&ss->unwatches);
	bk_watch_batch b;
	bk_status st;

	start(w, c, "/workspace", cursor);
	assert_int_equal(bk_watch_stop(c, cursor, &st), BK_OK);
	for (int i = 0; i < WIRE_TIMEOUT_MS && atomic_load(&ss->unwatches) == unwatches; i++)
		usleep(1000);
	assert_int_equal(atomic_load(&ss->unwatches), unwatches + 1);
	assert_int_equal(bk_watch_read(c, cursor, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_END_EXPIRED);
	bk_watch_batch_free(&b);
	/* A second stop is no error. */
	assert_int_equal(bk_watch_stop(c, cursor, &st), BK_OK);
	bk_client_close(c);
}

static void test_a_sandbox_has_at_most_so_many_watches(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursors[BK_WATCHES_MAX][BK_WATCH_CURSOR_MAX], one[BK_WATCH_CURSOR_MAX];
	bk_status st;

	for (int i = 0; i < BK_WATCHES_MAX; i++)
		start(w, c, "/workspace", cursors[i]);
	assert_int_equal(bk_watch_start(c, "/workspace", one, NULL, &st), BK_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(st.message, "watches"));
	/* One stopped makes room for one. */
	assert_int_equal(bk_watch_stop(c, cursors[3], &st), BK_OK);
	start(w, c, "/workspace", one);
	assert_int_equal(bk_watch_start(c, "/workspace", one, NULL, &st), BK_RESOURCE_EXHAUSTED);
	bk_client_close(c);
}

static void test_the_workers_end_comes_after_its_events(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX];
	uint64_t key = start(w, c, "/workspace/d", cursor);
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;
	bk_status st;

	send_numbered(w, key, BK_WATCH_REMOVED, "f", 3, BOXKITE__V1__WATCH_END__WATCH_END_REMOVED);
	b = read_until(c, cursor, 3, &all, &n, &pool);
	assert_int_equal(n, 3);
	assert_int_equal(b.end, BK_WATCH_END_REMOVED);
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	/* Its end was read: it is gone, and its place free. */
	assert_int_equal(bk_watch_read(c, cursor, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_END_EXPIRED);
	bk_watch_batch_free(&b);
	bk_client_close(c);
}

static void test_changes_the_worker_may_not_send_are_refused(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX], huge[5000];
	uint64_t key = start(w, c, "/workspace", cursor);
	bk_watch_event *all;
	size_t n;
	char *pool;
	bk_watch_batch b;

	memset(huge, 'h', sizeof(huge));
	send_one(w, key, BK_WATCH_CREATED, "nul\0inside", 10, "", 0, false, 0);
	send_one(w, key, 99, "kind", 4, "", 0, false, 0);
	send_one(w, key, BK_WATCH_CREATED, huge, sizeof(huge), "", 0, false, 0);
	send_one(w, key + 1000, BK_WATCH_CREATED, "another", 7, "", 0, false, 0);
	send_one(w, key, BK_WATCH_CREATED, "fine", 4, "", 0, false, 0);
	settle(c);
	b = read_until(c, cursor, 1, &all, &n, &pool);
	assert_int_equal(n, 1);
	assert_string_equal(all[0].path, "fine");
	bk_watch_batch_free(&b);
	free(all);
	free(pool);
	bk_client_close(c);
}

static void test_cursors_that_are_not_ones(void **state)
{
	wire *w = *state;
	bk_client *c = wire_client(w);
	char cursor[BK_WATCH_CURSOR_MAX], bad[128];
	bk_watch_batch b;
	bk_status st;
	const char *session_end;
	static const char *const not_cursors[] = {
		"", "x", "0", "abc", "0123456789abcdef", "0123456789abcdef.1", "0123456789ABCDEF.1.0",
		"0123456789abcdef.01.0", "0123456789abcdef.1.00", "0123456789abcdef.1.-1", "0123456789abcdef.1.+1",
		"0123456789abcdef. 1.0", "0123456789abcdef.1.0 ", "0123456789abcdef.1.99999999999999999999999",
		"0123456789abcdef..0", "0123456789abcdef.1.0.0",
	};

	start(w, c, "/workspace", cursor);
	for (size_t i = 0; i < sizeof(not_cursors) / sizeof(not_cursors[0]); i++) {
		if (!not_cursors[i][0])
			continue; /* "" is a start without a path: refused below */
		assert_int_equal(bk_watch_read(c, not_cursors[i], 0, 0, &b, &st), BK_INVALID_ARGUMENT);
	}
	/* A well-formed cursor of no session of this server's: expired, not an error. */
	assert_int_equal(bk_watch_read(c, "0123456789abcdef.1.0", 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_END_EXPIRED);
	bk_watch_batch_free(&b);
	/* Past the last event: never given out. */
	session_end = strrchr(cursor, '.');
	snprintf(bad, sizeof(bad), "%.*s.5", (int)(session_end - cursor), cursor);
	assert_int_equal(bk_watch_read(c, bad, 0, 0, &b, &st), BK_INVALID_ARGUMENT);
	/* Another watch number of this session: none. */
	snprintf(bad, sizeof(bad), "%.16s.77.0", cursor);
	assert_int_equal(bk_watch_read(c, bad, 0, 0, &b, &st), BK_OK);
	assert_int_equal(b.end, BK_WATCH_END_EXPIRED);
	bk_watch_batch_free(&b);
	assert_int_equal(bk_watch_read(c, cursor, 0, BK_WATCH_READ_MAX + 1, &b, &st), BK_INVALID_ARGUMENT);
	/* A path and a cursor at once, neither, a path that leaves the roots, stop with a path. */
	assert_int_equal(bk_watch_start(c, "../etc", bad, NULL, &st), BK_INVALID_ARGUMENT);
	assert_int_equal(bk_watch_start(c, "", bad, NULL, &st), BK_INVALID_ARGUMENT);
	bk_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_start_read_again_and_on, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_names_that_are_not_utf8_keep_their_bytes, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_writes_in_a_row_are_one_event, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_past_the_bound_an_overflow_counts_what_was_not_kept, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_the_bound_on_bytes_holds_too, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_a_read_waits_for_the_next_event, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_waiting_reads_hold_no_receiving_context, setup_few_contexts, wire_teardown),
		cmocka_unit_test_setup_teardown(test_stop_ends_it_and_tells_the_worker, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_a_sandbox_has_at_most_so_many_watches, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_the_workers_end_comes_after_its_events, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_changes_the_worker_may_not_send_are_refused, setup, wire_teardown),
		cmocka_unit_test_setup_teardown(test_cursors_that_are_not_ones, setup, wire_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
