/* bkctl exec: run one command in the sandbox, and end with its exit status. Its output streams
 * as it is produced (a background process followed to its end: bk_exec_stream), our standard
 * input streams to it (-i), a terminal with -t; -o json and --output-limit collect the output
 * with one Exec call instead. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "bkctl.h"
#include "cleanup.h"
#include "fullio.h"
#include "json.h"

#define STDIN_MAX (8u << 20) /* what one Exec request may carry (the server's limit) */
/* The streamed command dies this long after bkctl stops calling for it (killed with SIGKILL,
 * a crash, a lost network): never left running. */
#define LEASE_MS 15000
/* bkctl calls at least this often (ProcessWait without waiting) while it runs, also when our
 * stdout is slow to take the output and no read is in flight. */
#define LEASE_RENEW_MS 5000
/* SIGTERM (or SIGHUP) to bkctl: the same to the command, then SIGKILL this much later. */
#define TERM_KILL_AFTER_MS 5000
/* The most of our standard input one ProcessWrite carries (the server's limit). */
#define STDIN_CHUNK (1u << 20)

static void print_result_json(const bk_exec_result *r)
{
	bk_json j = { .out = stdout };

	bk_json_begin_object(&j, NULL);
	bk_json_int(&j, "exit_code", r->exit_code);
	bk_json_int(&j, "signal", r->signal);
	bk_json_bool(&j, "timed_out", r->timed_out);
	bk_json_bool(&j, "oom_killed", r->oom_killed);
	bk_json_bytes(&j, "stdout", r->stdout_data, r->stdout_len);
	bk_json_bytes(&j, "stderr", r->stderr_data, r->stderr_len);
	bk_json_bool(&j, "stdout_truncated", r->stdout_truncated);
	bk_json_bool(&j, "stderr_truncated", r->stderr_truncated);
	bk_json_uint(&j, "stdout_dropped", r->stdout_dropped);
	bk_json_uint(&j, "stderr_dropped", r->stderr_dropped);
	bk_json_uint(&j, "duration_us", r->duration_us);
	bk_json_string(&j, "isolation_profile", r->isolation_profile);
	bk_json_end_object(&j);
}

/* The exit status bkctl exec ends with: the command's own, 128+signal, or 124 on timeout. */
static int result_exit(const bk_exec_result *r)
{
	if (r->timed_out)
		return BKCTL_EXIT_EXEC_TIMEOUT;
	if (r->signal)
		return 128 + r->signal;
	return r->exit_code;
}

/* bkctl's own failures in exec exit 125, so that they cannot pass for the command's status. */
static int exec_fail(const bkctl *ctl, const bk_status *st)
{
	bkctl_fail(ctl, st);
	return BKCTL_EXIT_EXEC_FAILED;
}

/* Our standard input, whole (-i): what one Exec request may carry. 0, or the exit code. */
static int read_stdin(const bkctl *ctl, uint8_t **in, size_t *len)
{
	int r = bk_read_all(STDIN_FILENO, STDIN_MAX, in, len);

	if (r < 0) {
		fprintf(stderr, "%s: -i: reading our standard input: %s\n", ctl->prog,
			r == -EFBIG ? "more than 8 MiB (one request's limit)" : strerror(-r));
		return BKCTL_EXIT_EXEC_FAILED;
	}
	return 0;
}

/* A pipe on our stdin and no -i: the command would not see what is being piped, say so (the
 * data is not read: docker exec without -i does the same, silently). */
static void warn_unread_pipe(const bkctl *ctl)
{
	struct stat sb;

	if (fstat(STDIN_FILENO, &sb) == 0 && S_ISFIFO(sb.st_mode))
		fprintf(stderr, "%s: warning: standard input is a pipe, but without -i the command does not read it\n",
			ctl->prog);
}

/* --- Streaming ------------------------------------------------------------------------------ */

/* The local terminal's settings while -it has it in raw mode: put back at exit, whichever way
 * bkctl leaves (every signal that would end it is taken by the signal thread instead). */
static struct termios saved_termios;
static bool terminal_is_raw;

static void terminal_restore(void)
{
	if (terminal_is_raw && tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios) == 0)
		terminal_is_raw = false;
}

/* The end of a line bkctl writes while the command's output streams: in raw mode our terminal
 * no longer turns \n into \r\n. */
static const char *eol(void)
{
	return terminal_is_raw ? "\r\n" : "\n";
}

/* Our terminal in raw mode: every key (^C, ^D, ^Z too) goes to the command's terminal as a byte,
 * and its line discipline, not ours, makes signals of them. */
static int terminal_make_raw(void)
{
	static bool registered;
	struct termios raw;

	if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
		return -errno;
	if (!registered && atexit(terminal_restore) == 0)
		registered = true;
	raw = saved_termios;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0)
		return -errno;
	terminal_is_raw = true;
	return 0;
}

/* One streamed exec: the process, and the two threads beside the one that follows its output. */
typedef struct stream_exec {
	const bkctl *ctl;
	bk_client *c;
	char id[BK_PROCESS_ID_MAX];
	uint64_t epoch;           /* id's: no call of ours reaches another boxkited's process of that id */
	bool tty;                 /* -t */
	bool feed_stdin;          /* -i */
	int sigfd;                /* SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGWINCH, blocked in every thread */
	int stop[2];              /* a pipe, written when following ended: the threads return */
	pthread_t signals, input;
	bool signals_running, input_running;
	atomic_bool stdout_gone;  /* our stdout was closed (EPIPE): its output is dropped */
	bkctl_term out, err;      /* our stdout and stderr: control sequences escaped on a terminal */
} stream_exec;

static const int forwarded_signals[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGWINCH };

/* A signal to the command, told on stderr when it cannot be sent (an ended command is no news). */
static void send_signal(stream_exec *s, int sig, uint32_t kill_after_ms)
{
	bk_status st;

	if (bk_process_signal(s->c, s->id, s->epoch, sig, kill_after_ms, &st) != BK_OK && st.code != BK_FAILED_PRECONDITION &&
	    st.code != BK_NOT_FOUND) {
		fprintf(stderr, "%s: cannot signal the command (%s): ", s->ctl->prog, bk_status_name(st.code));
		bkctl_put_text(stderr, st.message);
		fputs(eol(), stderr);
	}
}

/* What a signal to bkctl does to the command: ^C is forwarded as SIGINT, a second one kills the
 * tree; SIGTERM and SIGHUP stop it (SIGTERM, SIGKILL a little later); a window resize resizes
 * its terminal. With -it none of ^C, ^\ reach us: they are bytes for the command's terminal. */
static void on_signal(stream_exec *s, int sig, int *interrupts)
{
	uint32_t rows = 0, cols = 0;

	switch (sig) {
	case SIGINT:
		if (++*interrupts == 1) {
			send_signal(s, SIGINT, 0);
			break;
		}
		fprintf(stderr, "%s%s: interrupted again: killing the command and everything it started%s", eol(),
			s->ctl->prog, eol());
		send_signal(s, SIGKILL, 0);
		break;
	case SIGQUIT:
		send_signal(s, SIGQUIT, 0);
		break;
	case SIGTERM:
	case SIGHUP:
		send_signal(s, SIGTERM, TERM_KILL_AFTER_MS);
		break;
	case SIGWINCH:
		if (s->tty && bkctl_terminal_size(&rows, &cols) == 0 && rows && cols)
			(void)bk_process_resize(s->c, s->id, s->epoch, rows, cols, NULL);
		break;
	default:
		break;
	}
}

static void *signal_thread(void *arg)
{
	stream_exec *s = arg;
	int interrupts = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->sigfd, .events = POLLIN }, { .fd = s->stop[0], .events = POLLIN } };
		struct signalfd_siginfo si;
		bk_process_status ps;
		uint64_t epoch = s->epoch;
		int n = poll(p, 2, LEASE_RENEW_MS);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[1].revents)
			return NULL;
		if (n == 0) {
			/* Keeps the lease while the follower waits on our stdout. */
			(void)bk_process_wait(s->c, s->id, &epoch, 0, &ps, NULL);
			continue;
		}
		if (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			on_signal(s, (int)si.ssi_signo, &interrupts);
	}
}

/* Whatever of our stdin is there right now, after the first n bytes of buf, up to size: poll
 * says what can be read without waiting. *eof when it ended. */
static size_t stdin_gather(uint8_t *buf, size_t n, size_t size, bool *eof)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

	while (n < size && poll(&p, 1, 0) == 1) {
		ssize_t r = read(STDIN_FILENO, buf + n, size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			*eof = true;
			break;
		}
		n += (size_t)r;
	}
	return n;
}

/* -i: our stdin to the command's as it comes, in writes of up to 1 MiB, stdin closed at our EOF.
 * A command that closed its stdin or ended takes no more: no error. */
static void *input_thread(void *arg)
{
	stream_exec *s = arg;
	_cleanup_free_ uint8_t *buf = malloc(STDIN_CHUNK);
	bk_status st;

	if (!buf) {
		fprintf(stderr, "%s: -i: out of memory; the command's stdin is closed%s", s->ctl->prog, eol());
		(void)bk_process_close_stdin(s->c, s->id, s->epoch, NULL);
		return NULL;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN }, { .fd = s->stop[0], .events = POLLIN } };
		bool eof = false;
		size_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		n = stdin_gather(buf, 0, STDIN_CHUNK, &eof);
		if (!n && !eof)
			continue;
		if (bk_process_write(s->c, s->id, s->epoch, buf, n, eof, NULL, &st) != BK_OK) {
			if (st.code != BK_FAILED_PRECONDITION && st.code != BK_NOT_FOUND) {
				fprintf(stderr, "%s: -i: writing to the command's stdin (%s): ", s->ctl->prog,
					bk_status_name(st.code));
				bkctl_put_text(stderr, st.message);
				fputs(eol(), stderr);
			}
			return NULL;
		}
		if (eof)
			return NULL;
	}
}

static bool on_started(void *arg, const char *id, uint64_t epoch)
{
	stream_exec *s = arg;

	snprintf(s->id, sizeof(s->id), "%s", id);
	s->epoch = epoch;
	if (pthread_create(&s->signals, NULL, signal_thread, s) != 0)
		return false;
	s->signals_running = true;
	if (s->feed_stdin) {
		if (pthread_create(&s->input, NULL, input_thread, s) != 0)
			return false;
		s->input_running = true;
	}
	return true;
}

static bool on_output(void *arg, int stream, uint64_t offset, const uint8_t *data, size_t len)
{
	stream_exec *s = arg;
	bool err = stream == BK_STREAM_STDERR;

	(void)offset;
	if (!err && atomic_load(&s->stdout_gone))
		return true;
	/* Where our stdout was closed (bkctl exec ... | head), the command meets what it would meet
	 * writing to a closed pipe itself. Its output goes on being read to its end and dropped. */
	if (bkctl_term_write(err ? &s->err : &s->out, data, len) == -EPIPE && !err &&
	    !atomic_exchange(&s->stdout_gone, true))
		send_signal(s, SIGPIPE, TERM_KILL_AFTER_MS);
	return true;
}

static void on_lost(void *arg, int stream, uint64_t offset, uint64_t bytes)
{
	stream_exec *s = arg;

	if (stream == BK_STREAM_STDOUT && atomic_load(&s->stdout_gone))
		return; /* dropped anyway */
	fprintf(stderr, "%s: %llu bytes of the command's %s were lost before bkctl read them (its ring dropped "
			"them); output goes on from offset %llu%s",
		s->ctl->prog, (unsigned long long)bytes, stream == BK_STREAM_STDERR ? "stderr" : "stdout",
		(unsigned long long)offset, eol());
}

/* Stop the threads (following ended) and close what the session opened. */
static void stream_exec_end(stream_exec *s)
{
	if (s->stop[1] >= 0)
		(void)!write(s->stop[1], "x", 1);
	if (s->signals_running)
		pthread_join(s->signals, NULL);
	if (s->input_running)
		pthread_join(s->input, NULL);
	s->signals_running = s->input_running = false;
	if (s->sigfd >= 0)
		close(s->sigfd);
	if (s->stop[0] >= 0)
		close(s->stop[0]);
	if (s->stop[1] >= 0)
		close(s->stop[1]);
	s->sigfd = s->stop[0] = s->stop[1] = -1;
}

/* Why the command ended, for a person, on stderr; and the exit status bkctl exec ends with: the
 * command's own, 128+N for signal N, 124 past its --timeout. */
static int stream_exit(const bkctl *ctl, const bk_process_status *ps)
{
	if (ps->runtime_exceeded) {
		fprintf(stderr, "%s: timed out after %.1f s: the command and everything it started were killed\n",
			ctl->prog, (double)ps->duration_us / 1e6);
		return BKCTL_EXIT_EXEC_TIMEOUT;
	}
	/* Killed because we did not follow it (stopped with ^Z, or cut off from boxkited): bkctl's
	 * failure, not the command's status, so 125 as bkctl exec --help says. */
	if (ps->lease_expired) {
		fprintf(stderr, "%s: the command was killed because bkctl did not reach boxkited for %d s (its lease: "
				"a bkctl stopped or cut off that long counts as gone)\n",
			ctl->prog, LEASE_MS / 1000);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	if (ps->oom_killed)
		fprintf(stderr, "%s: killed by the out-of-memory killer (memory limit)\n", ctl->prog);
	else if (ps->signal && ps->signal != SIGINT && ps->signal != SIGPIPE) /* as a shell, quiet for those */
		fprintf(stderr, "%s: killed by signal %d (%s)\n", ctl->prog, ps->signal, strsignal(ps->signal));
	return ps->signal ? 128 + ps->signal : ps->exit_code;
}

/* The command run as a process and followed to its end. Signals are blocked from here on in every
 * thread (nng's too, which bkctl_connect starts): the signal thread takes them. */
static int exec_streamed(bkctl *ctl, bk_process_request *rq, bool raw)
{
	stream_exec s = { .ctl = ctl, .tty = rq->tty, .feed_stdin = rq->stdin_open, .sigfd = -1, .stop = { -1, -1 } };
	bk_process_handlers h = { .output = on_output, .lost = on_lost, .started = on_started, .arg = &s };
	bk_process_started started;
	bk_process_status ps;
	bk_status st;
	sigset_t set;
	int code;

	/* With -t the command has a terminal of its own, which stands for ours: its bytes are meant
	 * for our terminal as they are (docker exec -t). */
	bkctl_term_init(&s.out, STDOUT_FILENO, raw || rq->tty);
	bkctl_term_init(&s.err, STDERR_FILENO, raw || rq->tty);
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
		sigaddset(&set, forwarded_signals[i]);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 || (s.sigfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    pipe2(s.stop, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: cannot set up signal handling: %s\n", ctl->prog, strerror(errno));
		stream_exec_end(&s);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	s.c = bkctl_connect(ctl, &code);
	if (!s.c) {
		stream_exec_end(&s);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	if (rq->tty && rq->stdin_open && terminal_make_raw() < 0) {
		fprintf(stderr, "%s: -t: cannot put our terminal in raw mode: %s\n", ctl->prog, strerror(errno));
		stream_exec_end(&s);
		bk_client_close(s.c);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	code = bk_exec_stream(s.c, rq, &h, &started, &ps, &st);
	bkctl_term_flush(&s.out);
	bkctl_term_flush(&s.err);
	stream_exec_end(&s);
	terminal_restore();
	bk_client_close(s.c);
	if (code == BK_ABORTED && started.id[0]) {
		/* A Reset killed it (SIGKILL, its whole tree), as it kills an Exec's command: ended as
		 * killed, with why. */
		fprintf(stderr, "%s: the sandbox was reset: the command and everything it started were killed\n",
			ctl->prog);
		return 128 + SIGKILL;
	}
	if (code != BK_OK) {
		bkctl_fail(ctl, &st);
		if (started.id[0])
			fprintf(stderr, "%s: bkctl stopped following the command (%s) and killed it (or its lease does, "
					"within %d s, where boxkited could not be reached)\n",
				ctl->prog, started.id, LEASE_MS / 1000);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	return stream_exit(ctl, &ps);
}


/* The command with one Exec call, its output collected (-o json, --output-limit). */
static int exec_collected(bkctl *ctl, bk_exec_request *rq, bool want_stdin, bool raw)
{
	_cleanup_free_ uint8_t *in = NULL;
	bk_exec_result res;
	bk_status st;
	bk_client *c;
	int code;

	if (want_stdin) {
		code = read_stdin(ctl, &in, &rq->stdin_len);
		if (code)
			return code;
		rq->stdin_data = in;
	}
	c = bkctl_connect(ctl, &code);
	if (!c)
		return BKCTL_EXIT_EXEC_FAILED;
	code = bk_exec(c, rq, &res, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return exec_fail(ctl, &st);
	if (ctl->json) {
		print_result_json(&res);
	} else {
		bkctl_term out, err;
		bkctl_term_init(&out, STDOUT_FILENO, raw);
		bkctl_term_init(&err, STDERR_FILENO, raw);
		/* Where our stdout went away (a closed pipe), there is no one to tell. */
		if (bkctl_term_write(&out, res.stdout_data, res.stdout_len) == 0)
			bkctl_term_flush(&out);
		if (bkctl_term_write(&err, res.stderr_data, res.stderr_len) == 0)
			bkctl_term_flush(&err);
		if (res.stdout_truncated || res.stderr_truncated)
			fprintf(stderr, "%s: output truncated: %llu stdout and %llu stderr bytes dropped\n", ctl->prog,
				(unsigned long long)res.stdout_dropped, (unsigned long long)res.stderr_dropped);
		if (res.timed_out)
			fprintf(stderr, "%s: timed out after %.1f s: the command and everything it started were killed\n",
				ctl->prog, (double)res.duration_us / 1e6);
		else if (res.oom_killed)
			fprintf(stderr, "%s: killed by the out-of-memory killer (memory limit)\n", ctl->prog);
		else if (res.signal)
			fprintf(stderr, "%s: killed by signal %d\n", ctl->prog, res.signal);
	}
	code = result_exit(&res);
	bk_exec_result_free(&res);
	return code;
}

/* -t: the command's terminal stands for ours, so it gets our TERM (as docker exec -t does), unless
 * -e TERM=... says otherwise; without one of ours, the sandbox's default. */
static void pass_our_term(bk_env_var *env, size_t *n)
{
	const char *term = getenv("TERM");

	if (!term || !term[0])
		return;
	for (size_t i = 0; i < *n; i++) {
		if (strcmp(env[i].name, "TERM") == 0)
			return;
	}
	env[(*n)++] = (bk_env_var){ .name = "TERM", .value = term };
}

int bkctl_exec(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	/* One per -e at most, and our TERM. */
	_cleanup_free_ bk_env_var *env = calloc((size_t)argc + 1, sizeof(*env));
	_cleanup_free_ const char **allow = calloc((size_t)argc, sizeof(*allow));
	bk_exec_request rq = { 0 };
	/* Lossless: the command waits for bkctl to take its output, as it would for a pipe. */
	bk_process_request prq = { .lease_ms = LEASE_MS, .lossless = true };
	bool want_stdin = false, collect = false, raw = false;
	int opt, help = 0;

	if (!env || !allow) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		switch (opt) {
		case BKCTL_OPT_TIMEOUT:
			if (bkctl_parse_seconds(optarg, &rq.timeout_ms) < 0) {
				fprintf(stderr, "%s: --timeout %s: expected seconds (0 < S <= 86400)\n", ctl->prog, optarg);
				goto usage;
			}
			break;
		case 'w':
		case 'C':
			rq.cwd = optarg;
			break;
		case 'e':
			if (bkctl_parse_env(ctl, optarg, env, &rq.n_env) < 0)
				goto usage;
			break;
		case 'i':
			want_stdin = true;
			break;
		case 's':
			rq.shell = optarg;
			break;
		case 't':
			prq.tty = true;
			break;
		case BKCTL_OPT_OUTPUT_LIMIT:
			if (bkctl_parse_size(optarg, &rq.stdout_limit) < 0) {
				fprintf(stderr, "%s: --output-limit %s: expected bytes, e.g. 4096, 64K, 16M, 1G\n",
					ctl->prog, optarg);
				goto usage;
			}
			rq.stderr_limit = rq.stdout_limit;
			collect = true;
			break;
		case BKCTL_OPT_RAW:
			raw = true;
			break;
		case BKCTL_OPT_ALLOW_NET:
			/* The server checks the pattern and that its ceiling covers it. */
			allow[rq.n_allow_net++] = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if ((optind < argc) == (rq.shell != NULL)) {
		fprintf(stderr, "%s: give a command after --, or --shell STRING\n", ctl->prog);
		bkctl_usage_error(cmd);
		goto usage;
	}
	if (!rq.shell)
		rq.argv = (const char *const *)argv + optind;
	rq.env = env;
	rq.allow_net = rq.n_allow_net ? allow : NULL;
	if (!want_stdin)
		warn_unread_pipe(ctl);
	collect = collect || ctl->json;
	if (prq.tty && collect) {
		fprintf(stderr, "%s: -t does not go with %s: those collect the output with one call, a terminal "
				"streams it\n",
			ctl->prog, ctl->json ? "-o json" : "--output-limit");
		return BKCTL_EXIT_EXEC_FAILED;
	}
	/* As docker exec -t: the terminal the command gets stands for ours. */
	if (prq.tty && !isatty(STDIN_FILENO)) {
		fprintf(stderr, "%s: -t: our standard input is not a terminal (run bkctl from one, or without -t)\n",
			ctl->prog);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	if (collect)
		return exec_collected(ctl, &rq, want_stdin, raw);
	if (prq.tty)
		pass_our_term(env, &rq.n_env);
	prq.argv = rq.argv;
	prq.shell = rq.shell;
	prq.cwd = rq.cwd;
	prq.env = rq.env;
	prq.n_env = rq.n_env;
	prq.allow_net = rq.allow_net;
	prq.n_allow_net = rq.n_allow_net;
	prq.stdin_open = want_stdin;
	prq.max_runtime_ms = rq.timeout_ms;
	if (prq.tty && bkctl_terminal_size(&prq.rows, &prq.cols) < 0)
		prq.rows = prq.cols = 0; /* 24x80 */
	return exec_streamed(ctl, &prq, raw);
usage:
	/* A bad command line is one more way for the command not to run (bkctl(1)); what was wrong
	 * is said already. */
	return BKCTL_EXIT_EXEC_FAILED;
}
