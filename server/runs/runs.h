/* The run engine (DESIGN.md §5): a command the executor runs in the sandbox for a call — an Exec,
 * a background process — as the front sees it. One I/O thread and one epoll set (the only ones
 * in the front that serve runs) read every run's stdout and stderr into its rings, pump its stdin,
 * keep the grace after its exit and every deadline (the owner's, and its waiting calls'); one
 * lock covers every run; answers are made under it and sent once it is let go (the outbox), so
 * that nothing is sealed or sent while the lock is held.
 *
 * A run's owner — Exec (exec.c), the process rpcs (process.c) — embeds a bk_run first in its own
 * record and gives a table of operations (bk_run_ops), called with the lock held. The engine
 * owns the descriptors, the rings and the list of waiting calls; the owner owns its record and
 * its calls, and decides what each answer says.
 *
 * A run's life: bk_run_init (rings), bk_run_spawn (the executor's Spawn; ops->spawned with its
 * outcome) → live: output read into its rings, stdin written, ops->due at its deadline, its
 * waiting calls asked (ops->answer) whenever something changed → the Exited event (bk_runs_exited:
 * ops->exited), then, once both streams ended (or the grace after the exit did), ops->ended —
 * the engine is done with it. bk_run_drop ends it early (a reset, the stop); bk_run_free gives
 * it back, freed (ops->free) once the I/O thread can no longer see it.
 *
 * Bounds (what a caller can make the engine hold), one place each: the bytes read from a stream
 * per wake-up (RUNS_READ_BATCH, runs.c); every waiting call passes bk_run_wait, parked (a call
 * that cannot park is its owner's to answer at once); rings are sized by bk_run_init, from
 * budgets their owners reserve; what answers copy out of the rings, by their owner's budget
 * (process.c's), whose calls bk_runs_recheck asks again once it has room. */
#ifndef BK_RUNS_H
#define BK_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#include "boundary/link.h"
#include "rpc/call.h"
#include "runs/marks.h"
#include "runs/ring.h"

typedef struct bk_runs bk_runs;
typedef struct bk_run bk_run;

/* An answer made under the lock and sent once it is let go (bk_runs_unlock): send() ends its
 * call, on the thread that let the lock go, and frees what it answered with. */
typedef struct bk_outbox_item {
	struct bk_outbox_item *next;
	void (*send)(struct bk_outbox_item *item);
} bk_outbox_item;

/* A call that waits on a run (a long-poll, a write the run has not taken yet), in the owner's
 * record of it. */
typedef struct bk_run_waiter {
	struct bk_run_waiter *next;
	int64_t deadline_ms; /* CLOCK_MONOTONIC */
} bk_run_waiter;

typedef struct bk_run_ops {
	/* The executor answered the Spawn. err 0: the run is live, its streams read from now.
	 * Otherwise it never ran (reply: the executor's words, or NULL), or it was dropped meanwhile
	 * (ECANCELED), or it started (run->started) and could not be watched (killed already) — and
	 * the engine is done with it. */
	void (*spawned)(bk_run *run, int err, const bk_reply *reply);
	/* The Exited event: run->exit is set; the streams may still be open (a grace follows). May
	 * be NULL. */
	void (*exited)(bk_run *run, int64_t now);
	/* The exit came and both streams ended: the engine is done with the run. May be NULL. */
	void (*ended)(bk_run *run);
	/* now ≥ run->due: the owner's own deadline. It sets run->due to its next one, or 0. */
	void (*due)(bk_run *run, int64_t now);
	/* Answer the waiting call w (post its answer) if it has its answer now, or must have it
	 * (due: its deadline came, or the run is dropped): true when it did, and w leaves the list;
	 * false keeps it waiting. NULL when the owner never waits. */
	bool (*answer)(bk_run *run, bk_run_waiter *w, int64_t now, bool due);
	/* The engine and its thread are done with the record: free it. */
	void (*free)(bk_run *run);
} bk_run_ops;

enum { BK_RUN_STDOUT, BK_RUN_STDERR };

/* One output stream. */
typedef struct bk_run_stream {
	int fd;          /* the pipe (or terminal) it is read from; -1 once ended */
	bk_ring *ring;
	bk_marks *marks; /* when and in which order its bytes were read; NULL: not kept */
	bool eof;        /* ended: EOF, a terminal's EIO, or the grace after the exit */
	bool paused;     /* lossless: not read until a reader asks further */
	uint64_t asked;  /* lossless: the furthest offset a reader asked from */
} bk_run_stream;

/* stdin: the write in flight, as far as the pipe (or terminal) took it. */
typedef struct bk_run_stdin {
	int fd;           /* -1 once closed (a terminal's stays until the run ends: it is stdout too) */
	bool open;        /* takes writes: not closed, and the run not ended */
	bool busy;        /* a write is in flight */
	bool close_after; /* close once the write in flight is over */
	const uint8_t *data;
	size_t len, off;
	int err;          /* how the last write ended: 0 all of it; EPIPE nothing reads any more;
			   * ESRCH the run exited first */
} bk_run_stdin;

struct bk_run {
	/* the owner's, set before bk_run_spawn */
	const bk_run_ops *ops;
	bool tty;         /* stdout is the terminal, stderr a pipe at EOF, stdin the terminal too */
	bool lossless;    /* a full ring stops reading until a reader asks further (bk_run_asked) */
	bool keep_stdin;  /* stdin stays open after the spawn (a terminal's always does) */
	int64_t due;      /* the owner's next deadline (CLOCK_MONOTONIC ms), 0: none; set it with
			   * bk_run_due once the run is live */
	/* the engine's: read them under the lock */
	uint64_t exec_id;
	bool started;     /* the executor started it (even if it could not be watched) */
	bool live;        /* started, watched, and not ended or dropped */
	bool exited;
	int exit_code, signal;
	bool oom_killed;
	bk_run_stream out[2];
	uint64_t read_seq; /* the marks' read number: the next one each time the other stream is read */
	int last_read;     /* the stream read last (BK_RUN_STDOUT, BK_RUN_STDERR), -1 before any */
	bk_run_stdin in;
	bk_run_waiter *waiters;
	/* the engine's own */
	bk_runs *rs;
	bk_run *next;      /* in the engine's list while spawning or live; then on the dead list */
	bool spawning, dropped;
	int64_t grace_at;
	struct bk_run_watch {
		bk_run *run;
		int kind;
	} watches[3];
};

/* The engine of srv (srv->runs): its thread started. The composition root starts it before Exec
 * and the processes, and stops it after them. */
int bk_runs_start(bk_server *srv, bk_error **err);
/* Stop the thread; free what was given back. Every run has been dropped or has ended by now. */
void bk_runs_stop(bk_server *srv);

/* The executor's Exited event (its link's thread): the run of that exec id. */
void bk_runs_exited(bk_server *srv, const Boxkite__Executor__Exited *exited);

/* The lock over every run; unlocking sends what was posted meanwhile. */
void bk_runs_lock(bk_runs *rs);
void bk_runs_unlock(bk_runs *rs);
/* Send item's answer once the lock is let go (the lock held). */
void bk_runs_post(bk_runs *rs, bk_outbox_item *item);

/* Make run (zeroed) ready for bk_run_spawn: its two rings, keeping stdout_cap and stderr_cap
 * bytes by policy, and with marked the marks beside them. The owner sets ops, tty, lossless,
 * keep_stdin. 0, or -ENOMEM (free what was made with bk_run_free). */
int bk_run_init(bk_run *run, bk_runs *rs, enum bk_ring_policy policy, size_t stdout_cap, size_t stderr_cap,
		bool marked);
/* Send the executor its Spawn (spawn's exec_id and the run's are set here): ops->spawned follows.
 * Without the lock: the answer may come before this returns. */
void bk_run_spawn(bk_run *run, Boxkite__Executor__Spawn *spawn);
/* Signal the run's whole tree (SIGKILL: its init, and its PID namespace goes; any other signal
 * its init forwards to every process). done (with arg) is told the executor's answer, and must
 * take no lock of the engine's; NULL: a deadline's kill, sent whatever the load and only logged
 * if it fails. The lock may be held. */
void bk_run_signal(bk_run *run, int sig, bk_reply_fn done, void *arg);
/* The owner's next deadline is at (if earlier than the one set): the I/O thread wakes for it. */
void bk_run_due(bk_run *run, int64_t at);

/* Keep w waiting until ops->answer answers it — at the latest at its deadline. The one way a
 * call waits on a run, a live one (the I/O thread asks the waiting calls of live runs only; those
 * of a run that ends are answered as it ends). */
void bk_run_wait(bk_run *run, bk_run_waiter *w, int64_t deadline_ms);
/* Ask every waiting call of run for its answer now (force: every one must answer). */
void bk_run_notify(bk_run *run, int64_t now, bool force);
/* Every waiting call of run, taken off its list for the owner to answer otherwise (a reset). */
bk_run_waiter *bk_run_unwait_all(bk_run *run);
/* Ask every waiting call of every run again, on the I/O thread's next turn: something they wait
 * for besides their run came (room for an answer). The lock held. */
void bk_runs_recheck(bk_runs *rs);

/* Write len bytes of data (the caller's until the write is over: !run->in.busy) to stdin as it
 * takes them, then close stdin if close_after. What went in is in run->in.off, how it ended in
 * run->in.err; its waiting call is asked when it ends. */
void bk_run_stdin_write(bk_run *run, const uint8_t *data, size_t len, bool close_after);
/* Close stdin now, or once the write in flight is over. A terminal's input ends as typed: ^D. */
void bk_run_stdin_close(bk_run *run);
/* Give up the write in flight; how many bytes went in. */
size_t bk_run_stdin_cancel(bk_run *run);

/* A lossless reader asked from off on stream i: nothing before it needs keeping any more, and a
 * stream paused for room goes on. */
void bk_run_asked(bk_run *run, int i, uint64_t off);

/* A run that exited, ended now: what its streams hold is read (a lossless stream whose ring is
 * full is not read further) and they end, without waiting for the grace; its waiting calls are
 * asked as at any end. For a reset, whose KillAll left nothing of the run's tree. */
void bk_run_finish(bk_run *run, int64_t now);
/* End the run now: killed (its whole tree) if live, its descriptors closed, nothing more read;
 * its waiting calls are the owner's to answer (bk_run_unwait_all, bk_run_notify). One whose
 * Spawn is still out ends when its answer comes (ops->spawned with ECANCELED). */
void bk_run_drop(bk_run *run);
/* Give the record back: ops->free once the I/O thread cannot see it any more. The run has ended,
 * failed to spawn or been dropped. */
void bk_run_free(bk_run *run);

#endif
