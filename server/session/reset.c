/* Reset, in the order a reviewer checks it against docs/PROTOCOL.md ("Reset"):
 *
 *   gate shut (every new call but Health refused) → kill every exec tree (KillAll, held: no
 *   Spawn until the end; the sandbox's network namespace made anew) → forget the processes,
 *   cut the preview connections, cancel a sync → wait until no other call is in flight, and no
 *   sync runs → with --sync-on-reset, push the workspace under the departing tenant's prefix →
 *   forget the syncs, uploads and the file index → wipe and verify (the file worker, as the
 *   sandbox user) → forget kept answers → install the new key (persisted first) → release the
 *   hold → answer (MAC'd with the new key), the uptime counted from now
 *
 * It runs on a thread of its own: it waits on the executor and the file worker (bk_link_call),
 * which a handler on an nng callback must not. Any failure once it started leaves the gate shut
 * for good (BK_RESET_FAILED): a sandbox that may hold the last tenant's processes or files is not
 * served to the next one. */
#include "session/reset.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "boundary/link.h"
#include "files/files.h"
#include "files/watch.h"
#include "fullio.h"
#include "log.h"
#include "rpc/handlers.h"
#include "runs/process.h"
#include "sync/sync.h"
#include "transport/proxy.h"

/* The key a Reset installed, in the state directory. */
#define TENANT_KEY "tenant-key"
/* How long a reset waits for the calls in flight when it began (their execs killed) to end. */
#define QUIESCE_MS 30000

struct bk_reset {
	int key_fd;            /* STATE/tenant-key, opened at start-up as root; -1: no state directory */
	pthread_t thread;
	bool joinable;
	bk_call *call;         /* the Reset running, and its request */
	const Boxkite__V1__ResetRequest *rq;
};

/* --- the tenant key on disk ------------------------------------------------------------------ */

int bk_reset_init(bk_server *srv, bk_error **err)
{
	struct bk_reset *r = calloc(1, sizeof(*r));
	_cleanup_free_ char *path = NULL;
	bk_keyring *ring = NULL;
	struct stat st;
	int ret;

	if (!r)
		return bk_error_errno(err, ENOMEM, "reset");
	r->key_fd = -1;
	srv->reset = r;
	if (!srv->cfg.state_dir)
		return 0;
	/* Opened now, as root, and kept: the front writes it later as --front-uid, which may not
	 * enter the state directory (root's, 0700) — and, in a pod, has no CAP_CHOWN to give it a
	 * directory of its own. Like the replay log's files. */
	if (asprintf(&path, "%s/" TENANT_KEY, srv->cfg.state_dir) < 0)
		return bk_error_errno(err, ENOMEM, "reset");
	r->key_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r->key_fd < 0 || fstat(r->key_fd, &st) < 0)
		return bk_error_errno(err, errno, "cannot open %s", path);
	if (st.st_size == 0)
		return 0;
	/* A Reset installed the next tenant's key: it wins over --key-file and --key-env, which
	 * held the last tenant's. */
	if ((ret = bk_keyring_load_fd(r->key_fd, path, &ring, err)) < 0)
		return bk_error_prefix(err, ret, "the key a Reset installed");
	if ((ret = bk_keystore_pin(srv->keystore, ring, err)) < 0)
		return ret;
	bk_log(BK_LOG_INFO, "keys: %s, installed by a Reset, is the only key (the key file is not read)", path);
	return 0;
}

/* Written in place (the front may create nothing in the state directory) and synced before the
 * key is installed. A crash in the middle leaves a file that does not parse — boxkited then
 * refuses to start — or a key no one holds: never the last tenant's. */
static int tenant_key_save(struct bk_reset *r, const char *text, size_t len, bk_error **err)
{
	int ret = bk_pwrite_full(r->key_fd, (const uint8_t *)text, len, 0);

	if (ret < 0)
		return bk_error_errno(err, -ret, "tenant key: write");
	if (ftruncate(r->key_fd, (off_t)len) < 0 || fsync(r->key_fd) < 0)
		return bk_error_errno(err, errno, "tenant key: write");
	return 0;
}

/* Persist, then install, the new key, and answer this call with it. */
static int rotate_key(bk_server *srv, bk_call *call, const Boxkite__V1__ResetRequest *rq, bk_error **err)
{
	char text[BK_KEY_TEXT_MAX];
	bk_keyring *ring = NULL;
	int len, ret;

	len = bk_key_text(rq->new_key_id, rq->new_key_secret.data, rq->new_key_secret.len, text, sizeof(text), err);
	if (len < 0)
		return len;
	ret = tenant_key_save(srv->reset, text, (size_t)len, err);
	if (ret == 0)
		ret = bk_keyring_parse(text, (size_t)len, "the new key", &ring, err);
	OPENSSL_cleanse(text, sizeof(text));
	if (ret < 0 || (ret = bk_keystore_pin(srv->keystore, ring, err)) < 0)
		return ret;
	/* The answer is MAC'd with the key installed; the audit line still names the signer's. */
	call->answer_keys = bk_keystore_get(srv->keystore);
	call->answer_key = bk_keyring_find(bk_keyring_ref_ring(call->answer_keys), rq->new_key_id);
	return 0;
}

/* --- the steps ------------------------------------------------------------------------------- */

/* KillAll: SIGKILL every exec's init, answered once each is reaped (their Exited events, which
 * answer their calls, came before). hold: Spawn refused from then on. */
static int kill_all(bk_server *srv, bool hold, uint64_t *killed, bk_error **err)
{
	Boxkite__Executor__KillAll ka = BOXKITE__EXECUTOR__KILL_ALL__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	int ret;

	ka.hold = hold;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL_ALL;
	order.kill_all = &ka;
	if ((ret = bk_link_call(srv->executor, &order, &reply, NULL, NULL, err)) < 0)
		return bk_error_prefix(err, ret, "killing every command");
	*killed = reply->done->count;
	bk_reply_free(reply);
	return 0;
}

/* No call but this one in flight: nothing of the last session can act after the wipe (an
 * upload's commit, a file order sent late). New ones are refused by the gate. */
static int quiesce(bk_server *srv, bk_error **err)
{
	struct timespec tick = { .tv_nsec = 10 * 1000000L };

	for (int waited = 0; atomic_load(&srv->calls_open) > 1; waited += 10) {
		if (atomic_load(&srv->stopping))
			return bk_error_set(err, BK_UNAVAILABLE, 0, "boxkited is shutting down");
		if (waited >= QUIESCE_MS)
			return bk_error_set(err, BK_DEADLINE_EXCEEDED, 0, "%ld calls still in flight after %d s",
					    atomic_load(&srv->calls_open) - 1, QUIESCE_MS / 1000);
		nanosleep(&tick, NULL);
	}
	return 0;
}

static int wipe(bk_server *srv, uint64_t *removed, bk_error **err)
{
	Boxkite__Executor__Wipe w = BOXKITE__EXECUTOR__WIPE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	bk_error *why = NULL;

	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_WIPE;
	order.wipe = &w;
	if (bk_link_call(srv->files_link, &order, &reply, NULL, NULL, &why) < 0) {
		int ret = bk_error_set(err, BK_DATA_LOSS, 0, "the sandbox is not verified empty: %s", bk_error_msg(why));
		bk_error_free(why);
		return ret;
	}
	*removed = reply->done->count;
	bk_reply_free(reply);
	return 0;
}

static int reset_run(bk_server *srv, bk_call *call, const Boxkite__V1__ResetRequest *rq,
		     Boxkite__V1__ResetResponse *resp, char *snapshot, size_t snapshot_size, bk_error **err)
{
	uint64_t none;
	int ret;

	/* What runs now dies of the reset: whoever waits on it is told so (ABORTED), not given the
	 * end the kill makes. */
	bk_processes_reset_begin(srv);
	if ((ret = kill_all(srv, true, &resp->processes_killed, err)) < 0)
		return ret;
	/* Every background process is an exec tree to the executor: dead by now. Their records and
	 * rings go, and the calls parked on them are answered (ABORTED), before quiesce() waits for
	 * every call to end. */
	bk_processes_reset(srv);
	/* Every watch ends, its waiting reads answered (WATCH_END_RESET) before quiesce() too; the
	 * file worker drops its instances at the Wipe, so nothing of the wipe is reported. */
	bk_watches_reset(srv);
	/* No preview connection of the last tenant stays open (new ones are refused while the gate
	 * is shut). */
	bk_proxy_cut_all(srv);
	/* A sync of the last tenant's is cancelled, not waited out: its store may never answer. */
	bk_sync_cancel(srv);
	if ((ret = quiesce(srv, err)) < 0)
		return ret;
	/* A sync that runs is no call: it ends first. Then, with --sync-on-reset, the last
	 * tenant's workspace is pushed — while the file index still knows its files — before it
	 * goes. A push that fails fails the reset: nothing is wiped that was to be kept. */
	bk_sync_idle(srv);
	if ((ret = bk_sync_final_push(srv, call->key, snapshot, snapshot_size, err)) < 0)
		return ret;
	bk_sync_reset(srv);
	bk_files_reset(srv);
	if ((ret = wipe(srv, &resp->entries_removed, err)) < 0)
		return ret;
	bk_replay_drop_answers(srv->replay);
	if (rq->new_key_id[0] && (ret = rotate_key(srv, call, rq, err)) < 0)
		return ret;
	return kill_all(srv, false, &none, err);
}

static void *reset_main(void *arg)
{
	struct bk_reset *r = arg;
	bk_call *call = r->call;
	bk_server *srv = call->srv;
	const Boxkite__V1__ResetRequest *rq = r->rq;
	Boxkite__V1__ResetResponse resp = BOXKITE__V1__RESET_RESPONSE__INIT;
	bk_error *err = NULL;
	char snapshot[256] = "", why[sizeof(srv->failure)];

	if (reset_run(srv, call, rq, &resp, snapshot, sizeof(snapshot), &err) < 0) {
		snprintf(why, sizeof(why), "a reset failed: %s", bk_error_msg(err));
		bk_error_prefix(&err, -1, "reset failed (this sidecar now serves only Health: discard it)");
		bk_server_fail(srv, why);
		bk_log(BK_LOG_ERROR, "%s", bk_error_msg(err));
		bk_call_fail(call, err);
		return NULL;
	}
	resp.snapshot = snapshot;
	bk_log(BK_LOG_INFO, "reset: %llu commands killed, %llu entries removed%s%s%s",
	       (unsigned long long)resp.processes_killed, (unsigned long long)resp.entries_removed,
	       snapshot[0] ? ", pushed first as " : "", snapshot, rq->new_key_id[0] ? ", the new key installed" : "");
	atomic_store(&srv->served_since_ms, bk_clock_monotonic_ms());
	atomic_store(&srv->gate, BK_GATE_OPEN);
	bk_call_reply(call, &resp.base);
	return NULL;
}

/* --- the rpc -------------------------------------------------------------------- */

/* A Reset made with a warm pool's claim key hands the sandbox to its tenant: it must install a
 * key of the tenant's own, which retires the claim key (the pipeline lets the claim key do
 * nothing else). A "new" key that is the claim key would keep the pool's shared key working on
 * this pod for good. True when the call may go on; otherwise it has been failed. */
static bool claim_reset_ok(bk_call *call, const Boxkite__V1__ResetRequest *rq)
{
	const bk_keyring *ring = bk_keyring_ref_ring(call->keys);

	if (!rq->new_key_id[0]) {
		bk_call_failf(call, BK_PERMISSION_DENIED, BK_DETAIL_CLAIM_KEY,
			      "a Reset with a warm pool's claim key installs the tenant's key: give new_key_id and "
			      "new_key_secret");
		return false;
	}
	for (size_t i = 0; i < ring->n; i++)
		if (ring->keys[i].len == rq->new_key_secret.len &&
		    CRYPTO_memcmp(ring->keys[i].secret, rq->new_key_secret.data, ring->keys[i].len) == 0) {
			bk_call_failf(call, BK_INVALID_ARGUMENT, BK_DETAIL_CLAIM_KEY,
				      "the new key is the pool's claim key: give the tenant a key of its own");
			return false;
		}
	return true;
}

void bk_handle_reset(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ResetRequest *rq = (const Boxkite__V1__ResetRequest *)request;
	bk_server *srv = call->srv;
	struct bk_reset *r = srv->reset;
	int expected = BK_GATE_OPEN, rv;

	if (!!rq->new_key_id[0] != !!rq->new_key_secret.len) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "give both new_key_id and new_key_secret, or neither");
		return;
	}
	if (rq->new_key_id[0] && (!bk_key_id_valid(rq->new_key_id) || rq->new_key_secret.len != 32)) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "the new key is an id of 1..%d of [A-Za-z0-9._-] and a secret of 32 bytes", BK_KEY_ID_MAX);
		return;
	}
	/* The new secret is in the body, which the MAC authenticates but does not hide: one that came
	 * over plain tcp:// has been on the network in clear, whichever client sent it. */
	if (rq->new_key_id[0] && !call->private_channel) {
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0,
			      "a new key is not taken over plain tcp://: it crossed the network in clear (use tls+tcp:// "
			      "or ipc://, and another key)");
		return;
	}
	if (rq->new_key_id[0] && r->key_fd < 0) {
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "no state directory to keep the new key in");
		return;
	}
	if (bk_keyring_ref_claim(call->keys) && !claim_reset_ok(call, rq))
		return;
	if (!srv->executor || !srv->files_link) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server has no sandbox to reset");
		return;
	}
	/* Without a sandbox (a pod's container not found yet) there is no file worker to wipe it:
	 * refused before anything happens rather than failed halfway. */
	if (!atomic_load(&srv->sandbox_ready)) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "the sandbox is not ready: nothing to reset yet");
		return;
	}
	if (!atomic_compare_exchange_strong(&srv->gate, &expected, BK_GATE_RESET)) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "a reset is already running");
		return;
	}
	/* The last reset's thread answered its call and is ending, if not gone. */
	if (r->joinable)
		pthread_join(r->thread, NULL);
	r->joinable = false;
	r->call = call;
	r->rq = rq;
	rv = pthread_create(&r->thread, NULL, reset_main, r);
	if (rv) {
		atomic_store(&srv->gate, BK_GATE_OPEN);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "cannot start the reset: %s", strerror(rv));
		return;
	}
	r->joinable = true;
}

void bk_reset_stop(bk_server *srv)
{
	struct bk_reset *r = srv->reset;

	if (r && r->joinable) {
		pthread_join(r->thread, NULL);
		r->joinable = false;
	}
}

void bk_reset_fini(bk_server *srv)
{
	struct bk_reset *r = srv->reset;

	if (!r)
		return;
	bk_reset_stop(srv);
	bk_close(r->key_fd);
	free(r);
	srv->reset = NULL;
}
