#include "auth/keystore.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

struct bk_keyring_ref {
	atomic_int refs;
	bk_keyring *ring;
	bool claim; /* a warm pool's claim key, not a tenant's */
};

struct bk_keystore {
	pthread_mutex_t lock;
	char *path;
	bk_key_file_opener open; /* NULL: bk_keyring_open */
	void *open_arg;
	bk_keyring_ref *current;
	struct stat loaded; /* identity of the file last loaded */
	atomic_bool pinned; /* bk_keystore_pin: the key file is not read any more (set under lock) */
	bool claim;         /* the keys it reads are a warm pool's claim key (a pinned ring never is) */
};

void bk_keyring_ref_put(bk_keyring_ref *ref)
{
	if (ref && atomic_fetch_sub(&ref->refs, 1) == 1) {
		bk_keyring_free(ref->ring);
		free(ref);
	}
}

const bk_keyring *bk_keyring_ref_ring(const bk_keyring_ref *ref)
{
	return ref ? ref->ring : NULL;
}

bool bk_keyring_ref_claim(const bk_keyring_ref *ref)
{
	return ref && ref->claim;
}

static bool same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Make ring (taken) the current keyring; st: the file it came from, if any; pin: for good (a
 * ring from the file that comes after a pinned one is dropped). Returns 1, or 0 when dropped. */
static int keystore_install(bk_keystore *ks, bk_keyring *ring, const struct stat *st, bool pin, bk_error **err)
{
	bk_keyring_ref *ref = calloc(1, sizeof(*ref)), *old;

	if (!ref) {
		bk_keyring_free(ring);
		return bk_error_errno(err, ENOMEM, "keystore");
	}
	atomic_init(&ref->refs, 1);
	ref->ring = ring;
	ref->claim = ks->claim && !pin;
	pthread_mutex_lock(&ks->lock);
	if (atomic_load(&ks->pinned) && !pin) {
		pthread_mutex_unlock(&ks->lock);
		bk_keyring_ref_put(ref);
		return 0;
	}
	if (pin)
		atomic_store(&ks->pinned, true);
	old = ks->current;
	ks->current = ref;
	if (st)
		ks->loaded = *st;
	pthread_mutex_unlock(&ks->lock);
	bk_keyring_ref_put(old);
	return 1;
}

int bk_keystore_reload(bk_keystore *ks, bool force, bk_error **err)
{
	bk_keyring *ring = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int ret;

	if (!ks->path || atomic_load(&ks->pinned))
		return 0;
	/* Opening follows the symlinks Kubernetes uses for Secret volumes (..data swaps); what is
	 * compared is what was opened. */
	fd = ks->open ? ks->open(ks->open_arg, ks->path) : bk_keyring_open(ks->path);
	if (fd < 0)
		return bk_error_errno(err, -fd, "cannot open key file %s", ks->path);
	if (fstat(fd, &st) < 0)
		return bk_error_errno(err, errno, "cannot stat key file %s", ks->path);
	if (!force && ks->current && same_file_state(&st, &ks->loaded))
		return 0;
	ret = bk_keyring_load_fd(fd, ks->path, &ring, err);
	if (ret < 0)
		return ret;
	return keystore_install(ks, ring, &st, false, err);
}

int bk_keystore_open(const char *path, bool claim, bk_keystore **out, bk_error **err)
{
	bk_keystore *ks = calloc(1, sizeof(*ks));
	int ret;

	if (!ks)
		return bk_error_errno(err, ENOMEM, "keystore");
	pthread_mutex_init(&ks->lock, NULL);
	ks->claim = claim;
	if (path) {
		ks->path = strdup(path);
		if (!ks->path) {
			bk_keystore_free(ks);
			return bk_error_errno(err, ENOMEM, "keystore");
		}
		ret = bk_keystore_reload(ks, true, err);
		if (ret < 0) {
			bk_keystore_free(ks);
			return ret;
		}
	}
	*out = ks;
	return 0;
}

int bk_keystore_open_env(const char *name, bool claim, bk_keystore **out, bk_error **err)
{
	char *text = getenv(name);
	bk_keyring *ring = NULL;
	size_t len;
	int ret;

	if (!text || !*text)
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENOENT, "environment variable %s (the keys) is not set", name);
	len = strlen(text);
	ret = bk_keyring_parse(text, len, name, &ring, err);
	/* The variable leaves our environment, and its bytes -- "NAME=" too, which getenv's answer
	 * follows -- the block /proc/PID/environ shows: nothing there says a key was ever passed. */
	unsetenv(name);
	OPENSSL_cleanse(text - strlen(name) - 1, strlen(name) + 1 + len);
	if (ret < 0)
		return ret;
	ret = bk_keystore_open(NULL, claim, out, err);
	if (ret < 0) {
		bk_keyring_free(ring);
		return ret;
	}
	ret = keystore_install(*out, ring, NULL, false, err);
	return ret < 0 ? ret : 0;
}

int bk_keystore_pin(bk_keystore *ks, bk_keyring *ring, bk_error **err)
{
	return keystore_install(ks, ring, NULL, true, err) < 0 ? -ENOMEM : 0;
}

void bk_keystore_set_opener(bk_keystore *ks, bk_key_file_opener open, void *arg)
{
	ks->open = open;
	ks->open_arg = arg;
}

void bk_keystore_free(bk_keystore *ks)
{
	if (!ks)
		return;
	bk_keyring_ref_put(ks->current);
	pthread_mutex_destroy(&ks->lock);
	free(ks->path);
	free(ks);
}

bk_keyring_ref *bk_keystore_get(bk_keystore *ks)
{
	bk_keyring_ref *ref;

	pthread_mutex_lock(&ks->lock);
	ref = ks->current;
	if (ref)
		atomic_fetch_add(&ref->refs, 1);
	pthread_mutex_unlock(&ks->lock);
	return ref;
}

bool bk_keystore_configured(bk_keystore *ks)
{
	bool yes;

	pthread_mutex_lock(&ks->lock);
	yes = ks->current != NULL;
	pthread_mutex_unlock(&ks->lock);
	return yes;
}
