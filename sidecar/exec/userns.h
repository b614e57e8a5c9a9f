/* The sandbox's own user namespace: the kernel's per-user limits counted per sandbox.
 *
 * The kernel keeps some limits per user — inotify instances and watches, POSIX message queue
 * bytes, queued signals, RLIMIT_NPROC — and every sandbox on a node runs as its uid 1001: one
 * sandbox holding 128 inotify instances left every other one "Too many open files". Those
 * counts are kept per user namespace (ucounts): a process is counted in its own namespace, under
 * its uid, and in each namespace above it under the *owner* of the namespace below (the euid
 * that created it). So each sandbox's processes join a user namespace of the sandbox's own that
 * maps every uid and gid to itself — the files they make stay 1001's on the host, root's files are
 * root's, an ACL may name any user, as before: it is a domain for these counts, not another view
 * of ids (where the executor lacks CAP_SETFCAP, as a pod's sidecar may, root is left unmapped and
 * its files show as nobody's inside) — and whose owner is a uid of its own, drawn at random from a range no account uses
 * (BK_USERNS_OWNER_BASE, 2^30 of them) and never run as by any process: in the node's namespace
 * they are counted as that owner, one per sandbox, each up to the node's limits (128 inotify
 * instances, ...). Two sandboxes share their counts only if their owners' draws collide (about 1
 * in 10^7 for a hundred sandboxes).
 *
 * It gives nothing: a process's capabilities in it hold for what it owns, which is nothing (every
 * other namespace of the sandbox is the node's namespace's), and the sandbox's processes have none
 * anyway; the owner's uid, which would have all of them there, is never any process's.
 *
 * What it does not separate: limits the kernel keeps per uid outside user namespaces — epoll
 * watches, pipe buffer pages, descriptors in flight over unix sockets — stay the node's uid 1001's
 * (SECURITY.md). */
#ifndef BK_USERNS_H
#define BK_USERNS_H

#include <sys/types.h>

#include "error.h"

#define BK_USERNS_OWNER_BASE 0x80000000u

/* Make the namespace (the executor: CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_SETPCAP) mapping
 * every id to itself, owned by a fresh owner (*owner). Returns its descriptor (close-on-exec),
 * which a child joins with setns(fd, CLONE_NEWUSER) before it becomes the sandbox user; or -errno
 * with *err set. */
int bk_userns_make(uid_t *owner, bk_error **err);

#endif
