/* The corpus replay of every fuzz harness (make test-fuzz): main() runs the harness's
 * LLVMFuzzerTestOneInput on each file named and each file of each directory named, without
 * libFuzzer, and fails when there was nothing to replay. `make fuzz` links libFuzzer instead. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *self;

__attribute__((noreturn)) static void die(const char *what, const char *why)
{
	fprintf(stderr, "%s: %s: %s\n", self, what, why);
	exit(1);
}

static void replay_file(const char *path, unsigned *count)
{
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t have = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		die(path, strerror(errno));
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		die(path, "out of memory");
	while (have < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);
		if (n <= 0)
			die(path, n ? strerror(errno) : "shorter than it was");
		have += (size_t)n;
	}
	LLVMFuzzerTestOneInput(buf, have);
	(*count)++;
}

int main(int argc, char **argv)
{
	unsigned count = 0;

	self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent *e;
		DIR *d;

		if (stat(argv[i], &st) < 0)
			die(argv[i], strerror(errno));
		if (!S_ISDIR(st.st_mode)) {
			replay_file(argv[i], &count);
			continue;
		}
		if (!(d = opendir(argv[i])))
			die(argv[i], strerror(errno));
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			replay_file(path, &count);
		}
		closedir(d);
	}
	if (count == 0)
		die("the corpus given", "no inputs to replay");
	printf("%s: replayed %u inputs\n", self, count);
	return 0;
}
