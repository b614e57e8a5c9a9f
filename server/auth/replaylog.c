#include "auth/replaylog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fullio.h"
#include "keys.h"

#define FILES 3
#define MAGIC "bkreplay1\n"

/* A file begins with its magic and the wall-clock time its turn began; records follow. */
struct header {
	char magic[sizeof(MAGIC) - 1];
	int64_t started_ms;
};

struct record {
	int64_t ts_ms;
	uint8_t nonce[BK_NONCE_LEN];
	uint8_t key_len;
	char key_id[BK_KEY_ID_MAX];
};

struct bk_replay_log {
	pthread_mutex_t lock;
	int fd[FILES];
	int current;            /* the file appended to */
	int64_t started_ms;     /* when its turn began */
	int64_t window_ms;
	size_t restored;
};

/* Empty file i and make it the current one, its turn beginning at now_ms. */
static int take_turn(bk_replay_log *log, int i, int64_t now_ms)
{
	struct header h = { .started_ms = now_ms };
	int ret;

	memcpy(h.magic, MAGIC, sizeof(h.magic));
	if (ftruncate(log->fd[i], 0) < 0)
		return -errno;
	if ((ret = bk_write_full(log->fd[i], (const uint8_t *)&h, sizeof(h))) < 0)
		return ret;
	log->current = i;
	log->started_ms = now_ms;
	return 0;
}

/* Put file i's records inside the window back into r; *started: its header's time (INT64_MIN
 * for an empty or foreign file, which is then the first to be reused). */
static void restore_file(bk_replay_log *log, int i, bk_replay *r, int64_t now_ms, int64_t *started)
{
	struct header h;
	struct record rec;
	char key_id[BK_KEY_ID_MAX + 1];

	*started = INT64_MIN;
	if (pread(log->fd[i], &h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h.magic, MAGIC, sizeof(h.magic)))
		return;
	*started = h.started_ms;
	for (off_t off = sizeof(h); pread(log->fd[i], &rec, sizeof(rec), off) == (ssize_t)sizeof(rec);
	     off += (off_t)sizeof(rec)) {
		if (rec.key_len == 0 || rec.key_len > BK_KEY_ID_MAX)
			continue;
		/* Outside the window, the time check refuses the request anyway. */
		if (rec.ts_ms < now_ms - log->window_ms || rec.ts_ms > now_ms + log->window_ms)
			continue;
		memcpy(key_id, rec.key_id, rec.key_len);
		key_id[rec.key_len] = '\0';
		if (bk_replay_forget(r, key_id, rec.nonce, now_ms) == 0)
			log->restored++;
	}
}

int bk_replay_log_open(const char *dir, int64_t window_ms, bk_replay *r, int64_t now_ms, bk_replay_log **out,
		       bk_error **err)
{
	bk_replay_log *log = calloc(1, sizeof(*log));
	int64_t started[FILES];
	int newest = 0, ret;

	if (!log)
		return bk_error_errno(err, ENOMEM, "replay log");
	pthread_mutex_init(&log->lock, NULL);
	log->window_ms = window_ms;
	for (int i = 0; i < FILES; i++)
		log->fd[i] = -1;
	for (int i = 0; i < FILES; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/replay.%d", dir, i);
		log->fd[i] = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (log->fd[i] < 0) {
			ret = bk_error_errno(err, errno, "cannot open the replay log %s", path);
			bk_replay_log_free(log);
			return ret;
		}
		restore_file(log, i, r, now_ms, &started[i]);
		if (started[i] > started[newest])
			newest = i;
	}
	/* Go on in the newest file while its turn lasts; else the next one's turn begins (it is
	 * the oldest, or foreign). */
	if (started[newest] != INT64_MIN && now_ms >= started[newest] && now_ms - started[newest] < window_ms) {
		log->current = newest;
		log->started_ms = started[newest];
	} else if ((ret = take_turn(log, (newest + 1) % FILES, now_ms)) < 0) {
		bk_error_errno(err, -ret, "cannot write the replay log in %s", dir);
		bk_replay_log_free(log);
		return ret;
	}
	*out = log;
	return 0;
}

void bk_replay_log_free(bk_replay_log *log)
{
	if (!log)
		return;
	for (int i = 0; i < FILES; i++)
		bk_close(log->fd[i]);
	pthread_mutex_destroy(&log->lock);
	free(log);
}

int bk_replay_log_append(bk_replay_log *log, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t ts_ms,
			 int64_t now_ms)
{
	struct record rec = { .ts_ms = ts_ms };
	size_t klen = strlen(key_id);
	int ret = 0;

	if (klen == 0 || klen > BK_KEY_ID_MAX)
		return -EINVAL;
	memcpy(rec.nonce, nonce, BK_NONCE_LEN);
	rec.key_len = (uint8_t)klen;
	memcpy(rec.key_id, key_id, klen);
	pthread_mutex_lock(&log->lock);
	/* A turn lasts a window; a clock that went back keeps the current file, which only grows. */
	if (now_ms - log->started_ms >= log->window_ms)
		ret = take_turn(log, (log->current + 1) % FILES, now_ms);
	/* One write of a whole record to an O_APPEND file: records never interleave. */
	if (ret == 0 && write(log->fd[log->current], &rec, sizeof(rec)) != (ssize_t)sizeof(rec))
		ret = errno ? -errno : -EIO;
	pthread_mutex_unlock(&log->lock);
	return ret;
}

size_t bk_replay_log_restored(const bk_replay_log *log)
{
	return log->restored;
}
