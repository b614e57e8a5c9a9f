#include "mkdir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int bk_mkdir_p(const char *path, mode_t parents_mode, mode_t mode, bool exact, char *failed, size_t size)
{
	char buf[4096];
	size_t len = strlen(path);
	struct stat sb;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; p <= buf + len; p++) {
		char c = *p;
		mode_t m = c ? parents_mode : mode;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(buf, m) == 0 ? exact && chmod(buf, m) < 0 : errno != EEXIST) {
			int errnum = errno;
			if (failed)
				snprintf(failed, size, "%s", buf);
			return -errnum;
		}
		*p = c;
	}
	if (stat(path, &sb) < 0)
		return -errno;
	return S_ISDIR(sb.st_mode) ? 0 : -ENOTDIR;
}
