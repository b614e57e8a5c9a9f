/* What a push and a pull share (job.h): progress, orders to the file worker, a directory's
 * listing page by page, the excludes, blob keys and snapshot ids. */
#include "sync/job.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not stored unless asked for (default_excludes): caches and installed packages, which a
 * restore can rebuild. */
static const char *const default_excludes[] = {
	"node_modules", ".cache", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
};

/* --- progress ------------------------------------------------------------------------------- */

void sync_progress_add(struct job *j, struct progress_step d)
{
	struct bk_sync *s = sync_of(j->srv);

	pthread_mutex_lock(&s->lock);
	s->p.files_done += d.files;
	s->p.bytes_done += d.bytes;
	s->p.files_read += d.files_read;
	s->p.blobs_uploaded += d.blobs;
	s->p.bytes_uploaded += d.bytes_uploaded;
	pthread_mutex_unlock(&s->lock);
}

/* --- orders to the file worker ----------------------------------------------------------------- */

int sync_order(struct job *j, bk_order *order, bk_reply **reply, int *fd, const char *what, const char *path)
{
	size_t nfds = fd ? 1 : 0;
	int ret = bk_link_call(j->srv->files_link, order, reply, fd, fd ? &nfds : NULL, &j->err);

	if (ret < 0)
		return bk_error_prefix(&j->err, ret, "%s %.300s", what, path);
	if (fd && nfds != 1) {
		bk_reply_free(*reply);
		return bk_error_set(&j->err, BK_INTERNAL, EPROTO, "%s %.300s: no descriptor came", what, path);
	}
	return 0;
}

void sync_dirents_free(struct dirent_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].target);
	}
	free(v);
}

int sync_list_dir(struct job *j, const char *path, struct dirent_info **out, size_t *nout)
{
	struct dirent_info *v = NULL;
	size_t n = 0, cap = 0;
	char after[256 + 1] = "";
	bool more = true;

	while (more) {
		Boxkite__Executor__List op = BOXKITE__EXECUTOR__LIST__INIT;
		bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
		bk_reply *reply = NULL;
		Boxkite__Executor__Listed *l;

		op.path = (char *)path;
		op.after = after;
		op.limit = LIST_PAGE;
		order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_LIST;
		order.list = &op;
		if (sync_order(j, &order, &reply, NULL, "list", path) < 0) {
			sync_dirents_free(v, n);
			return -EIO;
		}
		l = reply->listed;
		more = l->more && l->n_entries;
		if (n + l->n_entries > cap) {
			cap = n + l->n_entries + 64;
			struct dirent_info *grown = realloc(v, cap * sizeof(*v));
			if (!grown) {
				bk_reply_free(reply);
				sync_dirents_free(v, n);
				return bk_error_errno(&j->err, ENOMEM, "list %.300s", path);
			}
			v = grown;
		}
		for (size_t i = 0; i < l->n_entries; i++) {
			const Boxkite__Executor__FileInfo *e = l->entries[i];
			v[n] = (struct dirent_info){ .name = strdup(e->name), .target = strdup(e->symlink_target),
						     .type = e->type, .mode = e->mode & 07777, .size = e->size,
						     .mtime_ns = e->mtime_ns };
			if (!v[n].name || !v[n].target) {
				n++;
				bk_reply_free(reply);
				sync_dirents_free(v, n);
				return bk_error_errno(&j->err, ENOMEM, "list %.300s", path);
			}
			n++;
		}
		if (more)
			snprintf(after, sizeof(after), "%s", l->entries[l->n_entries - 1]->name);
		bk_reply_free(reply);
	}
	*out = v;
	*nout = n;
	return 0;
}

/* --- excludes ---------------------------------------------------------------------------------- */

static bool excluded_by(const char *pattern, const char *name, const char *rel)
{
	return strchr(pattern, '/') ? fnmatch(pattern, rel, FNM_PATHNAME | FNM_PERIOD) == 0
				    : fnmatch(pattern, name, FNM_PERIOD) == 0;
}

bool sync_excluded(const struct job *j, bool defaults, const char *name, const char *rel)
{
	for (size_t i = 0; i < j->nexclude; i++)
		if (excluded_by(j->exclude[i], name, rel))
			return true;
	for (size_t i = 0; defaults && i < BK_ARRAY_SIZE(default_excludes); i++)
		if (excluded_by(default_excludes[i], name, rel))
			return true;
	return false;
}

void sync_blob_key(const bk_hash h, char out[BLOB_KEY_MAX])
{
	char hex[2 * BK_HASH_LEN + 1];

	bk_block_name(h, hex);
	snprintf(out, BLOB_KEY_MAX, "blobs/%.2s/%s", hex, hex);
}


bool sync_id_valid(const char *id)
{
	size_t len = strlen(id);

	return len >= 1 && len <= ID_MAX && id[0] != '.' && strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
								"0123456789._-") == len;
}
