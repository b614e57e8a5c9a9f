#include "stub.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boxkite/executor/order.pb-c.h"
#include "boxkite/v1/boxkite.pb-c.h"
#include "channel.h"
#include "cleanup.h"

typedef Boxkite__Executor__Order order_t;
typedef Boxkite__Executor__Reply reply_t;

struct stub_exec {
	struct stub_exec *next;
	stub *s;
	uint64_t id;
	char **argv;
	size_t argc;
	int in_r, out_w, err_w;
	int kill_efd;          /* written by a Kill */
	pthread_t thread;
};

struct stub {
	struct stub_state st;
	char dir[128];
	bk_channel exec_ch, files_ch;
	int stop_efd;
	int release_efd;       /* a semaphore: one `hold` exec ends per count */
	pthread_t exec_thread, files_thread;
	pthread_mutex_t lock;  /* execs */
	struct stub_exec *execs;
};

struct stub_state *stub_state(stub *s)
{
	return &s->st;
}

/* Send, and keep flushing until it is out: the stub may wait, it is not the front. */
static void stub_send(bk_channel *ch, reply_t *r, const int *fds, size_t nfds)
{
	int ret = bk_channel_send(ch, &r->base, fds, nfds, BK_CHANNEL_FORCE);

	while (ret == 1) {
		usleep(1000);
		ret = bk_channel_flush(ch);
	}
}

static void stub_error(bk_channel *ch, uint64_t id, int errnum, const char *message)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;

	r.id = id;
	r.errnum = errnum;
	r.step = "stub";
	r.message = (char *)message;
	stub_send(ch, &r, NULL, 0);
}

static void stub_done(bk_channel *ch, uint64_t id, uint64_t count, Boxkite__Executor__FileInfo *info)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Done done = BOXKITE__EXECUTOR__DONE__INIT;

	done.count = count;
	done.info = info;
	r.id = id;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_DONE;
	r.done = &done;
	stub_send(ch, &r, NULL, 0);
}

static void stub_opened(bk_channel *ch, uint64_t id, int fd)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Opened opened = BOXKITE__EXECUTOR__OPENED__INIT;

	r.id = id;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_OPENED;
	r.opened = &opened;
	stub_send(ch, &r, &fd, 1);
}

/* Wait for one order on ch (or the stop signal): NULL when stopping or the front closed. */
static order_t *stub_recv(stub *s, bk_channel *ch, int *fds, size_t *nfds, const atomic_bool *stalled)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = s->stop_efd, .events = POLLIN }, { .fd = ch->fd, .events = POLLIN } };
		order_t *o = NULL;
		int ret;

		if (stalled && atomic_load(stalled)) {
			if (poll(p, 1, 10) > 0)
				return NULL;
			continue;
		}
		if (poll(p, 2, -1) < 0 || (p[0].revents & POLLIN))
			return NULL;
		ret = bk_channel_recv(ch, &boxkite__executor__order__descriptor, (ProtobufCMessage **)&o, fds, nfds, NULL);
		if (ret == -EAGAIN)
			continue;
		if (ret < 0)
			return NULL;
		atomic_fetch_add(&s->st.orders_seen, 1);
		return o;
	}
}

/* --- the executor ---------------------------------------------------------------------------- */

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			return; /* the front closed its end: the rest is not read */
		c += w;
		n -= (size_t)w;
	}
}

static void *exec_main(void *arg)
{
	struct stub_exec *e = arg;
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Exited exited = BOXKITE__EXECUTOR__EXITED__INIT;
	const char *what = e->argv[0];

	exited.exec_id = e->id;
	if (!strcmp(what, "echo")) {
		for (size_t i = 1; i < e->argc; i++) {
			write_all(e->out_w, e->argv[i], strlen(e->argv[i]));
			write_all(e->out_w, i + 1 < e->argc ? " " : "", i + 1 < e->argc);
		}
		write_all(e->out_w, "\n", 1);
	} else if (!strcmp(what, "cat")) {
		char buf[65536];
		ssize_t n;
		while ((n = read(e->in_r, buf, sizeof(buf))) > 0)
			write_all(e->out_w, buf, (size_t)n);
	} else if (!strcmp(what, "flood") && e->argc == 2) {
		static char x[65536];
		size_t left = strtoull(e->argv[1], NULL, 10);
		memset(x, 'x', sizeof(x));
		while (left) {
			size_t n = left < sizeof(x) ? left : sizeof(x);
			write_all(e->out_w, x, n);
			left -= n;
		}
	} else if (!strcmp(what, "exit") && e->argc == 2) {
		exited.exit_code = atoi(e->argv[1]);
	} else if (!strcmp(what, "sleep")) {
		uint64_t v;
		if (read(e->kill_efd, &v, sizeof(v)) == sizeof(v))
			exited.signal = 9;
	} else if (!strcmp(what, "hold")) {
		struct pollfd p[2] = { { .fd = e->kill_efd, .events = POLLIN }, { .fd = e->s->release_efd, .events = POLLIN } };
		uint64_t v;
		while (poll(p, 2, -1) < 0 && errno == EINTR)
			;
		if (p[0].revents & POLLIN)
			exited.signal = 9;
		else if (read(e->s->release_efd, &v, sizeof(v)) != sizeof(v))
			exited.exit_code = 1;
	} else {
		write_all(e->err_w, "stub: unknown behaviour\n", 24);
		exited.exit_code = 127;
	}
	e->in_r = bk_close(e->in_r);
	e->out_w = bk_close(e->out_w);
	e->err_w = bk_close(e->err_w);
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_EXITED;
	r.exited = &exited;
	stub_send(&e->s->exec_ch, &r, NULL, 0);
	return NULL;
}

static void serve_spawn(stub *s, const order_t *o)
{
	const Boxkite__Executor__Spawn *sp = o->spawn;
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Spawned spawned = BOXKITE__EXECUTOR__SPAWNED__INIT;
	int in[2], out[2], err[2];
	struct stub_exec *e;

	atomic_fetch_add(&s->st.spawns, 1);
	if (sp->n_argv && !strcmp(sp->argv[0], "fail-chdir")) {
		r.id = o->id;
		r.errnum = ENOENT;
		r.child_step = BOXKITE__EXECUTOR__STEP__STEP_CHDIR;
		r.step = "chdir";
		r.message = "chdir: No such file or directory";
		stub_send(&s->exec_ch, &r, NULL, 0);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		stub_error(&s->exec_ch, o->id, ENOMEM, "stub: no pipes");
		free(e);
		return;
	}
	e->s = s;
	e->id = sp->exec_id;
	e->argc = sp->n_argv;
	e->argv = calloc(sp->n_argv + 1, sizeof(char *));
	for (size_t i = 0; i < sp->n_argv; i++)
		e->argv[i] = strdup(sp->argv[i]);
	e->in_r = in[0];
	e->out_w = out[1];
	e->err_w = err[1];
	e->kill_efd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_lock(&s->lock);
	e->next = s->execs;
	s->execs = e;
	pthread_mutex_unlock(&s->lock);
	r.id = o->id;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_SPAWNED;
	r.spawned = &spawned;
	int fds[3] = { in[1], out[0], err[0] };
	stub_send(&s->exec_ch, &r, fds, 3);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	pthread_create(&e->thread, NULL, exec_main, e);
}

static void serve_kill(stub *s, const order_t *o)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Killed killed = BOXKITE__EXECUTOR__KILLED__INIT;
	struct stub_exec *e;
	uint64_t one = 1;

	atomic_fetch_add(&s->st.kills, 1);
	pthread_mutex_lock(&s->lock);
	for (e = s->execs; e && e->id != o->kill->exec_id; e = e->next)
		;
	if (e && write(e->kill_efd, &one, sizeof(one)) != sizeof(one))
		e = NULL;
	pthread_mutex_unlock(&s->lock);
	if (!e) {
		stub_error(&s->exec_ch, o->id, ESRCH, "no such exec");
		return;
	}
	r.id = o->id;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_KILLED;
	r.killed = &killed;
	stub_send(&s->exec_ch, &r, NULL, 0);
}

static void *executor_main(void *arg)
{
	stub *s = arg;
	int fds[BK_CHANNEL_MAX_FDS];
	size_t nfds;
	order_t *o;

	while ((o = stub_recv(s, &s->exec_ch, fds, &nfds, NULL))) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (o->kind_case == BOXKITE__EXECUTOR__ORDER__KIND_SPAWN)
			serve_spawn(s, o);
		else if (o->kind_case == BOXKITE__EXECUTOR__ORDER__KIND_KILL)
			serve_kill(s, o);
		else
			stub_error(&s->exec_ch, o->id, EINVAL, "not an order the stub serves");
		protobuf_c_message_free_unpacked(&o->base, NULL);
	}
	return NULL;
}

/* --- the file worker ------------------------------------------------------------------------- */

static void serve_commit(stub *s, const order_t *o, int fd)
{
	struct stat st;
	uint8_t *data;

	atomic_fetch_add(&s->st.commits, 1);
	if (fstat(fd, &st) < 0 || !(data = malloc((size_t)st.st_size + 1)) ||
	    pread(fd, data, (size_t)st.st_size, 0) != st.st_size) {
		stub_error(&s->files_ch, o->id, EIO, "stub: cannot read the upload");
		return;
	}
	pthread_mutex_lock(&s->st.lock);
	free(s->st.committed);
	s->st.committed = data;
	s->st.committed_len = (size_t)st.st_size;
	s->st.committed_mode = o->commit->mode;
	snprintf(s->st.committed_path, sizeof(s->st.committed_path), "%s", o->commit->path);
	pthread_mutex_unlock(&s->st.lock);
	stub_done(&s->files_ch, o->id, 1, NULL);
}

static void serve_list(stub *s, const order_t *o)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Listed listed = BOXKITE__EXECUTOR__LISTED__INIT;
	unsigned n = atomic_load(&s->st.list_entries), len = atomic_load(&s->st.list_name_len);
	Boxkite__Executor__FileInfo *infos = calloc(n + 1, sizeof(*infos));
	Boxkite__Executor__FileInfo **ptrs = calloc(n + 1, sizeof(*ptrs));
	char *names = calloc(n + 1, len + 1);

	for (unsigned i = 0; i < n; i++) {
		char *name = names + (size_t)i * (len + 1), num[16];
		int k = snprintf(num, sizeof(num), "%06u", i);
		boxkite__executor__file_info__init(&infos[i]);
		/* Its number, then 'n' up to its length: names sort in the order sent. */
		memset(name, 'n', len);
		memcpy(name, num, (size_t)k < len ? (size_t)k : len);
		name[len] = '\0';
		infos[i].name = name;
		infos[i].type = BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR;
		ptrs[i] = &infos[i];
	}
	listed.n_entries = n;
	listed.entries = ptrs;
	r.id = o->id;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_LISTED;
	r.listed = &listed;
	stub_send(&s->files_ch, &r, NULL, 0);
	free(infos);
	free(ptrs);
	free(names);
}

static void serve_file(stub *s, const order_t *o, int *fds, size_t nfds)
{
	char path[512];
	int fd;

	switch (o->kind_case) {
	case BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP:
		fd = memfd_create("stub-upload", MFD_CLOEXEC);
		stub_opened(&s->files_ch, o->id, fd);
		close(fd);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_COMMIT:
		if (nfds == 1)
			serve_commit(s, o, fds[0]);
		else
			stub_error(&s->files_ch, o->id, EINVAL, "no file");
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ:
		if (strncmp(o->open_read->path, "/workspace/", 11) != 0) {
			stub_error(&s->files_ch, o->id, ENOENT, o->open_read->path);
			return;
		}
		snprintf(path, sizeof(path), "%s/%s", s->dir, o->open_read->path + 11);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			stub_error(&s->files_ch, o->id, errno, o->open_read->path);
			return;
		}
		stub_opened(&s->files_ch, o->id, fd);
		close(fd);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_USAGE:
		atomic_fetch_add(&s->st.usages, 1);
		stub_done(&s->files_ch, o->id, atomic_load(&s->st.usage), NULL);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_LIST:
		serve_list(s, o);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_STAT: {
		Boxkite__Executor__FileInfo info = BOXKITE__EXECUTOR__FILE_INFO__INIT;
		info.name = o->stat->path;
		info.type = BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR;
		stub_done(&s->files_ch, o->id, 0, &info);
		return;
	}
	case BOXKITE__EXECUTOR__ORDER__KIND_MKDIR:
	case BOXKITE__EXECUTOR__ORDER__KIND_REMOVE:
	case BOXKITE__EXECUTOR__ORDER__KIND_RENAME:
		stub_done(&s->files_ch, o->id, 0, NULL);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_WATCH:
		pthread_mutex_lock(&s->st.lock);
		snprintf(s->st.watch_path, sizeof(s->st.watch_path), "%s", o->watch->path);
		pthread_mutex_unlock(&s->st.lock);
		atomic_store(&s->st.watch_key, o->watch->watch);
		atomic_fetch_add(&s->st.watches, 1);
		stub_done(&s->files_ch, o->id, 1, NULL);
		return;
	case BOXKITE__EXECUTOR__ORDER__KIND_UNWATCH:
		atomic_fetch_add(&s->st.unwatches, 1);
		stub_done(&s->files_ch, o->id, 0, NULL);
		return;
	default:
		stub_error(&s->files_ch, o->id, EINVAL, "not an order the stub serves");
		return;
	}
}

static void *files_main(void *arg)
{
	stub *s = arg;
	int fds[BK_CHANNEL_MAX_FDS];
	size_t nfds;
	order_t *o;

	while ((o = stub_recv(s, &s->files_ch, fds, &nfds, &s->st.files_stalled))) {
		serve_file(s, o, fds, nfds);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		protobuf_c_message_free_unpacked(&o->base, NULL);
	}
	return NULL;
}

void stub_changes(stub *s, uint64_t watch, Boxkite__Executor__Change **changes, size_t n, uint32_t end)
{
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Changes c = BOXKITE__EXECUTOR__CHANGES__INIT;

	c.watch = watch;
	c.n_changes = n;
	c.changes = changes;
	c.end = end;
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_CHANGES;
	r.changes = &c;
	stub_send(&s->files_ch, &r, NULL, 0);
}

/* --- start and stop -------------------------------------------------------------------------- */

int stub_start(stub **out, const char *dir, int *executor_fd)
{
	stub *s = calloc(1, sizeof(*s));
	reply_t r = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Pong pong = BOXKITE__EXECUTOR__PONG__INIT;
	Boxkite__Executor__FilesReady ready = BOXKITE__EXECUTOR__FILES_READY__INIT;
	int ex[2], fs[2];

	/* Sized as boxkited sizes its channels when this process may (SO_SNDBUFFORCE needs
	 * CAP_NET_ADMIN); without, packets are bounded by the default buffers (~208 KiB), which the
	 * tests that need no root stay below. */
	if (!s || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ex) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fs) < 0) {
		fprintf(stderr, "stub: socketpair: %s\n", strerror(errno));
		free(s);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		int size = BK_CHANNEL_SNDBUF;
		setsockopt(ex[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
		setsockopt(fs[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
	}
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->st.lock, NULL);
	atomic_init(&s->st.list_entries, 10);
	atomic_init(&s->st.list_name_len, 8);
	s->stop_efd = eventfd(0, EFD_CLOEXEC);
	s->release_efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE | EFD_NONBLOCK);
	bk_channel_init(&s->exec_ch, ex[1], SIZE_MAX);
	bk_channel_init(&s->files_ch, fs[1], SIZE_MAX);
	/* What the executor says first: here is the file worker, and the sandbox is ready. */
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_FILES_READY;
	r.files_ready = &ready;
	stub_send(&s->exec_ch, &r, &fs[0], 1);
	close(fs[0]);
	pong.sandbox_ready = true;
	pong.mode = "stub";
	pong.isolation_profile = "stub-profile";
	r.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_PONG;
	r.pong = &pong;
	stub_send(&s->exec_ch, &r, NULL, 0);
	pthread_create(&s->exec_thread, NULL, executor_main, s);
	pthread_create(&s->files_thread, NULL, files_main, s);
	*executor_fd = ex[0];
	*out = s;
	return 0;
}

void stub_release(stub *s)
{
	uint64_t one = 1;

	if (write(s->release_efd, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "stub: cannot release: %s\n", strerror(errno));
}

void stub_stop(stub *s)
{
	uint64_t one = 1;

	if (!s)
		return;
	if (write(s->stop_efd, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "stub: cannot stop: %s\n", strerror(errno));
	pthread_join(s->exec_thread, NULL);
	pthread_join(s->files_thread, NULL);
	while (s->execs) {
		struct stub_exec *e = s->execs;
		if (write(e->kill_efd, &one, sizeof(one)) != sizeof(one))
			fprintf(stderr, "stub: cannot end exec %llu\n", (unsigned long long)e->id);
		pthread_join(e->thread, NULL);
		s->execs = e->next;
		for (size_t i = 0; i < e->argc; i++)
			free(e->argv[i]);
		free(e->argv);
		close(e->kill_efd);
		free(e);
	}
	bk_channel_fini(&s->exec_ch);
	bk_channel_fini(&s->files_ch);
	close(s->stop_efd);
	close(s->release_efd);
	free(s->st.committed);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->st.lock);
	free(s);
}
