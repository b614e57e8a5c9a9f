/* bk-probe: one sandbox escape attempt per run, reported on one line (STYLE.md §13, after
 * bubblewrap's tests/try-syscall.c).
 *
 * The integration tests copy this static binary into a sandbox's workspace and run it as the
 * sandboxed command, `bk-probe <name> [args]` (`bk-probe list` names every probe). It makes one
 * attack and prints exactly one line on stdout:
 *
 *   PROBE <name> DENIED <reason> [<detail>]        exit 0  the attack failed as a sandbox makes it fail
 *   PROBE <name> ALLOWED <detail>                  exit 1  the attack worked
 *   PROBE <name> ERROR <detail>                    exit 2  the probe cannot decide
 *   PROBE whoami INFO uid=U euid=U gid=G egid=G    exit 0  (what setuid-exec reads)
 *
 * <reason> is one token: an errno name (EPERM), a signal name (SIGSYS), an observed fact (only-lo,
 * capped-at-63), or, when several attempts were refused differently, their list
 * (clone=EPERM,clone3=ENOSYS). Progress and diagnostics go to stderr.
 *
 * A harness must be able to trust the verdict in both directions, so:
 *  - DENIED only on an errno that means "refused" (EPERM, EACCES, ENOSYS, and per probe the few
 *    others that do, e.g. EROFS, ESRCH, ECONNREFUSED) or on an observed fact. An errno that proves
 *    neither (one our own arguments could have caused) is ERROR, never DENIED.
 *  - Gate probes pass arguments the kernel rejects only after its privilege check (a wrong reboot
 *    magic, a pivot_root target that is no mount point, an empty module image...): any errno but
 *    a refusal proves the check was passed, so it is ALLOWED. The same trick keeps them harmless.
 *  - Each probe runs in a forked child. A seccomp kill (SIGSYS) of an attack becomes
 *    "DENIED SIGSYS"; any other fatal signal (the OOM killer's SIGKILL, the PROBE_TIMEOUT_S alarm)
 *    is re-raised by the parent, so the harness sees it as if the probe had run alone.
 *
 * Harmless outside a sandbox, even as root: mounts go on a temporary directory of ours and are
 * undone; umount asks for MNT_EXPIRE|MNT_DETACH, which the kernel rejects after the privilege
 * check; module and kexec loads get invalid images; reboot gets a wrong magic; settime sets the
 * clock to the time it just read; files we create are removed and existing files get a zero-byte
 * write; ptrace tries PTRACE_SEIZE (no stop) first; the bombs stop after BOMB_TIME_CAP_S, their
 * children die with us and the memory bomb volunteers as the OOM killer's first victim.
 * Network probes dial only the address they are given.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/io_uring.h>
#include <linux/kexec.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

#define PROBE_PRINTF(a, b) __attribute__((format(printf, a, b)))

#define PROBE_TIMEOUT_S 60  /* a probe that hangs dies by SIGALRM, which the harness sees */
#define BOMB_TIME_CAP_S 10  /* fork-, memory- and fsize-bomb give up (ERROR) after this long */
#define TCP_TIMEOUT_MS 2000
#define UDP_TIMEOUT_MS 1000
#define SANDBOX_ID 1001     /* the uid and gid a boxkite sandbox runs commands as */
#define MEMORY_STEP_MIB 16

enum { EXIT_DENIED = 0, EXIT_ALLOWED = 1, EXIT_UNDECIDED = 2 };

enum probe_kind {
	PROBE_ATTACK,  /* a seccomp kill means the attack was refused */
	PROBE_OBSERVE, /* a seccomp kill means we could not look */
};

struct probe {
	const char *name;
	const char *args; /* synopsis of the arguments, "" if none */
	int min_args, max_args;
	enum probe_kind kind;
	int (*run)(char **argv); /* argv: the arguments after the name, NULL-terminated, count checked */
	const char *what;
};

BK_DEFINE_PTR_CLEANUP(fclosep, FILE, fclose)
BK_DEFINE_PTR_CLEANUP(closedirp, DIR, closedir)

/* Errnos that mean "you may not": a missing privilege, an LSM, or a seccomp ERRNO rule. */
static const int refusals[] = { EPERM, EACCES, ENOSYS, 0 };
/* ...and, for an operation on another process, "there is no such process for you". */
static const int pid_refusals[] = { EPERM, EACCES, ENOSYS, ESRCH, 0 };
/* ...and, for namespaces, the per-user namespace limits. */
static const int ns_refusals[] = { EPERM, EACCES, ENOSYS, ENOSPC, EUSERS, 0 };
static const int socket_refusals[] = { EPERM, EACCES, ENOSYS, EAFNOSUPPORT, EPROTONOSUPPORT, ESOCKTNOSUPPORT, 0 };
static const int write_open_refusals[] = { EROFS, EACCES, EPERM, 0 };
/* A zero-byte write fails only on a file that refuses every write (procfs answers EIO). */
static const int write_refusals[] = { EROFS, EACCES, EPERM, EIO, EINVAL, 0 };
static const int mknod_refusals[] = { EPERM, EACCES, EROFS, ENOSYS, 0 };

/* --- reporting ------------------------------------------------------------------------------ */

static const char *probe_name = "?";

static const char *errname(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "EUNKNOWN";
}

static const char *sigabbrev(int sig)
{
	const char *name = sigabbrev_np(sig);

	return name ? name : "UNKNOWN";
}

/* errno after a call that returned ret, or 0 if it succeeded. */
static int errno_of(long ret)
{
	return ret == -1 ? errno : 0;
}

static bool errno_in(int err, const int *set)
{
	for (; *set; set++)
		if (*set == err)
			return true;
	return false;
}

/* Print the one result line in a single write(), control characters masked so it stays one
 * line, and return code (the probe's exit status). */
static int report(int code, const char *verdict, const char *fmt, ...) PROBE_PRINTF(3, 4);
static int report(int code, const char *verdict, const char *fmt, ...)
{
	char line[4096];
	size_t len;
	ssize_t written;
	va_list ap;
	int n = snprintf(line, sizeof(line), "PROBE %s %s ", probe_name, verdict);

	if (n < 0 || (size_t)n >= sizeof(line) - 2)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	len = strlen(line);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	line[len++] = '\n';
	written = write(STDOUT_FILENO, line, len);
	(void)written; /* nowhere left to report a failure to report */
	return code;
}

#define probe_denied(...)  report(EXIT_DENIED, "DENIED", __VA_ARGS__)
#define probe_allowed(...) report(EXIT_ALLOWED, "ALLOWED", __VA_ARGS__)
#define probe_error(...)   report(EXIT_UNDECIDED, "ERROR", __VA_ARGS__)
#define probe_info(...)    report(EXIT_DENIED, "INFO", __VA_ARGS__)

/* A detail being built; what does not fit is cut and marked with "...". */
struct text {
	char s[3072];
	size_t n;
	bool full;
};

static void text_add(struct text *t, const char *sep, const char *fmt, ...) PROBE_PRINTF(3, 4);
static void text_add(struct text *t, const char *sep, const char *fmt, ...)
{
	const size_t usable = sizeof(t->s) - sizeof("..."); /* the marker always fits after it */
	size_t room = usable - t->n;
	char piece[512];
	va_list ap;
	int len;

	if (t->full)
		return;
	va_start(ap, fmt);
	vsnprintf(piece, sizeof(piece), fmt, ap);
	va_end(ap);
	len = snprintf(t->s + t->n, room + 1, "%s%s", t->n ? sep : "", piece);
	if (len >= 0 && (size_t)len <= room) {
		t->n += (size_t)len;
		return;
	}
	memcpy(t->s + usable, "...", sizeof("..."));
	t->n = usable + 3;
	t->full = true;
}

/* The attempts of one probe. Any that worked makes it ALLOWED; else any undecided makes it ERROR;
 * else it is DENIED, with the reason all denials share, or their list when they differ. */
struct tally {
	struct text allowed, denied, undecided;
	char reason[256];
	bool mixed;
};

enum outcome { OUTCOME_DENIED, OUTCOME_ALLOWED, OUTCOME_UNDECIDED };

static void tally_add(struct tally *t, enum outcome o, const char *step, const char *fmt, ...)
	PROBE_PRINTF(4, 5);
static void tally_add(struct tally *t, enum outcome o, const char *step, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	switch (o) {
	case OUTCOME_ALLOWED:
		text_add(&t->allowed, ",", "%s=%s", step, what);
		break;
	case OUTCOME_UNDECIDED:
		text_add(&t->undecided, ",", "%s=%s", step, what);
		break;
	case OUTCOME_DENIED:
		if (!t->denied.n)
			snprintf(t->reason, sizeof(t->reason), "%s", what);
		else if (strcmp(t->reason, what) != 0)
			t->mixed = true;
		text_add(&t->denied, ",", "%s=%s", step, what);
		break;
	}
}

/* An attempt with valid arguments: success, a refusal, or an errno that proves neither. */
static void tally_try(struct tally *t, const char *step, int err, const int *refused)
{
	if (!err)
		tally_add(t, OUTCOME_ALLOWED, step, "ok");
	else if (errno_in(err, refused))
		tally_add(t, OUTCOME_DENIED, step, "%s", errname(err));
	else
		tally_add(t, OUTCOME_UNDECIDED, step, "%s", errname(err));
}

/* An attempt whose arguments the kernel rejects only after its privilege check. */
static void tally_gate(struct tally *t, const char *step, int err)
{
	if (errno_in(err, refusals))
		tally_add(t, OUTCOME_DENIED, step, "%s", errname(err));
	else
		tally_add(t, OUTCOME_ALLOWED, step, "passed-privilege-check(%s)", err ? errname(err) : "ok");
}

static int tally_report(const struct tally *t)
{
	const char *also = t->denied.n ? " refused:" : "";

	if (t->allowed.n)
		return probe_allowed("%s%s%s", t->allowed.s, also, t->denied.s);
	if (t->undecided.n)
		return probe_error("undecided:%s%s%s", t->undecided.s, also, t->denied.s);
	if (!t->denied.n) /* a probe that recorded nothing must not pass for denied */
		return probe_error("no-attempt-made");
	if (t->mixed)
		return probe_denied("%s", t->denied.s);
	return probe_denied("%s %s", t->reason, t->denied.s);
}

/* --- helpers -------------------------------------------------------------------------------- */

/* A decimal number in [min, max], digits only. 0 or -EINVAL. */
static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A pid > 0: kill(0) and kill(-1) would reach far more than one process. */
static int parse_pid(const char *s, pid_t *pid)
{
	unsigned long v;
	int r = parse_ulong(s, 1, INT32_MAX, &v);

	if (r < 0)
		return r;
	*pid = (pid_t)v;
	return 0;
}

/* Read up to size bytes of path into buf. 0 or a negative errno. */
static int read_file(const char *path, char *buf, size_t size, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	size_t n = 0;

	if (fd < 0)
		return -errno;
	while (n < size) {
		ssize_t r = read(fd, buf + n, size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return 0;
}

/* The parent of pid as our /proc shows it (0 when the parent is outside our PID namespace). */
static int proc_ppid(pid_t pid, pid_t *ppid)
{
	char path[64], buf[512], *paren;
	size_t len;
	int parent, r;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_file(path, buf, sizeof(buf) - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	/* comm may hold spaces and parentheses: the fields resume after the last ')'. */
	paren = strrchr(buf, ')');
	if (!paren || sscanf(paren + 1, " %*c %d", &parent) != 1)
		return -EINVAL;
	*ppid = parent;
	return 0;
}

/* Where pid's chain of parents ends: 1 at our namespace's init, else the first process whose
 * parent is outside the namespace. 0 if the chain could not be read (processes exited). */
static pid_t ancestry_root(pid_t pid)
{
	for (int depth = 0; depth < 65536; depth++) {
		pid_t parent;

		if (pid == 1)
			return 1;
		if (proc_ppid(pid, &parent) < 0)
			return 0;
		if (parent == 0)
			return pid;
		pid = parent;
	}
	return 0;
}

static bool is_own_ancestor_or_self(pid_t pid)
{
	pid_t p = getpid();

	for (int depth = 0; depth < 65536 && p > 0; depth++) {
		if (p == pid)
			return true;
		if (p == 1 || proc_ppid(p, &p) < 0)
			return false;
	}
	return false;
}

/* A fresh directory under /tmp, writable in every sandbox; the caller removes it. */
static int temp_dir_make(char *path, size_t size)
{
	snprintf(path, size, "/tmp/bk-probe.XXXXXX");
	return mkdtemp(path) ? 0 : -errno;
}

static double seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* --- network -------------------------------------------------------------------------------- */

struct endpoint {
	struct sockaddr_storage addr;
	socklen_t len;
	int family;
};

/* Numeric addresses only: name resolution would need NSS, which a static binary cannot load. */
static int endpoint_parse(const char *host, const char *port, struct endpoint *ep)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ep->addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ep->addr;
	unsigned long p;

	memset(ep, 0, sizeof(*ep));
	if (parse_ulong(port, 1, 65535, &p) < 0)
		return -EINVAL;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)p);
		ep->len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		ep->len = sizeof(*in6);
	} else {
		return -EINVAL;
	}
	ep->family = ep->addr.ss_family;
	return 0;
}

static int probe_tcp(char **argv)
{
	struct endpoint ep;
	_cleanup_close_ int fd = -1;
	struct pollfd pfd;
	int soerr = 0, n;
	socklen_t len = sizeof(soerr);

	if (endpoint_parse(argv[0], argv[1], &ep) < 0)
		return probe_error("bad-endpoint (numeric address and port 1-65535)");
	fd = socket(ep.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_denied("%s socket", errname(errno));
	if (connect(fd, (struct sockaddr *)&ep.addr, ep.len) == 0)
		return probe_allowed("connected to %s port %s", argv[0], argv[1]);
	if (errno != EINPROGRESS)
		return probe_denied("%s connect", errname(errno));
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	n = poll(&pfd, 1, TCP_TIMEOUT_MS);
	if (n < 0)
		return probe_error("poll=%s", errname(errno));
	if (n == 0)
		return probe_denied("ETIMEDOUT no answer in %d ms", TCP_TIMEOUT_MS);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return probe_error("getsockopt=%s", errname(errno));
	if (soerr)
		return probe_denied("%s connect", errname(soerr));
	return probe_allowed("connected to %s port %s", argv[0], argv[1]);
}

static int probe_udp(char **argv)
{
	static const char datagram[] = "bk-probe\n";
	struct endpoint ep;
	_cleanup_close_ int fd = -1;
	struct pollfd pfd;
	char reply[512];
	ssize_t got;
	int n;

	if (endpoint_parse(argv[0], argv[1], &ep) < 0)
		return probe_error("bad-endpoint (numeric address and port 1-65535)");
	fd = socket(ep.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_denied("%s socket", errname(errno));
	/* Connected, so an ICMP port-unreachable comes back as ECONNREFUSED. */
	if (connect(fd, (struct sockaddr *)&ep.addr, ep.len) < 0)
		return probe_denied("%s connect", errname(errno));
	if (send(fd, datagram, sizeof(datagram) - 1, 0) < 0)
		return probe_denied("%s send", errname(errno));
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	n = poll(&pfd, 1, UDP_TIMEOUT_MS);
	if (n < 0)
		return probe_error("poll=%s", errname(errno));
	if (n == 0)
		return probe_denied("ETIMEDOUT no reply in %d ms", UDP_TIMEOUT_MS);
	got = recv(fd, reply, sizeof(reply), MSG_DONTWAIT);
	if (got < 0)
		return probe_denied("%s recv", errname(errno));
	return probe_allowed("reply of %zd bytes from %s port %s", got, argv[0], argv[1]);
}

/* Add each route of a /proc/net table that leaves through a device other than lo. */
static int routes_read(const char *path, int family, struct text *out)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	char line[512];

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *field[12], *save = NULL, addr[INET6_ADDRSTRLEN];
		int n = 0;

		for (char *tok = strtok_r(line, " \t\n", &save); tok && n < 12; tok = strtok_r(NULL, " \t\n", &save))
			field[n++] = tok;
		if (family == AF_INET && n >= 8 && strcmp(field[0], "Iface") != 0 && strcmp(field[0], "lo") != 0) {
			/* Destination and Mask are the raw network-order words, printed in hex. */
			struct in_addr dest = { .s_addr = (uint32_t)strtoul(field[1], NULL, 16) };
			uint32_t mask = (uint32_t)strtoul(field[7], NULL, 16);

			inet_ntop(AF_INET, &dest, addr, sizeof(addr));
			text_add(out, ",", "%s/%d@%s", addr, __builtin_popcount(mask), field[0]);
		} else if (family == AF_INET6 && n >= 10 && strcmp(field[9], "lo") != 0 && strlen(field[0]) == 32) {
			struct in6_addr dest;

			for (int i = 0; i < 16; i++) {
				char byte[3] = { field[0][2 * i], field[0][2 * i + 1], '\0' };

				dest.s6_addr[i] = (uint8_t)strtoul(byte, NULL, 16);
			}
			inet_ntop(AF_INET6, &dest, addr, sizeof(addr));
			text_add(out, ",", "%s/%lu@%s", addr, strtoul(field[1], NULL, 16), field[9]);
		}
	}
	return 0;
}

static int probe_interfaces(char **argv)
{
	struct if_nameindex *ifs = if_nameindex();
	struct text names = { 0 }, routes = { 0 };
	bool foreign = false;
	int r;

	(void)argv;
	if (!ifs)
		return probe_error("if_nameindex=%s", errname(errno));
	for (struct if_nameindex *i = ifs; i->if_index; i++) {
		text_add(&names, ",", "%s", i->if_name);
		foreign |= strcmp(i->if_name, "lo") != 0;
	}
	if_freenameindex(ifs);
	r = routes_read("/proc/net/route", AF_INET, &routes);
	if (r < 0)
		return probe_error("/proc/net/route=%s", errname(-r));
	r = routes_read("/proc/net/ipv6_route", AF_INET6, &routes);
	if (r < 0 && r != -ENOENT) /* ENOENT: IPv6 is off, so there are no IPv6 routes */
		return probe_error("/proc/net/ipv6_route=%s", errname(-r));
	if (!foreign && !routes.n)
		return probe_denied("only-lo interfaces=%s", names.n ? names.s : "none");
	return probe_allowed("interfaces=%s non-lo-routes=%s", names.s, routes.n ? routes.s : "none");
}

static int socket_probe(int domain, int type, int protocol)
{
	_cleanup_close_ int fd = socket(domain, type | SOCK_CLOEXEC, protocol);

	if (fd >= 0)
		return probe_allowed("socket opened");
	if (errno_in(errno, socket_refusals))
		return probe_denied("%s", errname(errno));
	return probe_error("socket=%s", errname(errno));
}

static int probe_raw_socket(char **argv)
{
	(void)argv;
	return socket_probe(AF_INET, SOCK_RAW, IPPROTO_ICMP);
}

static int probe_packet_socket(char **argv)
{
	(void)argv;
	return socket_probe(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
}

/* --- other processes ------------------------------------------------------------------------ */

static int probe_ptrace(char **argv)
{
	struct tally t = { 0 };
	pid_t pid;
	int err;

	if (parse_pid(argv[0], &pid) < 0)
		return probe_error("bad-pid");
	/* SEIZE does not stop the tracee, and our exit detaches it: nothing to undo. */
	err = errno_of(syscall(SYS_ptrace, PTRACE_SEIZE, pid, NULL, NULL));
	tally_try(&t, "seize", err, pid_refusals);
	if (err) {
		err = errno_of(syscall(SYS_ptrace, PTRACE_ATTACH, pid, NULL, NULL));
		tally_try(&t, "attach", err, pid_refusals);
		if (!err) {
			/* ATTACH sent SIGSTOP: consume it, or the target would stay stopped after we detach. */
			waitpid(pid, NULL, __WALL);
			syscall(SYS_ptrace, PTRACE_DETACH, pid, NULL, NULL);
		}
	}
	return tally_report(&t);
}

/* The start of pid's first mapping, or 0 when its maps are unreadable (the read then faults,
 * but only after the kernel's permission check, so the verdict holds). */
static uintptr_t first_mapping(pid_t pid)
{
	char path[64], buf[64];
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (read_file(path, buf, sizeof(buf) - 1, &len) < 0)
		return 0;
	buf[len] = '\0';
	return (uintptr_t)strtoull(buf, NULL, 16);
}

static int probe_process_vm_read(char **argv)
{
	char buf[8];
	struct iovec local = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct iovec remote = { .iov_len = sizeof(buf) };
	pid_t pid;
	long got;

	if (parse_pid(argv[0], &pid) < 0)
		return probe_error("bad-pid");
	remote.iov_base = (void *)first_mapping(pid);
	got = syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL, 0UL);
	if (got >= 0)
		return probe_allowed("read %ld bytes at %p", got, remote.iov_base);
	if (errno == EFAULT)
		return probe_allowed("passed-permission-check(EFAULT at %p)", remote.iov_base);
	if (errno_in(errno, pid_refusals))
		return probe_denied("%s", errname(errno));
	return probe_error("process_vm_readv=%s", errname(errno));
}

static int probe_read(char **argv)
{
	_cleanup_close_ int fd = open(argv[0], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	char byte;
	ssize_t got;

	if (fd < 0)
		return probe_denied("%s open", errname(errno));
	got = read(fd, &byte, 1);
	if (got < 0)
		return probe_denied("%s read", errname(errno));
	return probe_allowed("read %zd byte(s)", got);
}

static int probe_cmdline_secret(char **argv)
{
	static const char *const files[] = { "cmdline", "environ" };
	const size_t cap = 1 << 20;
	_cleanup_free_ char *buf = malloc(cap);
	struct text readable = { 0 };
	struct tally t = { 0 };
	pid_t pid;

	if (parse_pid(argv[0], &pid) < 0)
		return probe_error("bad-pid");
	if (!argv[1][0])
		return probe_error("empty-secret");
	if (!buf)
		return probe_error("malloc=ENOMEM");
	if (is_own_ancestor_or_self(pid))
		return probe_error("pid %d is the probe or its ancestor: pick a process outside its tree", (int)pid);
	for (size_t i = 0; i < BK_ARRAY_SIZE(files); i++) {
		char path[64];
		size_t len;
		int r;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		r = read_file(path, buf, cap, &len);
		if (r < 0) {
			tally_add(&t, OUTCOME_DENIED, files[i], "%s", errname(-r));
			continue;
		}
		text_add(&readable, ",", "%s:%zu-bytes:%s", files[i], len,
			 memmem(buf, len, argv[1], strlen(argv[1])) ? "SECRET-FOUND" : "secret-not-found");
	}
	/* Readable at all is a leak: a process outside our tree should not even be visible. */
	if (readable.n)
		return probe_allowed("readable %s%s%s", readable.s, t.denied.n ? " refused:" : "", t.denied.s);
	return tally_report(&t);
}

static int signal_parse(const char *s, int *sig)
{
	unsigned long n;

	if (parse_ulong(s, 0, (unsigned long)SIGRTMAX, &n) == 0) {
		*sig = (int)n;
		return 0;
	}
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (int i = 1; i < SIGRTMIN; i++) {
		const char *abbrev = sigabbrev_np(i);

		if (abbrev && strcmp(abbrev, s) == 0) {
			*sig = i;
			return 0;
		}
	}
	return -EINVAL;
}

static int probe_kill(char **argv)
{
	int sig = 0, err;
	pid_t pid;

	if (parse_pid(argv[0], &pid) < 0)
		return probe_error("bad-pid");
	if (argv[1] && signal_parse(argv[1], &sig) < 0)
		return probe_error("bad-signal");
	err = errno_of(syscall(SYS_kill, pid, sig));
	if (!err)
		return probe_allowed("signal %d delivered to %d", sig, (int)pid);
	if (err == EPERM || err == ESRCH)
		return probe_denied("%s", errname(err));
	return probe_error("kill=%s", errname(err));
}

static int probe_pid_visible(char **argv)
{
	char path[64];
	struct stat st;
	int stat_err, kill_err;
	pid_t pid;

	if (parse_pid(argv[0], &pid) < 0)
		return probe_error("bad-pid");
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	stat_err = errno_of(stat(path, &st));
	kill_err = errno_of(syscall(SYS_kill, pid, 0));
	if (stat_err && kill_err == ESRCH)
		return probe_denied("not-visible %s=%s kill0=ESRCH", path, errname(stat_err));
	if (!stat_err || !kill_err || kill_err == EPERM)
		return probe_allowed("visible %s=%s kill0=%s", path, stat_err ? errname(stat_err) : "exists",
				     kill_err ? errname(kill_err) : "ok");
	return probe_error("%s=%s kill0=%s", path, errname(stat_err), errname(kill_err));
}

static int probe_pids(char **argv)
{
	_cleanup_(closedirp) DIR *d = opendir("/proc");
	struct text visible = { 0 }, outside = { 0 };
	pid_t ours = ancestry_root(getpid());
	struct dirent *e;
	int count = 0;

	(void)argv;
	if (!d)
		return probe_error("/proc=%s", errname(errno));
	while ((e = readdir(d))) {
		unsigned long v;
		pid_t root = 0;

		if (parse_ulong(e->d_name, 1, INT32_MAX, &v) < 0)
			continue;
		/* A chain broken by an exiting process is walked again: the orphans got a new parent. */
		for (int attempt = 0; attempt < 3 && !root; attempt++)
			root = ancestry_root((pid_t)v);
		if (!root)
			continue; /* it exited */
		count++;
		text_add(&visible, ",", "%lu", v);
		if (root != 1)
			text_add(&outside, ",", "%lu", v);
	}
	if (ours == 1 && !outside.n)
		return probe_denied("own-tree-only pids=%s", visible.s);
	return probe_allowed("visible=%d our-root=%d outside-our-tree=%s", count, (int)ours,
			     outside.n ? outside.s : "none");
}

/* --- mounts and namespaces ------------------------------------------------------------------ */

static int probe_mount(char **argv)
{
	struct tally t = { 0 };
	char dir[64];
	int err, r;

	(void)argv;
	r = temp_dir_make(dir, sizeof(dir));
	if (r < 0)
		return probe_error("mkdtemp=%s", errname(-r));
	err = errno_of(syscall(SYS_mount, "bk-probe", dir, "tmpfs", (unsigned long)(MS_NOSUID | MS_NODEV | MS_NOEXEC),
			       "size=64k"));
	if (!err)
		syscall(SYS_umount2, dir, MNT_DETACH);
	rmdir(dir);
	tally_try(&t, "mount-tmpfs", err, refusals);
	return tally_report(&t);
}

static int probe_umount(char **argv)
{
	struct tally t = { 0 };
	/* MNT_EXPIRE with MNT_DETACH is EINVAL, but only once may_mount() let us through. */
	int err = errno_of(syscall(SYS_umount2, argv[0], MNT_EXPIRE | MNT_DETACH));

	if (err == ENOENT || err == ENOTDIR)
		return probe_error("umount2=%s (no such path)", errname(err));
	tally_gate(&t, "umount2", err);
	return tally_report(&t);
}

struct ns_flag {
	const char *name;
	unsigned long flag;
};

static const struct ns_flag ns_flags[] = {
	{ "net", CLONE_NEWNET }, { "mnt", CLONE_NEWNS },  { "pid", CLONE_NEWPID },       { "user", CLONE_NEWUSER },
	{ "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS }, { "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME },
};

static const struct ns_flag *ns_flag_find(const char *name)
{
	for (size_t i = 0; i < BK_ARRAY_SIZE(ns_flags); i++)
		if (strcmp(ns_flags[i].name, name) == 0)
			return &ns_flags[i];
	return NULL;
}

static int probe_unshare(char **argv)
{
	const struct ns_flag *ns = ns_flag_find(argv[0]);
	struct tally t = { 0 };

	if (!ns)
		return probe_error("bad-flag (net mnt pid user ipc uts cgroup time)");
	/* Only this throwaway child changes namespaces. */
	tally_try(&t, "unshare", errno_of(syscall(SYS_unshare, ns->flag)), ns_refusals);
	return tally_report(&t);
}

/* The child of a raw clone exits at once; the parent reaps it. */
static int clone_reaped(long ret)
{
	if (ret == 0)
		_exit(0);
	if (ret < 0)
		return errno;
	waitpid((pid_t)ret, NULL, 0);
	return 0;
}

static int probe_clone_ns(char **argv)
{
	const struct ns_flag *ns = ns_flag_find(argv[0]);
	struct clone_args args = { .exit_signal = SIGCHLD };
	struct tally t = { 0 };

	if (!ns)
		return probe_error("bad-flag (net mnt pid user ipc uts cgroup time)");
	/* CLONE_NEWTIME shares its bits with clone()'s exit signal: only clone3 can carry it. */
	if (!(ns->flag & CSIGNAL))
		tally_try(&t, "clone", clone_reaped(syscall(SYS_clone, ns->flag | SIGCHLD, 0UL, NULL, NULL, 0UL)),
			  ns_refusals);
	args.flags = ns->flag;
	tally_try(&t, "clone3", clone_reaped(syscall(SYS_clone3, &args, sizeof(args))), ns_refusals);
	return tally_report(&t);
}

static int probe_setns(char **argv)
{
	_cleanup_close_ int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	struct tally t = { 0 };

	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return probe_error("open=%s (no such namespace file)", errname(errno));
	/* Opening the file is no escape by itself (our own namespaces open fine): only setns counts. */
	if (fd < 0)
		tally_try(&t, "open", errno, pid_refusals);
	else
		tally_try(&t, "setns", errno_of(syscall(SYS_setns, fd, 0)), refusals);
	return tally_report(&t);
}

static int probe_chroot(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	tally_try(&t, "chroot", errno_of(syscall(SYS_chroot, "/")), refusals);
	return tally_report(&t);
}

static int probe_pivot_root(char **argv)
{
	struct tally t = { 0 };
	char dir[64];
	int err, r;

	(void)argv;
	r = temp_dir_make(dir, sizeof(dir));
	if (r < 0)
		return probe_error("mkdtemp=%s", errname(-r));
	/* A fresh directory is no mount point: EINVAL, but only after may_mount() let us through. */
	err = errno_of(syscall(SYS_pivot_root, dir, dir));
	rmdir(dir);
	tally_gate(&t, "pivot_root", err);
	return tally_report(&t);
}

/* --- the filesystem ------------------------------------------------------------------------- */

static int probe_write(char **argv)
{
	const char *path = argv[0];
	_cleanup_close_ int fd = -1;
	struct tally t = { 0 };
	bool created = true;
	int err;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	}
	if (fd < 0) {
		err = errno;
		if (err == ENOENT || err == ENOTDIR || err == EISDIR)
			return probe_error("open=%s (pick a file path whose directory exists)", errname(err));
		tally_try(&t, "open", err, write_open_refusals);
		return tally_report(&t);
	}
	/* A zero-byte write proves the fd writes without changing a byte of an existing file. */
	err = errno_of(write(fd, "", 0));
	fd = bk_close(fd);
	if (created)
		unlink(path);
	tally_try(&t, created ? "create-and-write" : "open-and-write", err, write_refusals);
	return tally_report(&t);
}

static int probe_mknod(char **argv)
{
	struct tally t = { 0 };
	int err = errno_of(syscall(SYS_mknodat, AT_FDCWD, argv[0], (unsigned long)(S_IFCHR | 0600),
				   (unsigned long)makedev(1, 3)));

	if (err == EEXIST || err == ENOENT || err == ENOTDIR)
		return probe_error("mknod=%s (pick a new path in an existing directory)", errname(err));
	if (!err)
		unlink(argv[0]);
	tally_try(&t, "mknod-char-1:3", err, mknod_refusals);
	return tally_report(&t);
}

/* --- kernel surfaces ------------------------------------------------------------------------ */

static int probe_module(char **argv)
{
	static const unsigned char not_an_elf[4];
	_cleanup_close_ int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct tally t = { 0 };

	(void)argv;
	/* Both check the privilege first; a short image is then ENOEXEC, /dev/null (or fd -1) EINVAL. */
	tally_gate(&t, "init_module", errno_of(syscall(SYS_init_module, not_an_elf, sizeof(not_an_elf), "")));
	tally_gate(&t, "finit_module", errno_of(syscall(SYS_finit_module, fd, "", 0)));
	return tally_report(&t);
}

static int probe_bpf(char **argv)
{
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;
	struct tally t = { 0 };
	long fd;

	(void)argv;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insns = (uintptr_t)prog;
	attr.insn_cnt = BK_ARRAY_SIZE(prog);
	attr.license = (uintptr_t) "GPL";
	fd = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	tally_try(&t, "prog_load", errno_of(fd), refusals);
	bk_close((int)fd);

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
	tally_try(&t, "map_create", errno_of(fd), refusals);
	bk_close((int)fd);
	return tally_report(&t);
}

static int probe_io_uring(char **argv)
{
	struct io_uring_params params;
	struct tally t = { 0 };
	long fd;

	(void)argv;
	memset(&params, 0, sizeof(params));
	fd = syscall(SYS_io_uring_setup, 1U, &params);
	tally_try(&t, "io_uring_setup", errno_of(fd), refusals);
	bk_close((int)fd);
	return tally_report(&t);
}

static int probe_userfaultfd(char **argv)
{
	struct tally t = { 0 };
	long fd;

	(void)argv;
	fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	tally_try(&t, "userfaultfd", errno_of(fd), refusals);
	bk_close((int)fd);
	/* User-mode-only faults are what vm.unprivileged_userfaultfd=0 still grants everyone. */
	fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	tally_try(&t, "userfaultfd-user-mode-only", errno_of(fd), refusals);
	bk_close((int)fd);
	return tally_report(&t);
}

static int probe_perf_event_open(char **argv)
{
	struct perf_event_attr attr;
	struct tally t = { 0 };
	long fd;

	(void)argv;
	/* The least a process can ask: a software clock of itself, user space only. */
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	tally_try(&t, "perf_event_open", errno_of(fd), refusals);
	bk_close((int)fd);
	return tally_report(&t);
}

static int probe_keyctl(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	/* The process keyring dies with us; the user keyring is shared by every process of the uid. */
	tally_try(&t, "add_key",
		  errno_of(syscall(SYS_add_key, "user", "bk-probe", "x", 1UL, KEY_SPEC_PROCESS_KEYRING)), refusals);
	tally_try(&t, "keyctl-user-keyring",
		  errno_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)), refusals);
	return tally_report(&t);
}

static int probe_kexec(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	/* Too many segments (kexec_load) and an undefined flag (kexec_file_load) are EINVAL, checked
	 * after the privilege. Zero segments would instead unload a loaded kernel. */
	tally_gate(&t, "kexec_load",
		   errno_of(syscall(SYS_kexec_load, 0UL, (unsigned long)KEXEC_SEGMENT_MAX + 1, NULL,
				    (unsigned long)KEXEC_ARCH_DEFAULT)));
	tally_gate(&t, "kexec_file_load", errno_of(syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 1UL << 31)));
	return tally_report(&t);
}

static int probe_open_by_handle(char **argv)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} handle;
	_cleanup_close_ int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	struct tally t = { 0 };
	const char *step = "open_by_handle_at(root-handle)";
	int mount_id;

	(void)argv;
	if (root < 0)
		return probe_error("open /=%s", errname(errno));
	memset(&handle, 0, sizeof(handle));
	handle.fh.handle_bytes = MAX_HANDLE_SZ;
	/* Making a handle is unprivileged; opening one bypasses every path permission. If we may not
	 * make one, a forged handle still meets the privilege check before it is decoded. */
	if (syscall(SYS_name_to_handle_at, root, "", &handle.fh, &mount_id, AT_EMPTY_PATH) < 0) {
		memset(&handle, 0, sizeof(handle));
		handle.fh.handle_bytes = 8;
		handle.fh.handle_type = 1; /* FILEID_INO32_GEN */
		step = "open_by_handle_at(forged-handle)";
	}
	fd = (int)syscall(SYS_open_by_handle_at, root, &handle.fh, O_RDONLY | O_CLOEXEC);
	tally_gate(&t, step, errno_of(fd));
	return tally_report(&t);
}

static int probe_swapon(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	/* /dev/null is no swap area: EINVAL after the privilege check, for both. */
	tally_gate(&t, "swapon", errno_of(syscall(SYS_swapon, "/dev/null", 0)));
	tally_gate(&t, "swapoff", errno_of(syscall(SYS_swapoff, "/dev/null")));
	return tally_report(&t);
}

static int probe_reboot(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	/* The privilege is checked before the magic, and a wrong magic1 stops everything after it;
	 * the command is CAD_OFF, which would be harmless even if it ran. */
	tally_gate(&t, "reboot",
		   errno_of(syscall(SYS_reboot, 0, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_OFF, NULL)));
	return tally_report(&t);
}

static int probe_settime(char **argv)
{
	struct tally t = { 0 };
	struct timespec now;

	(void)argv;
	/* settimeofday(NULL, NULL) is only the CAP_SYS_TIME check. */
	tally_try(&t, "settimeofday", errno_of(syscall(SYS_settimeofday, NULL, NULL)), refusals);
	clock_gettime(CLOCK_REALTIME, &now);
	tally_try(&t, "clock_settime", errno_of(syscall(SYS_clock_settime, CLOCK_REALTIME, &now)), refusals);
	return tally_report(&t);
}

static int probe_personality(char **argv)
{
	static const struct {
		const char *name;
		unsigned long flag;
	} changes[] = {
		{ "read-implies-exec", READ_IMPLIES_EXEC },
		{ "addr-no-randomize", ADDR_NO_RANDOMIZE },
	};
	const unsigned long query = 0xffffffffUL;
	long old = syscall(SYS_personality, query);
	struct tally t = { 0 };

	(void)argv;
	for (size_t i = 0; i < BK_ARRAY_SIZE(changes); i++) {
		unsigned long wanted = (old == -1 ? PER_LINUX : (unsigned long)old) | changes[i].flag;
		long now;

		if (syscall(SYS_personality, wanted) == -1) {
			tally_try(&t, changes[i].name, errno, refusals);
			continue;
		}
		/* A filter can fake success (SECCOMP_RET_ERRNO with 0): believe only what we read back. */
		now = syscall(SYS_personality, query);
		if (now != -1 && !((unsigned long)now & changes[i].flag))
			tally_add(&t, OUTCOME_DENIED, changes[i].name, "no-effect");
		else if (now == -1)
			tally_add(&t, OUTCOME_ALLOWED, changes[i].name, "set-returned-success(unverified)");
		else
			tally_add(&t, OUTCOME_ALLOWED, changes[i].name, "persona=%#lx", (unsigned long)now);
		syscall(SYS_personality, old == -1 ? PER_LINUX : (unsigned long)old);
	}
	return tally_report(&t);
}

/* getpid through the i386 table. r8-r11 are zeroed by the kernel on this entry. */
static long i386_getpid(void)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "cc", "r8", "r9", "r10", "r11");
	return (int)ret; /* the i386 ABI returns 32 bits */
}

static long x32_getpid(void)
{
	long ret = syscall(__X32_SYSCALL_BIT | __NR_getpid);

	return ret == -1 ? -errno : ret;
}

/* Run call in a child, which a seccomp kill may take down, and judge what happened. */
static void foreign_call(struct tally *t, const char *step, long (*call)(void))
{
	_cleanup_close_ int rfd = -1, wfd = -1;
	int p[2], status;
	long ret = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		tally_add(t, OUTCOME_UNDECIDED, step, "pipe=%s", errname(errno));
		return;
	}
	rfd = p[0];
	wfd = p[1];
	pid = fork();
	if (pid < 0) {
		tally_add(t, OUTCOME_UNDECIDED, step, "fork=%s", errname(errno));
		return;
	}
	if (pid == 0) {
		ret = call();
		_exit(write(wfd, &ret, sizeof(ret)) == sizeof(ret) ? 0 : 1);
	}
	wfd = bk_close(wfd);
	if (waitpid(pid, &status, 0) < 0) {
		tally_add(t, OUTCOME_UNDECIDED, step, "waitpid=%s", errname(errno));
		return;
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
		tally_add(t, OUTCOME_DENIED, step, "SIGSYS");
	else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		tally_add(t, OUTCOME_DENIED, step, "SIGSEGV"); /* int $0x80 on a kernel without IA32 emulation */
	else if (WIFSIGNALED(status))
		tally_add(t, OUTCOME_UNDECIDED, step, "killed-by-SIG%s", sigabbrev(WTERMSIG(status)));
	else if (read(rfd, &ret, sizeof(ret)) != sizeof(ret))
		tally_add(t, OUTCOME_UNDECIDED, step, "no-result");
	else if (ret >= 0)
		tally_add(t, OUTCOME_ALLOWED, step, "getpid=%ld(child=%d)", ret, (int)pid);
	else /* getpid cannot fail: an errno is the ABI missing or a filter refusing */
		tally_add(t, OUTCOME_DENIED, step, "%s", errname((int)-ret));
}

static int probe_foreign_arch(char **argv)
{
	struct tally t = { 0 };

	(void)argv;
	foreign_call(&t, "i386", i386_getpid);
	foreign_call(&t, "x32", x32_getpid);
	return tally_report(&t);
}

/* --- identity ------------------------------------------------------------------------------- */

static int probe_whoami(char **argv)
{
	(void)argv;
	return probe_info("uid=%u euid=%u gid=%u egid=%u", getuid(), geteuid(), getgid(), getegid());
}

static int probe_setuid_exec(char **argv)
{
	const char *path = argv[0];
	_cleanup_close_ int out_r = -1, out_w = -1, err_r = -1, err_w = -1;
	char out[512], *euid_at;
	int p[2], exec_err, status;
	size_t len = 0;
	struct stat st;
	pid_t pid;

	if (stat(path, &st) < 0)
		return probe_error("stat=%s", errname(errno));
	if (!(st.st_mode & S_ISUID) || st.st_uid != 0)
		return probe_error("%s is not setuid-root (mode %o uid %u): the probe would prove nothing", path,
				   (unsigned)st.st_mode & 07777, (unsigned)st.st_uid);
	if (pipe2(p, O_CLOEXEC) < 0)
		return probe_error("pipe=%s", errname(errno));
	out_r = p[0];
	out_w = p[1];
	if (pipe2(p, O_CLOEXEC) < 0)
		return probe_error("pipe=%s", errname(errno));
	err_r = p[0];
	err_w = p[1];
	pid = fork();
	if (pid < 0)
		return probe_error("fork=%s", errname(errno));
	if (pid == 0) {
		char *child_argv[] = { (char *)path, "whoami", NULL };

		if (dup2(out_w, STDOUT_FILENO) >= 0)
			execv(path, child_argv);
		exec_err = errno;
		_exit(write(err_w, &exec_err, sizeof(exec_err)) == sizeof(exec_err) ? 127 : 126);
	}
	out_w = bk_close(out_w);
	err_w = bk_close(err_w);
	if (read(err_r, &exec_err, sizeof(exec_err)) == sizeof(exec_err)) {
		waitpid(pid, NULL, 0);
		if (errno_in(exec_err, refusals))
			return probe_denied("%s exec", errname(exec_err));
		return probe_error("exec=%s", errname(exec_err));
	}
	while (len < sizeof(out) - 1) {
		ssize_t r = read(out_r, out + len, sizeof(out) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	out[len] = '\0';
	waitpid(pid, &status, 0);
	euid_at = strstr(out, " euid=");
	if (strncmp(out, "PROBE whoami INFO ", 18) != 0 || !euid_at)
		return probe_error("no whoami line from %s (status %#x)", path, (unsigned)status);
	if (strtoul(euid_at + 6, NULL, 10) == 0)
		return probe_allowed("euid=0 (%s setuid-root took effect)", path);
	return probe_denied("euid=%lu setuid bit ignored", strtoul(euid_at + 6, NULL, 10));
}

static int probe_caps(char **argv)
{
	static const char *const fields[] = {
		"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
	};
	enum { N_CAP_FIELDS = 5, NNP = 5, SECCOMP = 6 };
	_cleanup_(fclosep) FILE *f = fopen("/proc/self/status", "re");
	char values[BK_ARRAY_SIZE(fields)][32] = { { 0 } }, line[256];
	struct text all = { 0 };
	bool clean = true;

	(void)argv;
	if (!f)
		return probe_error("/proc/self/status=%s", errname(errno));
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		for (size_t i = 0; i < BK_ARRAY_SIZE(fields); i++)
			if (strcmp(line, fields[i]) == 0)
				sscanf(colon + 1, " %31s", values[i]);
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(fields); i++) {
		if (!values[i][0])
			return probe_error("no %s in /proc/self/status", fields[i]);
		text_add(&all, " ", "%s=%s", fields[i], values[i]);
		if (i < N_CAP_FIELDS)
			clean &= strspn(values[i], "0") == strlen(values[i]);
	}
	clean &= strcmp(values[NNP], "1") == 0 && strcmp(values[SECCOMP], "2") == 0;
	if (clean)
		return probe_denied("caps-0-nnp-seccomp2 %s", all.s);
	return probe_allowed("%s", all.s);
}

static int probe_ids(char **argv)
{
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;
	int groups = getgroups(0, NULL);

	(void)argv;
	if (getresuid(&ruid, &euid, &suid) < 0 || getresgid(&rgid, &egid, &sgid) < 0 || groups < 0)
		return probe_error("getres*id/getgroups=%s", errname(errno));
	if (ruid == SANDBOX_ID && euid == SANDBOX_ID && suid == SANDBOX_ID && rgid == SANDBOX_ID &&
	    egid == SANDBOX_ID && sgid == SANDBOX_ID && groups == 0)
		return probe_denied("uid=%d gid=%d no-supplementary-groups", SANDBOX_ID, SANDBOX_ID);
	return probe_allowed("uid=%u,%u,%u gid=%u,%u,%u supplementary-groups=%d", ruid, euid, suid, rgid, egid,
			     sgid, groups);
}

static int probe_fds(char **argv)
{
	_cleanup_(closedirp) DIR *d = opendir("/proc/self/fd");
	struct text extras = { 0 }, closed = { 0 };
	bool stdio_open[3] = { false, false, false };
	struct dirent *e;

	(void)argv;
	if (!d)
		return probe_error("/proc/self/fd=%s", errname(errno));
	while ((e = readdir(d))) {
		char path[64], target[256];
		unsigned long fd;
		ssize_t n;

		if (parse_ulong(e->d_name, 0, INT32_MAX, &fd) < 0 || (int)fd == dirfd(d))
			continue;
		if (fd <= 2) {
			stdio_open[fd] = true;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%lu", fd);
		n = readlink(path, target, sizeof(target) - 1);
		target[n < 0 ? 0 : n] = '\0';
		text_add(&extras, ",", "%lu->%s", fd, n < 0 ? "?" : target);
	}
	for (int fd = 0; fd <= 2; fd++)
		if (!stdio_open[fd])
			text_add(&closed, ",", "%d", fd);
	if (extras.n)
		return probe_allowed("extra-fds %s", extras.s);
	return probe_denied("only-0-1-2%s%s", closed.n ? " closed=" : "", closed.s);
}

static int probe_env(char **argv)
{
	struct text names = { 0 }, hits = { 0 };

	for (char **s = argv; *s; s++)
		if (!**s)
			return probe_error("empty-secret");
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		int name_len = eq ? (int)(eq - *e) : (int)strlen(*e);

		text_add(&names, ",", "%.*s", name_len, *e);
		for (char **s = argv; *s; s++) {
			if (strstr(*e, *s)) {
				text_add(&hits, ",", "%.*s", name_len, *e);
				break;
			}
		}
	}
	if (hits.n)
		return probe_allowed("secret-in %s", hits.s);
	return probe_denied("no-match names=%s", names.n ? names.s : "none");
}

/* --- resource limits ------------------------------------------------------------------------ */

static int probe_fork_bomb(char **argv)
{
	unsigned long limit = 100000;
	_cleanup_free_ pid_t *children = NULL;
	struct timespec start;
	unsigned long n = 0;
	pid_t self = getpid();
	int fork_err = 0;

	if (argv[0] && parse_ulong(argv[0], 1, 1000000, &limit) < 0)
		return probe_error("bad-limit (1-1000000)");
	children = calloc(limit, sizeof(*children));
	if (!children)
		return probe_error("calloc=ENOMEM");
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (n < limit && seconds_since(&start) < BOMB_TIME_CAP_S) {
		pid_t pid = fork();

		if (pid == 0) {
			/* Sleep until killed; die with the parent, or after a while whatever happens. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(0);
			alarm(3 * BOMB_TIME_CAP_S);
			for (;;)
				pause();
		}
		if (pid < 0) {
			fork_err = errno;
			break;
		}
		children[n++] = pid;
	}
	for (unsigned long i = 0; i < n; i++)
		kill(children[i], SIGKILL);
	while (wait(NULL) > 0 || errno == EINTR)
		continue;
	if (fork_err)
		return probe_denied("capped-at-%lu fork=%s", n, errname(fork_err));
	if (n == limit)
		return probe_allowed("forked-%lu (the limit asked for)", n);
	return probe_error("time-cap: forked %lu in %d s without meeting a cap", n, BOMB_TIME_CAP_S);
}

static int probe_memory_bomb(char **argv)
{
	unsigned long target = 8192, mib = 0;
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	_cleanup_close_ int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	struct timespec start;
	ssize_t w;

	if (argv[0] && parse_ulong(argv[0], 1, 1UL << 24, &target) < 0)
		return probe_error("bad-size (MiB, 1-16777216)");
	/* If anything is OOM-killed, let it be us. */
	w = oom >= 0 ? write(oom, "1000", 4) : -1;
	(void)w;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (mib < target) {
		unsigned long step = target - mib < MEMORY_STEP_MIB ? target - mib : MEMORY_STEP_MIB;
		size_t bytes = step << 20;
		char *p;

		if (seconds_since(&start) >= BOMB_TIME_CAP_S)
			return probe_error("time-cap-at-%lu-MiB", mib);
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return probe_denied("%s-at-%lu-MiB", errname(errno), mib);
		for (size_t off = 0; off < bytes; off += page)
			p[off] = 1;
		mib += step;
		fprintf(stderr, "bk-probe: memory-bomb: %lu MiB touched\n", mib);
	}
	return probe_allowed("touched-%lu-MiB", mib);
}

static int probe_fsize_bomb(char **argv)
{
	static const char chunk[1 << 16];
	unsigned long target_mib = 1024;
	unsigned long long written = 0, target;
	_cleanup_close_ int fd = -1;
	struct timespec start;
	char name[64];

	if (argv[0] && parse_ulong(argv[0], 1, 1UL << 24, &target_mib) < 0)
		return probe_error("bad-size (MiB, 1-16777216)");
	target = (unsigned long long)target_mib << 20;
	signal(SIGXFSZ, SIG_IGN); /* so the limit shows as EFBIG rather than a signal */
	snprintf(name, sizeof(name), "bk-probe-fsize.%d", (int)getpid());
	fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return probe_error("cannot create %s in the working directory: %s", name, errname(errno));
	unlink(name); /* the blocks go back when we exit, however we exit */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (written < target) {
		size_t want = target - written < sizeof(chunk) ? (size_t)(target - written) : sizeof(chunk);
		ssize_t w;

		if (seconds_since(&start) >= BOMB_TIME_CAP_S)
			return probe_error("time-cap-at-%llu-bytes", written);
		w = write(fd, chunk, want);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EFBIG || errno == ENOSPC || errno == EDQUOT))
			return probe_denied("%s-at-%llu-bytes", errname(errno), written);
		if (w < 0)
			return probe_error("write=%s at %llu bytes", errname(errno), written);
		written += (unsigned long long)w;
	}
	return probe_allowed("wrote-%llu-bytes", written);
}

/* --- socket families, terminals, set-id modes, unlisted calls ------------------------------ */

/* socket() with the domain as a raw 64-bit register: a value with high bits set is the same
 * family to the kernel (it takes an int), and must be to a filter too. */
static void family_try(struct tally *t, const char *step, unsigned long domain, int type, int protocol)
{
	long fd = syscall(SYS_socket, domain, (unsigned long)(type | SOCK_CLOEXEC), (unsigned long)protocol);

	if (fd >= 0) {
		close((int)fd);
		tally_add(t, OUTCOME_ALLOWED, step, "opened");
	} else {
		tally_try(t, step, errno, socket_refusals);
	}
}

static int probe_vsock(char **argv)
{
	struct tally t = { 0 };
	long fd;

	(void)argv;
	/* AF_VSOCK ignores network namespaces: a socket that binds is on the host's port space. */
	fd = syscall(SYS_socket, (unsigned long)AF_VSOCK, (unsigned long)(SOCK_STREAM | SOCK_CLOEXEC), 0UL);
	if (fd >= 0) {
		struct { sa_family_t family; unsigned short reserved; unsigned int port, cid; unsigned char zero[4]; }
			addr = { .family = AF_VSOCK, .port = 0xb0c5, .cid = 0xffffffffu /* VMADDR_CID_ANY */ };
		int bound = bind((int)fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen((int)fd, 1) == 0;
		tally_add(&t, OUTCOME_ALLOWED, "stream", bound ? "bound-and-listening" : "opened");
		close((int)fd);
	} else {
		tally_try(&t, "stream", errno, socket_refusals);
	}
	family_try(&t, "dgram", AF_VSOCK, SOCK_DGRAM, 0);
	family_try(&t, "high-bits", (1UL << 32) | AF_VSOCK, SOCK_STREAM, 0);
	return tally_report(&t);
}

/* Every family but unix, IPv4, IPv6 and netlink, and netlink protocols but NETLINK_ROUTE. */
static int probe_socket_families(char **argv)
{
	static const int netlink_protocols[] = { 4 /* SOCK_DIAG */, 6 /* XFRM */, 9 /* AUDIT */, 12 /* NETFILTER */,
						 15 /* KOBJECT_UEVENT */, 16 /* GENERIC */ };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET };
	struct tally t = { 0 };
	char step[64];
	int refused[256] = { 0 }; /* how many attempts each errno refused */

	(void)argv;
	for (int f = 0; f < AF_MAX; f++) {
		if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
			continue;
		for (size_t i = 0; i < BK_ARRAY_SIZE(types); i++) {
			long fd = syscall(SYS_socket, (unsigned long)f, (unsigned long)(types[i] | SOCK_CLOEXEC), 0UL);
			snprintf(step, sizeof(step), "af%d/%d", f, types[i]);
			if (fd >= 0) {
				close((int)fd);
				tally_add(&t, OUTCOME_ALLOWED, step, "opened");
			} else if (!errno_in(errno, socket_refusals) || errno >= (int)BK_ARRAY_SIZE(refused)) {
				tally_add(&t, OUTCOME_UNDECIDED, step, "%s", errname(errno));
			} else {
				refused[errno]++;
			}
		}
	}
	/* The refusals are many and read alike: one entry per errno, with its count. */
	for (int e = 0; e < (int)BK_ARRAY_SIZE(refused); e++)
		if (refused[e])
			tally_add(&t, OUTCOME_DENIED, "families", "%s", errname(e));
	for (size_t i = 0; i < BK_ARRAY_SIZE(netlink_protocols); i++) {
		snprintf(step, sizeof(step), "netlink-%d", netlink_protocols[i]);
		family_try(&t, step, AF_NETLINK, SOCK_RAW, netlink_protocols[i]);
	}
	return tally_report(&t);
}

/* An ioctl with the request as a raw 64-bit register (the kernel reads 32 bits of it). */
static int ioctl_raw(int fd, unsigned long request, void *arg)
{
	return errno_of(syscall(SYS_ioctl, (unsigned long)fd, request, arg));
}

/* In a child that made a pty of its own its controlling terminal (as a shell's session would):
 * push a byte into its input, change its line discipline. Natively both work on one's own
 * terminal (TIOCSTI while dev.tty.legacy_tiocsti is 1, EIO otherwise). */
static void own_terminal(struct tally *t)
{
	int p[2], results[3];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		tally_add(t, OUTCOME_UNDECIDED, "own-pty", "pipe=%s", errname(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		int r[3] = { -1, -1, -1 }, ldisc = 0 /* N_TTY */;
		char c = '#';
		int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), slave = -1;
		if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0 && setsid() >= 0)
			slave = open(ptsname(master), O_RDWR | O_CLOEXEC); /* becomes our terminal */
		if (slave >= 0) {
			r[0] = ioctl_raw(slave, TIOCSTI, &c);
			r[1] = ioctl_raw(slave, (1UL << 32) | TIOCSTI, &c);
			r[2] = ioctl_raw(slave, TIOCSETD, &ldisc);
		} else {
			r[0] = r[1] = r[2] = -errno;
		}
		_exit(write(p[1], r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], results, sizeof(results)) != sizeof(results)) {
		tally_add(t, OUTCOME_UNDECIDED, "own-pty", "no-result");
	} else if (results[0] < 0) {
		tally_add(t, OUTCOME_UNDECIDED, "own-pty", "setup=%s", errname(-results[0]));
	} else {
		/* EIO: the kernel's own refusal while dev.tty.legacy_tiocsti is 0. */
		static const int tiocsti_refusals[] = { EPERM, EACCES, ENOSYS, EIO, 0 };
		tally_try(t, "TIOCSTI", results[0], tiocsti_refusals);
		tally_try(t, "TIOCSTI-high-bits", results[1], tiocsti_refusals);
		tally_try(t, "TIOCSETD", results[2], refusals);
	}
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* The operator's terminal: /dev/tty must lead nowhere (no controlling terminal), and no
 * terminal input can be pushed. MARK is written to /dev/tty when it opens, and pushed into it,
 * for a harness watching the other end. */
static int probe_tty(char **argv)
{
	struct tally t = { 0 };
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		size_t len = strlen(argv[0]);
		ssize_t w = write(fd, argv[0], len);
		int sti = 0;
		for (size_t i = 0; i < len && !sti; i++)
			sti = ioctl_raw(fd, TIOCSTI, argv[0] + i);
		tally_add(&t, OUTCOME_ALLOWED, "dev-tty", "opened(write=%s,TIOCSTI=%s)", w == (ssize_t)len ? "ok" : "failed",
			  sti ? errname(sti) : "ok");
		close(fd);
	} else if (errno == ENXIO) {
		tally_add(&t, OUTCOME_DENIED, "dev-tty", "no-ctty");
	} else {
		tally_try(&t, "dev-tty", errno, refusals);
	}
	own_terminal(&t);
	return tally_report(&t);
}

/* Set-id bits on a file the sandbox user owns, every way a mode is set. DIR: where (it must be
 * writable); nothing is left there. */
static int probe_setid_mode(char **argv)
{
	static const mode_t modes[] = { S_ISUID | 0755, S_ISGID | 0755 };
	struct tally t = { 0 };
	char path[PATH_MAX], step[64];
	struct stat st;

	for (size_t m = 0; m < BK_ARRAY_SIZE(modes); m++) {
		const char *bit = modes[m] & S_ISUID ? "setuid" : "setgid";
		int fd, err;

		snprintf(path, sizeof(path), "%s/bk-setid-%d", argv[0], (int)getpid());
		/* Each way, its own file: created without set-id bits, then asked for them. */
		for (int way = 0; way < 6; way++) {
			static const char *const ways[] = { "chmod", "fchmod", "fchmodat", "open-create", "creat", "mknod" };
			unlink(path);
			snprintf(step, sizeof(step), "%s-%s", ways[way], bit);
			if (way < 3) {
				fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0755);
				if (fd < 0)
					return probe_error("create %s=%s (pick a writable DIR)", path, errname(errno));
				err = way == 0 ? errno_of(chmod(path, modes[m]))
				      : way == 1 ? errno_of(fchmod(fd, modes[m]))
						 : errno_of(fchmodat(AT_FDCWD, path, modes[m], 0));
				close(fd);
			} else if (way == 3) {
				err = errno_of(syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
						       (unsigned long)modes[m]));
			} else if (way == 4) {
				err = errno_of(syscall(SYS_creat, path, (unsigned long)modes[m]));
			} else {
				err = errno_of(syscall(SYS_mknodat, AT_FDCWD, path, (unsigned long)(S_IFREG | modes[m]), 0UL));
			}
			/* Believe the file, not the return value (umask may have masked a bit). */
			if (!err && stat(path, &st) == 0 && !(st.st_mode & (S_ISUID | S_ISGID)))
				tally_add(&t, OUTCOME_DENIED, step, "bit-not-set");
			else if (!err)
				tally_add(&t, OUTCOME_ALLOWED, step, "mode=%o", (unsigned)(st.st_mode & 07777));
			else
				tally_try(&t, step, err, refusals);
		}
		unlink(path);
	}
	return tally_report(&t);
}

static int probe_modify_ldt(char **argv)
{
	unsigned char ldt[64];
	struct tally t = { 0 };

	(void)argv;
	/* func 0 reads the LDT: harmless, and what an exploit of the LDT code starts from. */
	tally_try(&t, "read", errno_of(syscall(SYS_modify_ldt, 0, ldt, sizeof(ldt))), refusals);
	return tally_report(&t);
}

/* System calls the kernel has and an allowlist does not list: they must not exist. Each would
 * succeed, or fail for its arguments, if it were let through. */
static int probe_unlisted(char **argv)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC };
	struct clone_args ca = { 0 };
	struct tally t = { 0 };
	long r;

	(void)argv;
	r = syscall(SYS_get_mempolicy, NULL, NULL, 0UL, NULL, 0UL);
	tally_gate(&t, "get_mempolicy", errno_of(r));
	r = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
	if (r >= 0)
		close((int)r);
	tally_gate(&t, "openat2", errno_of(r));
	/* A size too small for any clone_args: EINVAL from the kernel, no child. */
	tally_gate(&t, "clone3", errno_of(syscall(SYS_clone3, &ca, 1UL)));
	r = syscall(SYS_mbind, NULL, 0UL, 0UL, NULL, 0UL, 0UL);
	tally_gate(&t, "mbind", errno_of(r));
	return tally_report(&t);
}

/* --- the table ------------------------------------------------------------------------------ */

static const struct probe probes[] = {
	{ "tcp", "HOST PORT", 2, 2, PROBE_ATTACK, probe_tcp,
	  "connect() with a 2 s timeout; DENIED with the errno" },
	{ "udp", "HOST PORT", 2, 2, PROBE_ATTACK, probe_udp,
	  "send a datagram, wait 1 s for a reply; DENIED unless one comes" },
	{ "interfaces", "", 0, 0, PROBE_OBSERVE, probe_interfaces,
	  "network interfaces and routes; DENIED only-lo" },
	{ "raw-socket", "", 0, 0, PROBE_ATTACK, probe_raw_socket,
	  "socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)" },
	{ "packet-socket", "", 0, 0, PROBE_ATTACK, probe_packet_socket,
	  "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL)" },
	{ "ptrace", "PID", 1, 1, PROBE_ATTACK, probe_ptrace,
	  "PTRACE_SEIZE, then PTRACE_ATTACH, of PID" },
	{ "process-vm-read", "PID", 1, 1, PROBE_ATTACK, probe_process_vm_read,
	  "process_vm_readv of 8 bytes of PID" },
	{ "read", "FILE", 1, 1, PROBE_ATTACK, probe_read,
	  "open and read 1 byte of FILE (never printed)" },
	{ "cmdline-secret", "PID SECRET", 2, 2, PROBE_ATTACK, probe_cmdline_secret,
	  "read /proc/PID/cmdline and environ; ALLOWED if either is readable, saying where SECRET is" },
	{ "kill", "PID [SIG]", 1, 2, PROBE_ATTACK, probe_kill,
	  "kill(PID, SIG or 0); DENIED on EPERM/ESRCH" },
	{ "pid-visible", "PID", 1, 1, PROBE_OBSERVE, probe_pid_visible,
	  "DENIED if /proc/PID is absent and kill(PID, 0) is ESRCH" },
	{ "pids", "", 0, 0, PROBE_OBSERVE, probe_pids,
	  "visible PIDs; DENIED own-tree-only if all descend from our pid 1" },
	{ "mount", "", 0, 0, PROBE_ATTACK, probe_mount,
	  "mount a tmpfs on a fresh /tmp directory" },
	{ "umount", "PATH", 1, 1, PROBE_ATTACK, probe_umount,
	  "umount2(PATH, MNT_EXPIRE|MNT_DETACH): the privilege check only" },
	{ "unshare", "FLAG", 1, 1, PROBE_ATTACK, probe_unshare,
	  "unshare(CLONE_NEW<FLAG>), FLAG: net mnt pid user ipc uts cgroup time" },
	{ "clone-ns", "FLAG", 1, 1, PROBE_ATTACK, probe_clone_ns,
	  "clone and clone3 with CLONE_NEW<FLAG>; the child exits at once" },
	{ "setns", "PATH", 1, 1, PROBE_ATTACK, probe_setns,
	  "open a namespace file (e.g. /proc/1/ns/net) and setns" },
	{ "chroot", "", 0, 0, PROBE_ATTACK, probe_chroot,
	  "chroot(\"/\")" },
	{ "pivot-root", "", 0, 0, PROBE_ATTACK, probe_pivot_root,
	  "pivot_root on a fresh /tmp directory: the privilege check only" },
	{ "write", "FILE", 1, 1, PROBE_ATTACK, probe_write,
	  "create (then remove) or open FILE for writing and write 0 bytes; DENIED on EROFS/EACCES/EPERM" },
	{ "mknod", "PATH", 1, 1, PROBE_ATTACK, probe_mknod,
	  "mknod PATH as char device 1:3 (then remove it)" },
	{ "module", "", 0, 0, PROBE_ATTACK, probe_module,
	  "init_module and finit_module of invalid images" },
	{ "bpf", "", 0, 0, PROBE_ATTACK, probe_bpf,
	  "BPF_PROG_LOAD of a trivial socket filter, BPF_MAP_CREATE" },
	{ "io-uring", "", 0, 0, PROBE_ATTACK, probe_io_uring,
	  "io_uring_setup" },
	{ "userfaultfd", "", 0, 0, PROBE_ATTACK, probe_userfaultfd,
	  "userfaultfd, plain and UFFD_USER_MODE_ONLY" },
	{ "perf-event-open", "", 0, 0, PROBE_ATTACK, probe_perf_event_open,
	  "perf_event_open of our own task clock" },
	{ "keyctl", "", 0, 0, PROBE_ATTACK, probe_keyctl,
	  "add_key to the process keyring, keyctl on the user keyring" },
	{ "kexec", "", 0, 0, PROBE_ATTACK, probe_kexec,
	  "kexec_load and kexec_file_load with invalid arguments" },
	{ "open-by-handle", "", 0, 0, PROBE_ATTACK, probe_open_by_handle,
	  "name_to_handle_at(\"/\") and open_by_handle_at" },
	{ "swapon", "", 0, 0, PROBE_ATTACK, probe_swapon,
	  "swapon and swapoff of /dev/null" },
	{ "reboot", "", 0, 0, PROBE_ATTACK, probe_reboot,
	  "reboot(CAD_OFF) with a wrong magic: the privilege check only" },
	{ "settime", "", 0, 0, PROBE_ATTACK, probe_settime,
	  "settimeofday(NULL, NULL), clock_settime to the current time" },
	{ "personality", "", 0, 0, PROBE_ATTACK, probe_personality,
	  "set READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, read back, restore" },
	{ "foreign-arch", "", 0, 0, PROBE_ATTACK, probe_foreign_arch,
	  "getpid via int $0x80 (i386) and x32, each in a child" },
	{ "setuid-exec", "PATH", 1, 1, PROBE_ATTACK, probe_setuid_exec,
	  "exec the setuid-root PATH (a setuid copy of bk-probe) as `PATH whoami`; ALLOWED if its euid is 0" },
	{ "fork-bomb", "[LIMIT]", 0, 1, PROBE_ATTACK, probe_fork_bomb,
	  "fork up to LIMIT (100000) sleepers for 10 s at most; DENIED capped-at-N" },
	{ "memory-bomb", "[MiB]", 0, 1, PROBE_ATTACK, probe_memory_bomb,
	  "map and touch MiB (8192) in 16 MiB steps; DENIED ENOMEM-at-N-MiB" },
	{ "fsize-bomb", "[MiB]", 0, 1, PROBE_ATTACK, probe_fsize_bomb,
	  "write MiB (1024) to an unlinked file in the cwd; DENIED EFBIG-at-N-bytes" },
	{ "fds", "", 0, 0, PROBE_OBSERVE, probe_fds,
	  "open file descriptors; DENIED only-0-1-2" },
	{ "env", "SECRET...", 1, 64, PROBE_OBSERVE, probe_env,
	  "DENIED if no SECRET is in any variable's name or value" },
	{ "caps", "", 0, 0, PROBE_OBSERVE, probe_caps,
	  "capability sets, no_new_privs, seccomp; DENIED caps-0-nnp-seccomp2" },
	{ "ids", "", 0, 0, PROBE_OBSERVE, probe_ids,
	  "real/effective/saved ids; DENIED uid=1001 with no supplementary groups" },
	{ "vsock", "", 0, 0, PROBE_ATTACK, probe_vsock,
	  "socket(AF_VSOCK) stream (bind and listen if it opens), dgram, and with high bits in the family" },
	{ "socket-families", "", 0, 0, PROBE_ATTACK, probe_socket_families,
	  "every family but unix/inet/inet6/netlink, 4 types each; netlink protocols but ROUTE" },
	{ "tty", "MARK", 1, 1, PROBE_ATTACK, probe_tty,
	  "open /dev/tty (write and TIOCSTI MARK if it opens); TIOCSTI and TIOCSETD on a pty of our own" },
	{ "setid-mode", "DIR", 1, 1, PROBE_ATTACK, probe_setid_mode,
	  "make a file in DIR setuid/setgid by chmod, fchmod, fchmodat, open, creat, mknod" },
	{ "modify-ldt", "", 0, 0, PROBE_ATTACK, probe_modify_ldt,
	  "modify_ldt(0): read the LDT" },
	{ "unlisted", "", 0, 0, PROBE_ATTACK, probe_unlisted,
	  "get_mempolicy, openat2, clone3, mbind: calls an allowlist leaves out; DENIED ENOSYS" },
	{ "whoami", "", 0, 0, PROBE_OBSERVE, probe_whoami,
	  "INFO uid= euid= gid= egid= (for setuid-exec)" },
};

/* Run the probe in a child so that a kill ends the attempt, not the report. */
static int probe_supervise(const struct probe *p, char **argv)
{
	int status, sig;
	pid_t pid = fork();

	if (pid < 0)
		return probe_error("fork=%s", errname(errno));
	if (pid == 0) {
		alarm(PROBE_TIMEOUT_S);
		_exit(p->run(argv));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return probe_error("waitpid=%s", errname(errno));
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	sig = WTERMSIG(status);
	if (sig == SIGSYS && p->kind == PROBE_ATTACK)
		return probe_denied("SIGSYS killed by seccomp");
	if (sig == SIGSYS)
		return probe_error("killed-by-SIGSYS before it could look");
	/* Die the same death, so the harness sees the OOM kill or the timeout itself. */
	fprintf(stderr, "bk-probe: %s: killed by SIG%s\n", p->name, sigabbrev(sig));
	signal(sig, SIG_DFL);
	raise(sig);
	return probe_error("killed-by-SIG%s", sigabbrev(sig));
}

int main(int argc, char **argv)
{
	const struct probe *p = NULL;
	int nargs = argc - 2;

	if (argc < 2)
		return probe_error("usage: bk-probe NAME [ARGS] | bk-probe list");
	if (strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < BK_ARRAY_SIZE(probes); i++)
			printf("%-16s %-11s %s\n", probes[i].name, probes[i].args, probes[i].what);
		return 0;
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(probes); i++)
		if (strcmp(probes[i].name, argv[1]) == 0)
			p = &probes[i];
	if (!p)
		return probe_error("unknown probe (bk-probe list names them)");
	probe_name = p->name;
	if (nargs < p->min_args || nargs > p->max_args)
		return probe_error("usage: bk-probe %s %s", p->name, p->args);
	return probe_supervise(p, argv + 2);
}
