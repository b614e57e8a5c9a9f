#include "sbpath.h"

#include <errno.h>
#include <string.h>

#include "cleanup.h"

void bk_roots_default(bk_roots *roots)
{
	memset(roots, 0, sizeof(*roots));
	strcpy(roots->root[0].path, BK_WORKSPACE);
	strcpy(roots->root[1].path, "/tmp");
	roots->n = 2;
}

/* The next component of the path at *p (skipping slashes), its length in *len; *p moves past
 * it. NULL at the end. */
static const char *next_component(const char **p, size_t *len)
{
	const char *c = *p, *end;

	while (*c == '/')
		c++;
	if (!*c)
		return NULL;
	end = strchr(c, '/');
	*len = end ? (size_t)(end - c) : strlen(c);
	*p = c + *len;
	return c;
}

/* Lexical normalization; relative paths are taken relative to the workspace. */
static int normalize(const char *in, char *out, size_t size, bk_error **err)
{
	size_t n = 0, len;
	const char *p = in;

	if (in[0] != '/') {
		if (size < sizeof(BK_WORKSPACE)) {
			return bk_error_invalid(err, "path too long");
		}
		memcpy(out, BK_WORKSPACE, sizeof(BK_WORKSPACE) - 1);
		n = sizeof(BK_WORKSPACE) - 1;
	}
	for (const char *c; (c = next_component(&p, &len));) {
		if (len == 1 && c[0] == '.')
			continue;
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			return bk_error_invalid(err, "'..' is not allowed in sandbox paths");
		}
		if (n + 1 + len + 1 > size) {
			return bk_error_invalid(err, "path too long");
		}
		out[n++] = '/';
		memcpy(out + n, c, len);
		n += len;
	}
	if (n == 0) {
		return bk_error_invalid(err, "'/' is not inside a sandbox root");
	}
	out[n] = '\0';
	return 0;
}

static const bk_root *find_root(const bk_roots *roots, const char *path)
{
	const bk_root *best = NULL;

	for (size_t i = 0; i < roots->n; i++) {
		size_t rl = strlen(roots->root[i].path);
		if (strncmp(path, roots->root[i].path, rl) == 0 && (path[rl] == '\0' || path[rl] == '/') &&
		    (!best || rl > strlen(best->path)))
			best = &roots->root[i];
	}
	return best;
}

int bk_roots_add(bk_roots *roots, const char *spec, bk_error **err)
{
	char path[BK_ROOT_PATH_MAX + 8];
	size_t len = strlen(spec);
	bool ro = len > 3 && strcmp(spec + len - 3, ":ro") == 0;
	char norm[BK_ROOT_PATH_MAX];

	if (roots->n == BK_ROOTS_MAX) {
		return bk_error_invalid(err, "too many roots");
	}
	if (spec[0] != '/' || len - (ro ? 3 : 0) >= sizeof(path)) {
		return bk_error_invalid(err, "a root is an absolute sandbox path, optionally followed by :ro");
	}
	memcpy(path, spec, len - (ro ? 3 : 0));
	path[len - (ro ? 3 : 0)] = '\0';
	if (normalize(path, norm, sizeof(norm), err) < 0)
		return -EINVAL;
	for (size_t i = 0; i < roots->n; i++) {
		if (strcmp(roots->root[i].path, norm) == 0) {
			roots->root[i].read_only = ro;
			return 0;
		}
	}
	strcpy(roots->root[roots->n].path, norm);
	roots->root[roots->n].read_only = ro;
	roots->n++;
	return 0;
}

int bk_sandbox_path(const bk_roots *roots, const char *in, char *out, size_t size, const bk_root **root,
		    bk_error **err)
{
	const bk_root *r;

	if (normalize(in, out, size, err) < 0)
		return -EINVAL;
	r = find_root(roots, out);
	if (!r) {
		return bk_error_invalid(err, "path is not inside a sandbox root");
	}
	if (root)
		*root = r;
	return 0;
}

bool bk_symlink_contained(const bk_root *root, const char *link, const char *target)
{
	size_t rl = strlen(root->path), depth = 0, len;
	const char *p;

	if (!target[0])
		return false;
	if (target[0] == '/') {
		/* Measured from "/": it must first name root's components, then stay below. */
		if (strncmp(target, root->path, rl) != 0 || (target[rl] != '\0' && target[rl] != '/'))
			return false;
		p = target + rl;
	} else {
		/* Measured from the link's directory: its depth below root. */
		for (p = link + rl; *p; p++)
			depth += *p == '/';
		if (depth == 0) /* the root itself is no link */
			return false;
		depth--; /* the link's own name */
		p = target;
	}
	for (const char *c; (c = next_component(&p, &len));) {
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (depth == 0)
				return false;
			depth--;
		} else if (!(len == 1 && c[0] == '.')) {
			depth++;
		}
	}
	return true;
}
