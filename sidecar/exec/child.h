/* What runs in a freshly cloned child before execve: the named isolation steps shared by the
 * exec path (spawn.c) and the local sandbox's init (sandbox.c), and the typed report a child
 * sends its parent when a step fails (STYLE.md §5). The capability narrowing and the closing
 * of descriptors here are also what the executor's helper processes (cgroup.c, netns.c) and,
 * for its capabilities, the executor itself go through: one way to do each.
 *
 * These children share memory with the executor (CLONE_VM) or are a raw fork of it, so they
 * use raw system calls only: no malloc, no stdio, nothing that takes a lock. */
#ifndef BK_CHILD_H
#define BK_CHILD_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "boxkite/executor/order.pb-c.h"
#include "error.h"
#include "exec/filter.h"

/* The nice value of sandboxed commands and of other background work (the netns pool): below
 * boxkited's, so that a CPU-bound sandbox leaves Health probes and requests their CPU. */
#define BK_SANDBOX_NICE 10

/* Every exec's own devpts (spawn.c, step 2): terminals only its own processes can reach, and at
 * most BK_EXEC_PTYS of them. Each instance's max= bounds what one exec takes of the node's
 * kernel.pty.max, which every container's devpts shares. */
#define BK_EXEC_PTYS 8
#define BK_DEVPTS_MAX_(n) "newinstance,ptmxmode=0666,mode=0620,max=" #n
#define BK_DEVPTS_MAX(n) BK_DEVPTS_MAX_(n)
#define BK_DEVPTS_OPTIONS BK_DEVPTS_MAX(BK_EXEC_PTYS)

/* The named steps are order.proto's enum Step (STEP_PIDNS, ...): the executor's Reply carries
 * the one that failed, typed, to the front. */
typedef Boxkite__Executor__Step bk_step;

/* "setns(mnt)", "setresuid", ... for error messages. */
const char *bk_step_name(int step);

/* What a failed child writes to its CLOEXEC report pipe before it exits. EOF on the pipe with
 * nothing read proves the execve happened. */
struct bk_step_report {
	int32_t step;
	int32_t errnum;
};

/* Report the failed step (errno is the cause) on fd and exit 127. */
__attribute__((noreturn)) void bk_child_fail(int report_fd, bk_step step);

/* Read a child's report. 0 when the pipe closed empty: the exec happened (r->step is
 * STEP_NONE). Otherwise -errno with *err, r->step the step that failed and r->errnum its errno
 * ("setresuid: Operation not permitted"), or r->step STEP_NONE when no well-formed report came
 * (the pipe broke). */
int bk_step_report_read(int fd, struct bk_step_report *r, bk_error **err);

/* A set of capabilities as a mask: bit CAP_X is BK_CAP(CAP_X). */
#define BK_CAP(cap) (UINT64_C(1) << (cap))

/* The calling process's bounding set. The one place that asks the kernel how many capabilities
 * it has (libcap's cap_max_bits()), so a parent's call, never a CLONE_VM child's: it is read
 * before a fork or clone and handed to the child, which then drops exactly what is there. */
uint64_t bk_capbset_read(void);
/* Every capability the kernel knows: the bounding set of a process that joined a user namespace
 * (setns resets it to the full set there), which it then has to drop. */
uint64_t bk_capbset_all(void);

/* Narrow the calling process to the capabilities in `keep`: first each capability in `drop`
 * leaves the bounding set (this needs CAP_SETPCAP, so it comes first; pass only capabilities
 * that are in it, each is a system call), then permitted and effective become `keep`,
 * inheritable and ambient empty, and no_new_privs is set. Raw system calls only. Returns
 * STEP_NONE, or the step that failed (errno says why). */
bk_step bk_child_keep_caps(uint64_t keep, uint64_t drop);

/* Identity and privileges the sandboxed process ends up with. */
typedef struct bk_child_creds {
	uid_t uid;
	gid_t gid;
	uint64_t bounding; /* the executor's bounding set (bk_capbset_read): what a child drops */
} bk_child_creds;

/* Step 5: empty the bounding set (it needs CAP_SETPCAP, gone after setresuid), clear
 * supplementary groups, setresgid/setresuid to the sandbox user, then every capability set
 * and no_new_privs, and die with the parent. Returns STEP_NONE, or the failed step. */
bk_step bk_child_drop_privileges(const bk_child_creds *creds);

/* Step 1's second half: bring `lo` up in a new network namespace. */
int bk_child_loopback_up(void);

/* Undo what the executor changed in its own process state (ignored SIGPIPE/SIGINT/SIGTERM/
 * SIGHUP, umask 077): default signals, umask 022 — and block every signal, so that none sent
 * before the init executed next takes them is lost (the init gives its command an empty mask). */
int bk_child_reset_signals(void);

/* Close every descriptor above 2 but the n in keep (any order; -1 entries are ignored), where
 * they are: nothing is renumbered. Raw system calls only, async-signal-safe. 0, or -1. */
int bk_child_close_fds(const int *keep, size_t n);

/* Step 7, last: install the precompiled filter's two programs (no_new_privs must already be
 * set). */
int bk_child_seccomp(const bk_seccomp *filter);
/* One program (no_new_privs set): the file worker's whole filter. */
int bk_child_seccomp_program(const struct sock_fprog *prog);

#endif
