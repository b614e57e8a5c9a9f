/* What runs in a freshly cloned child before execve: the named isolation steps shared by the
 * exec path (spawn.c) and the local sandbox's init (sandbox.c), and the typed report a child
 * sends its parent when a step fails (STYLE.md §5).
 *
 * These children share memory with the executor (CLONE_VM) or are a raw fork of it, so they
 * use raw system calls only: no malloc, no stdio, nothing that takes a lock. */
#ifndef BK_CHILD_H
#define BK_CHILD_H

#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

/* The nice value of sandboxed commands and of other background work (the netns pool): below
 * boxkited's, so that a CPU-bound sandbox leaves Health probes and requests their CPU. */
#define BK_SANDBOX_NICE 10

enum bk_step {
	BK_STEP_NONE = 0,
	BK_STEP_PIDNS,
	BK_STEP_LOOPBACK,
	BK_STEP_SETNS_MNT,
	BK_STEP_SETNS_IPC,
	BK_STEP_SETNS_UTS,
	BK_STEP_MOUNT_NS,
	BK_STEP_MOUNT_PROC,
	BK_STEP_CHDIR,
	BK_STEP_CAPBSET,
	BK_STEP_SETGROUPS,
	BK_STEP_SETRESGID,
	BK_STEP_SETRESUID,
	BK_STEP_CAPSET,
	BK_STEP_NO_NEW_PRIVS,
	BK_STEP_PDEATHSIG,
	BK_STEP_RLIMIT,
	BK_STEP_STDIO,
	BK_STEP_CLOSE_FDS,
	BK_STEP_SIGNALS,
	BK_STEP_SECCOMP,
	BK_STEP_EXECVE,
	BK_STEP_SANDBOX_ROOT, /* local sandbox only: building its root */
	BK_STEP_PIVOT_ROOT,
	BK_STEP_HOSTNAME,
	BK_STEP_MAX,
};

/* "setns(mnt)", "setresuid", ... for error messages. */
const char *bk_step_name(int step);

/* What a failed child writes to its CLOEXEC report pipe before it exits. EOF on the pipe with
 * nothing read proves the execve happened. */
struct bk_step_report {
	int32_t step;
	int32_t errnum;
};

/* Report the failed step (errno is the cause) on fd and exit 127. */
__attribute__((noreturn)) void bk_child_fail(int report_fd, enum bk_step step);

/* Read a child's report: 0 when the pipe closed empty (the exec happened), 1 with *r filled
 * when a step failed, <0 errno on a broken pipe. */
int bk_step_report_read(int fd, struct bk_step_report *r);

/* Identity and privileges the sandboxed process ends up with. */
typedef struct bk_child_creds {
	uid_t uid;
	gid_t gid;
	int last_cap; /* /proc/sys/kernel/cap_last_cap, read once by the parent */
} bk_child_creds;

/* Step 5: clear supplementary groups, setresgid/setresuid to the sandbox user, empty the
 * bounding set first (it needs CAP_SETPCAP, gone after setresuid), clear ambient and every
 * capability set, set no_new_privs, and die with the parent. Returns 0, or the failed step. */
enum bk_step bk_child_drop_privileges(const bk_child_creds *creds);

/* Step 1's second half: bring `lo` up in a new network namespace. */
int bk_child_loopback_up(void);

/* Undo what the executor changed in its own process state (ignored SIGPIPE/SIGINT/SIGTERM/
 * SIGHUP, a blocked mask, umask 077) so the command starts with the defaults a shell would
 * give it: default signals, umask 022. */
int bk_child_reset_signals(void);

/* Step 7: close every descriptor above 2 except keep_fd (the CLOEXEC report pipe). */
int bk_child_close_fds(int keep_fd);

/* Step 7, last: install the precompiled filter (no_new_privs must already be set). */
int bk_child_seccomp(const struct sock_fprog *prog);

#endif
