/* file:///DIR: keys are paths under DIR. A value is written to a hidden temporary name in its
 * key's directory and renamed into place, so a reader sees all of it or nothing; the barrier is
 * one syncfs(2) of DIR's filesystem rather than an fsync per blob. */
#include "sync/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fullio.h"
#include "mkdir.h"

/* The directory: the url's path ("file://" is its first 7 bytes). */
static const char *store_dir(const bk_store *s)
{
	return s->url + strlen("file://");
}

static int key_path(const bk_store *s, const char *key, char *out, size_t size, bk_error **err)
{
	if ((size_t)snprintf(out, size, "%s/%s", store_dir(s), key) >= size)
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "%s: key %s", s->url, key);
	return 0;
}

static int file_has(bk_store *s, const char *key, bk_error **err)
{
	char path[4096];
	struct stat st;

	if (key_path(s, key, path, sizeof(path), err) < 0)
		return -ENAMETOOLONG;
	if (stat(path, &st) == 0)
		return S_ISREG(st.st_mode);
	if (errno == ENOENT || errno == ENOTDIR)
		return 0;
	return bk_error_errno(err, errno, "%s: stat %s", s->url, key);
}

static int file_put(bk_store *s, const char *key, const uint8_t *data, size_t len, bk_error **err)
{
	char path[4096], tmp[4096 + 32], failed[4096] = "";
	const char *slash;
	uint32_t r;
	int ret, fd;

	if (key_path(s, key, path, sizeof(path), err) < 0)
		return -ENAMETOOLONG;
	slash = strrchr(path, '/');
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return bk_error_errno(err, errno, "getrandom");
	snprintf(tmp, sizeof(tmp), "%.*s/.tmp-%08x-%s", (int)(slash - path), path, r, slash + 1);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		char dir[4096];
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		ret = bk_mkdir_p(dir, 0700, 0700, true, failed, sizeof(failed));
		if (ret < 0)
			return bk_error_errno(err, -ret, "%s: mkdir %s", s->url, failed);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return bk_error_errno(err, errno, "%s: create %s", s->url, key);
	ret = bk_write_full(fd, data, len);
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, path) < 0)
		ret = -errno;
	if (ret < 0) {
		unlink(tmp);
		return bk_error_errno(err, -ret, "%s: write %s", s->url, key);
	}
	return 0;
}

static int file_get(bk_store *s, const char *key, size_t max, uint8_t **data, size_t *len, bk_error **err)
{
	char path[4096];
	_cleanup_close_ int fd = -1;
	int ret;

	if (key_path(s, key, path, sizeof(path), err) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return bk_error_set(err, errno == ENOENT ? BK_NOT_FOUND : bk_status_from_errno(errno), errno,
				    "%s: %s", s->url, key);
	ret = bk_read_all(fd, max, data, len);
	if (ret < 0)
		return bk_error_set(err, ret == -EFBIG ? BK_DATA_LOSS : bk_status_from_errno(-ret), -ret, "%s: read %s",
				    s->url, key);
	return 0;
}

static int file_list(bk_store *s, const char *dir, char ***names, size_t *n, bk_error **err)
{
	char path[4096];
	_cleanup_free_ char **v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*names = NULL;
	*n = 0;
	if (key_path(s, dir, path, sizeof(path), err) < 0)
		return -ENAMETOOLONG;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : bk_error_errno(err, errno, "%s: list %s", s->url, dir);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue; /* ".", "..", and a put's temporary names */
		if (count == cap) {
			char **grown = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!grown)
				break;
			v = grown;
		}
		if (!(v[count] = strdup(de->d_name)))
			break;
		count++;
	}
	closedir(d);
	if (de) {
		while (count)
			free(v[--count]);
		return bk_error_errno(err, ENOMEM, "%s: list %s", s->url, dir);
	}
	*names = TAKE_PTR(v);
	*n = count;
	return 0;
}

static int file_barrier(bk_store *s, bk_error **err)
{
	_cleanup_close_ int fd = open(store_dir(s), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || syncfs(fd) < 0)
		return bk_error_errno(err, errno, "%s: syncfs", s->url);
	return 0;
}

static void file_free(bk_store *s)
{
	free(s);
}

static const struct bk_store_ops file_ops = {
	.has = file_has,
	.put = file_put,
	.get = file_get,
	.list = file_list,
	.barrier = file_barrier,
	.free = file_free,
};

int bk_store_file_open(const char *url, const char *dir, bk_store **out, bk_error **err)
{
	size_t len = strlen(url);
	bk_store *s;

	if (dir[0] != '/' || len >= 2048)
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0, "store URL '%.200s': file:// takes an absolute path", url);
	s = calloc(1, sizeof(*s) + len + 1);
	if (!s)
		return bk_error_errno(err, ENOMEM, "store");
	s->ops = &file_ops;
	memcpy(s->url, url, len + 1);
	/* A trailing '/' would double in every key's path. */
	while (len > strlen("file:///") && s->url[len - 1] == '/')
		s->url[--len] = '\0';
	*out = s;
	return 0;
}
