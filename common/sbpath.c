#include "sbpath.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cleanup.h"

static const char *const roots[] = { "/workspace", "/tmp" };

int bk_sandbox_path(const char *in, char *out, size_t size, const char **why)
{
	size_t n = 0;
	const char *p = in;
	bool under_root = false;

	if (size < sizeof(BK_WORKSPACE) + 1) {
		*why = "path buffer too small";
		return -EINVAL;
	}
	if (in[0] != '/') {
		memcpy(out, BK_WORKSPACE, sizeof(BK_WORKSPACE) - 1);
		n = sizeof(BK_WORKSPACE) - 1;
	}
	while (*p) {
		const char *end;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchr(p, '/');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 1 && p[0] == '.') {
			p += len;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			*why = "'..' is not allowed in sandbox paths";
			return -EINVAL;
		}
		if (n + 1 + len + 1 > size) {
			*why = "path too long";
			return -EINVAL;
		}
		out[n++] = '/';
		memcpy(out + n, p, len);
		n += len;
		p += len;
	}
	out[n] = '\0';
	if (n == 0) {
		*why = "'/' is not inside a sandbox root (/workspace, /tmp)";
		return -EINVAL;
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(roots); i++) {
		size_t rl = strlen(roots[i]);
		if (strncmp(out, roots[i], rl) == 0 && (out[rl] == '\0' || out[rl] == '/'))
			under_root = true;
	}
	if (!under_root) {
		*why = "path is not inside a sandbox root (/workspace, /tmp)";
		return -EINVAL;
	}
	return 0;
}
