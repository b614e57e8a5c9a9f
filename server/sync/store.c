#include "sync/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mkdir.h"

#define FILE_SCHEME "file://"
#define S3_SCHEME "s3://"

int bk_store_open(const char *url, const atomic_bool *cancel, bk_store **out, bk_error **err)
{
	int ret;

	if (strncmp(url, FILE_SCHEME, strlen(FILE_SCHEME)) == 0)
		ret = bk_store_file_open(url, url + strlen(FILE_SCHEME), out, err);
	else if (strncmp(url, S3_SCHEME, strlen(S3_SCHEME)) == 0)
		ret = bk_store_s3_open(url, url + strlen(S3_SCHEME), out, err);
	else
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0,
				    "store URL '%.200s': not file:///DIR nor s3://BUCKET/PREFIX", url);
	if (ret == 0)
		(*out)->cancel = cancel;
	return ret;
}

void bk_store_free(bk_store *s)
{
	if (s)
		s->ops->free(s);
}

int bk_store_prepare(const char *url, uid_t owner, bk_error **err)
{
	const char *dir = url + strlen(FILE_SCHEME);
	char failed[4096] = "";
	struct stat st;
	int ret;

	if (strncmp(url, FILE_SCHEME, strlen(FILE_SCHEME)) != 0)
		return 0;
	if (dir[0] != '/')
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0, "store URL '%.200s': file:// takes an absolute path", url);
	ret = bk_mkdir_p(dir, 0755, 0700, true, failed, sizeof(failed));
	if (ret < 0)
		return bk_error_errno(err, -ret, "cannot create %s (for --sync-store %s)", failed[0] ? failed : dir, url);
	if (lstat(dir, &st) < 0)
		return bk_error_errno(err, errno, "--sync-store %s", url);
	if (!S_ISDIR(st.st_mode))
		return bk_error_set(err, BK_FAILED_PRECONDITION, ENOTDIR, "--sync-store %s: not a directory", url);
	/* The front writes it, and nobody else needs to read it: a snapshot is the workspace. */
	if ((st.st_uid != owner || st.st_gid != owner) && chown(dir, owner, owner) < 0)
		return bk_error_errno(err, errno, "chown --sync-store %s", url);
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) < 0)
		return bk_error_errno(err, errno, "chmod --sync-store %s", url);
	return 0;
}

int bk_store_check(const char *url, bk_error **err)
{
	const char *dir = url + strlen(FILE_SCHEME);
	char path[4096];
	size_t len;

	if (strncmp(url, S3_SCHEME, strlen(S3_SCHEME)) == 0)
		return bk_store_s3_check(url, err);
	if (strncmp(url, FILE_SCHEME, strlen(FILE_SCHEME)) != 0)
		return 0;
	len = strlen(dir);
	if (len >= sizeof(path))
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "--sync-store %.200s: too long", url);
	/* Every directory above it, from the root down: the first one it cannot search. */
	for (size_t i = 1; i < len; i++) {
		if (dir[i] != '/')
			continue;
		memcpy(path, dir, i);
		path[i] = '\0';
		if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) < 0)
			return bk_error_set(err, BK_FAILED_PRECONDITION, errno,
					    "--sync-store %s: the front (uid %u) cannot reach it past %s: give it search "
					    "permission there (e.g. chmod o+x %s) or put the store elsewhere",
					    url, (unsigned)geteuid(), path, path);
	}
	if (faccessat(AT_FDCWD, dir, R_OK | W_OK | X_OK, AT_EACCESS) < 0)
		return bk_error_set(err, BK_FAILED_PRECONDITION, errno,
				    "--sync-store %s: the front (uid %u) cannot read and write it: make it the front's "
				    "(chown %u %s) on a filesystem mounted read-write",
				    url, (unsigned)geteuid(), (unsigned)geteuid(), dir);
	return 0;
}

/* Whether rest (after a configured URL) is empty or "/a/b" with plain components. */
static int prefix_ok(const char *rest)
{
	if (!*rest)
		return 1;
	if (*rest != '/')
		return 0;
	for (const char *c = rest + 1;;) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!c[len])
			return 1;
		c += len + 1;
	}
}

/* The configured store url is in (the most specific one, when stores nest) and the length of
 * its URL without trailing '/': its index, or -1 (with *err) when url may not be named. */
static int store_of(const char *url, char *const *configured, size_t n, size_t *store_len, bk_error **err)
{
	int best = -1;

	if (strlen(url) > 1024 || strchr(url, '%') || strchr(url, '?') || strchr(url, '#')) {
		bk_error_set(err, BK_INVALID_ARGUMENT, 0, "store URL '%.200s': too long, or with %%, ? or #", url);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(configured[i]);
		while (len > 0 && configured[i][len - 1] == '/')
			len--;
		if (strncmp(url, configured[i], len) == 0 && prefix_ok(url + len) && (best < 0 || len > *store_len)) {
			best = (int)i;
			*store_len = len;
		}
	}
	if (best >= 0)
		return best;
	if (!n)
		bk_error_set(err, BK_FAILED_PRECONDITION, 0, "no --sync-store is configured: sync is off");
	else
		bk_error_set(err, BK_PERMISSION_DENIED, 0, "store URL '%.200s' is not a --sync-store nor under one", url);
	return -1;
}

int bk_store_url_allowed(const char *url, char *const *configured, size_t n, bk_error **err)
{
	size_t len;

	return store_of(url, configured, n, &len, err) < 0 ? -EINVAL : 0;
}

int bk_store_url_scope(const char *url, char *const *configured, size_t n, const char *prefix, char *out, size_t size,
		       bk_error **err)
{
	size_t len = 0;
	int i = store_of(url, configured, n, &len, err);

	if (i < 0)
		return -EINVAL;
	if (!prefix) {
		if (snprintf(out, size, "%s", url) >= (int)size)
			return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "store URL '%.200s': too long", url);
		return 0;
	}
	if (snprintf(out, size, "%.*s/%s%s", (int)len, configured[i], prefix, url + len) >= (int)size)
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "store URL '%.200s': too long", url);
	return 0;
}
