/* Unit tests of server/runs/ring.c, the output rings of Exec (keep-head) and background processes
 * (keep-tail): absolute offsets, what is kept and what is lost under each policy, the wrap, the
 * growth of the buffer, and reading from a real pipe (end of file, EAGAIN, a bound per read).
 * Every byte fed is a function of its offset, so a byte kept in the wrong place shows. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "runs/ring.h"

/* The byte at offset off of every stream fed here. */
static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + off / 251);
}

struct pipe_pair {
	int r, w;
};

static struct pipe_pair pipe_open(void)
{
	int fds[2];

	assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	return (struct pipe_pair){ fds[0], fds[1] };
}

static void pipe_close(struct pipe_pair *p)
{
	if (p->r >= 0)
		close(p->r);
	if (p->w >= 0)
		close(p->w);
}

/* Write the stream's bytes [from, from + n) into the pipe and read them into the ring, max bytes
 * per read, until the pipe is empty. Returns the largest single read. */
static size_t feed(bk_ring *r, struct pipe_pair *p, uint64_t from, size_t n, size_t max)
{
	uint8_t chunk[16384];
	size_t largest = 0;

	while (n) {
		size_t len = n < sizeof(chunk) ? n : sizeof(chunk);
		ssize_t w, got;

		for (size_t i = 0; i < len; i++)
			chunk[i] = pattern(from + i);
		w = write(p->w, chunk, len);
		assert_true(w > 0);
		from += (uint64_t)w;
		n -= (size_t)w;
		while ((got = bk_ring_read(r, p->r, max)) > 0)
			if ((size_t)got > largest)
				largest = (size_t)got;
		assert_int_equal(got, -EAGAIN);
	}
	return largest;
}

/* The kept bytes [off, off + n) are the stream's. */
static void assert_kept(const bk_ring *r, uint64_t off, size_t n)
{
	uint8_t *out = malloc(n ? n : 1);

	assert_non_null(out);
	bk_ring_copy(r, off, out, n);
	for (size_t i = 0; i < n; i++)
		if (out[i] != pattern(off + i))
			fail_msg("offset %llu: byte %u, not %u", (unsigned long long)(off + i), out[i],
				 pattern(off + i));
	free(out);
}

static void keep_head_keeps_the_first_cap_bytes_and_counts_the_rest(void **state)
{
	_cleanup_(bk_ring_freep) bk_ring *r = bk_ring_new(BK_RING_KEEP_HEAD, 200000);
	struct pipe_pair p = pipe_open();
	const uint8_t *at;
	size_t len;

	(void)state;
	assert_non_null(r);
	assert_int_equal(bk_ring_end(r), 0);
	assert_int_equal(bk_ring_lost(r), 0);
	assert_null(bk_ring_peek(r, 0, &len));
	assert_int_equal(len, 0);
	feed(r, &p, 0, 150000, 1 << 20);
	assert_int_equal(bk_ring_first(r), 0);
	assert_int_equal(bk_ring_last(r), 150000);
	assert_int_equal(bk_ring_lost(r), 0);
	/* Past the cap: read to the end, counted, not kept. */
	feed(r, &p, 150000, 250000, 1 << 20);
	assert_int_equal(bk_ring_end(r), 400000);
	assert_int_equal(bk_ring_first(r), 0);
	assert_int_equal(bk_ring_last(r), 200000);
	assert_int_equal(bk_ring_lost(r), 200000);
	/* What is kept is one piece, the stream's head. */
	at = bk_ring_peek(r, 0, &len);
	assert_int_equal(len, 200000);
	for (size_t i = 0; i < len; i++)
		if (at[i] != pattern(i))
			fail_msg("offset %zu is not the stream's", i);
	at = bk_ring_peek(r, 199990, &len);
	assert_int_equal(len, 10);
	assert_int_equal(at[0], pattern(199990));
	bk_ring_peek(r, 200000, &len);
	assert_int_equal(len, 0);
	pipe_close(&p);
}

static void keep_tail_wraps_and_loses_the_oldest(void **state)
{
	_cleanup_(bk_ring_freep) bk_ring *r = bk_ring_new(BK_RING_KEEP_TAIL, 100000);
	struct pipe_pair p = pipe_open();
	const uint8_t *at;
	size_t len;

	(void)state;
	assert_non_null(r);
	feed(r, &p, 0, 60000, 1 << 20);
	assert_int_equal(bk_ring_first(r), 0);
	assert_int_equal(bk_ring_last(r), 60000);
	assert_int_equal(bk_ring_lost(r), 0);
	assert_kept(r, 0, 60000);
	/* Past the cap: the newest 100000 bytes stay, across the wrap. */
	feed(r, &p, 60000, 190000, 1 << 20);
	assert_int_equal(bk_ring_end(r), 250000);
	assert_int_equal(bk_ring_last(r), 250000);
	assert_int_equal(bk_ring_first(r), 150000);
	assert_int_equal(bk_ring_lost(r), 150000);
	assert_kept(r, 150000, 100000);
	/* One piece ends at the wrap: offset 150000 is at 50000 of the buffer, 200000 at 0. */
	at = bk_ring_peek(r, 150000, &len);
	assert_int_equal(len, 50000);
	assert_int_equal(at[0], pattern(150000));
	at = bk_ring_peek(r, 200000, &len);
	assert_int_equal(len, 50000);
	assert_int_equal(at[0], pattern(200000));
	/* Before first: lost, nothing there. */
	bk_ring_peek(r, 149999, &len);
	assert_int_equal(len, 0);
	pipe_close(&p);
}

static void keep_tail_grows_before_it_wraps(void **state)
{
	/* A cap that is not a power of two: the buffer doubles from 64 KiB and stops at the cap. */
	_cleanup_(bk_ring_freep) bk_ring *r = bk_ring_new(BK_RING_KEEP_TAIL, 300000);
	struct pipe_pair p = pipe_open();

	(void)state;
	assert_non_null(r);
	for (uint64_t off = 0; off < 1000000; off += 50000) {
		feed(r, &p, off, 50000, 1 << 20);
		assert_int_equal(bk_ring_end(r), off + 50000);
		assert_int_equal(bk_ring_first(r), off + 50000 > 300000 ? off + 50000 - 300000 : 0);
		assert_kept(r, bk_ring_first(r), (size_t)(bk_ring_last(r) - bk_ring_first(r)));
	}
	assert_int_equal(bk_ring_cap(r), 300000);
	assert_int_equal(bk_ring_lost(r), 700000);
	pipe_close(&p);
}

static void a_ring_of_nothing_loses_everything(void **state)
{
	_cleanup_(bk_ring_freep) bk_ring *head = bk_ring_new(BK_RING_KEEP_HEAD, 0);
	_cleanup_(bk_ring_freep) bk_ring *tail = bk_ring_new(BK_RING_KEEP_TAIL, 0);
	struct pipe_pair p = pipe_open();
	size_t len;

	(void)state;
	assert_non_null(head);
	assert_non_null(tail);
	feed(head, &p, 0, 5000, 1 << 20);
	feed(tail, &p, 0, 7000, 1 << 20);
	assert_int_equal(bk_ring_end(head), 5000);
	assert_int_equal(bk_ring_lost(head), 5000);
	assert_int_equal(bk_ring_end(tail), 7000);
	assert_int_equal(bk_ring_lost(tail), 7000);
	assert_int_equal(bk_ring_first(tail), 7000);
	bk_ring_peek(tail, 7000, &len);
	assert_int_equal(len, 0);
	pipe_close(&p);
}

static void a_read_takes_at_most_max_and_sees_eof(void **state)
{
	_cleanup_(bk_ring_freep) bk_ring *r = bk_ring_new(BK_RING_KEEP_TAIL, 1 << 20);
	_cleanup_(bk_ring_freep) bk_ring *head = bk_ring_new(BK_RING_KEEP_HEAD, 10);
	struct pipe_pair p = pipe_open();

	(void)state;
	assert_true(feed(r, &p, 0, 40000, 1000) <= 1000);
	assert_int_equal(bk_ring_end(r), 40000);
	assert_kept(r, 0, 40000);
	/* Not kept, a read is bounded the same way. */
	assert_true(feed(head, &p, 0, 5000, 100) <= 100);
	assert_int_equal(bk_ring_lost(head), 4990);
	/* The writer gone and the pipe empty: end of file, and nothing changes. */
	close(p.w);
	p.w = -1;
	assert_int_equal(bk_ring_read(r, p.r, 1000), 0);
	assert_int_equal(bk_ring_end(r), 40000);
	/* A descriptor that is not one: the errno, nothing read. */
	assert_int_equal(bk_ring_read(r, -1, 1000), -EBADF);
	pipe_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keep_head_keeps_the_first_cap_bytes_and_counts_the_rest),
		cmocka_unit_test(keep_tail_wraps_and_loses_the_oldest),
		cmocka_unit_test(keep_tail_grows_before_it_wraps),
		cmocka_unit_test(a_ring_of_nothing_loses_everything),
		cmocka_unit_test(a_read_takes_at_most_max_and_sees_eof),
	};

	return cmocka_run_group_tests_name("ring", tests, NULL, NULL);
}
