/* The executor's side of egress (docs/ARCHITECTURE.md, "Egress"): it starts the egress proxy,
 * boxkite-egress — its own program image, executed fresh as an unprivileged user of its own with
 * no capability, an empty environment and only its channel — gives it its configuration and the
 * operator's credential files (opened here, never read here), keeps it running, makes each
 * granted exec's listening socket inside that exec's network namespace and hands it over, and
 * tells the proxy when the exec has ended. The grant is checked here too, against the ceiling
 * this process was configured with, whatever the front checked.
 *
 * The proxy answers its set-up with the bundle of roots the sandbox is to trust (the system's
 * and the proxy's CA, when a credential is configured); an exec whose grant reaches a brokered
 * destination gets it in a read-only tmpfs at BK_EGRESS_CA_DIR, mounted by its child in its own
 * mount namespace (spawn.c). */
#ifndef BK_PROXYCTL_H
#define BK_PROXYCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "boxkite/executor/order.pb-c.h"
#include "channel.h"
#include "egresspolicy.h"
#include "error.h"
#include "exec/child.h"

#define BK_PROXYCTL_CREDENTIALS_MAX 64
/* A proxy that died is started again, at most this often. */
#define BK_PROXYCTL_RETRY_MS 1000

typedef struct bk_proxyctl {
	const Boxkite__Executor__Egress *cfg; /* NULL: no egress configured */
	bk_egress_pattern *ceiling;
	size_t n_ceiling;
	bk_egress_host cred_host[BK_PROXYCTL_CREDENTIALS_MAX];
	uint16_t cred_port[BK_PROXYCTL_CREDENTIALS_MAX];
	int cred_fd[BK_PROXYCTL_CREDENTIALS_MAX];
	size_t n_creds;
	int bin_fd;          /* boxkite-egress, opened once */
	int stats_fd;        /* the counters' memfd, the same for every proxy started */
	bk_child_creds creds; /* the proxy's user; the bounding set its child empties */
	pid_t pid;           /* 0: not running */
	int pidfd;
	bk_channel ch;       /* to the running proxy */
	uint64_t start_id;   /* the Start order waiting for Ready (0: none) */
	bool ready;          /* Ready came: the bundle below is this proxy's */
	char *bundle;        /* what the sandbox trusts; NULL without credentials */
	size_t bundle_len;
	int64_t retry_at;    /* when to start one again (0: not due) */
	int64_t started_ms;
} bk_proxyctl;

/* Take the configuration (NULL: egress off), open the binary and every credential file (each a
 * regular file of mode 0600 or stricter, or refused), make the counters' memfd. 0 or -errno. */
int bk_proxyctl_init(bk_proxyctl *pc, const Boxkite__Executor__Egress *cfg, uint64_t bounding, bk_error **err);
void bk_proxyctl_fini(bk_proxyctl *pc);

/* Whether egress is configured. */
static inline bool bk_proxyctl_on(const bk_proxyctl *pc)
{
	return pc->cfg != NULL;
}

/* Start the proxy and queue its set-up (Configure, the credentials, Start); Ready comes later on
 * its channel (bk_proxyctl_readable). 0 or -errno. */
int bk_proxyctl_start(bk_proxyctl *pc, bk_error **err);

/* Wait (at start-up only) for the answer to Start: 0 when Ready, -errno with the proxy's
 * reason. */
int bk_proxyctl_wait_ready(bk_proxyctl *pc, int timeout_ms, bk_error **err);

/* The proxy's channel is readable: take its answer. 1 when it became ready (the caller opens
 * every live exec's grant on it again), 0 otherwise, <0 when the proxy must be given up (it is
 * stopped, and started again at retry_at). */
int bk_proxyctl_readable(bk_proxyctl *pc);

/* The proxy died, or must: kill and reap it, schedule another. */
void bk_proxyctl_lost(bk_proxyctl *pc, const char *why);

/* Kill and reap it for good (the executor stops). */
void bk_proxyctl_stop(bk_proxyctl *pc);

/* 0 when the n patterns of a grant may be served (well-formed, within the ceiling), with
 * *brokered: whether it reaches a destination with a credential (the exec gets the CA bundle);
 * -EPERM (beyond the ceiling, or no egress at all) or -EINVAL with *err. */
int bk_proxyctl_check(const bk_proxyctl *pc, char *const *grant, size_t n, bool *brokered, bk_error **err);

/* The network namespace for a granted exec, with the proxy's listener on 127.0.0.1 in it:
 * *netns from the pool (>= 0) is used, else one is made here; self_net is where the executor
 * returns to. 0 with *netns and *listener set, or -errno (*netns closed either way on error). */
int bk_proxyctl_listener(bk_proxyctl *pc, int self_net, int *netns, int *listener, bk_error **err);

/* Hand an exec's listener (which stays the caller's) and grant to the proxy. Nothing while the
 * proxy is not ready: the caller opens every live exec's again when it is. */
void bk_proxyctl_open(bk_proxyctl *pc, uint64_t exec_id, char *const *grant, size_t n, const char *key_id,
		      int listener);

/* The exec ended: its connections end. */
void bk_proxyctl_close(bk_proxyctl *pc, uint64_t exec_id);

#endif
