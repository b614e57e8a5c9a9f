#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

int bk_secret_file_check(int fd, const char *what, const char *path, bk_error **err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return bk_error_errno(err, errno, "cannot stat %s %s", what, path);
	if (!S_ISREG(st.st_mode))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s %s is not a regular file", what, path);
	if (st.st_mode & 077)
		return bk_error_set(err, BK_PERMISSION_DENIED, EPERM,
				    "%s %s has mode %04o: group or others may access it (chmod 600 %s)", what, path,
				    (unsigned)(st.st_mode & 07777), path);
	return 0;
}

int bk_secret_file_open(const char *what, const char *path, bk_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	int ret;

	if (fd < 0)
		return bk_error_errno(err, errno, "cannot open %s %s", what, path);
	if ((ret = bk_secret_file_check(fd, what, path, err)) < 0)
		return ret;
	return TAKE_FD(fd);
}
