/* mkdir -p, for the directories boxkited and bkctl make on the host: an ipc:// socket's runtime
 * directory, the state directory, a key's directory, a download's destination. */
#ifndef BK_MKDIR_H
#define BK_MKDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Make path and whichever of its parents are missing: parents with parents_mode, path itself
 * with mode; with exact, each directory made gets exactly its mode whatever the umask (one that
 * existed is left as it is). 0, or -errno with the directory that could not be made in failed
 * (size bytes; failed may be NULL); -ENOTDIR when path exists and is not a directory. */
int bk_mkdir_p(const char *path, mode_t parents_mode, mode_t mode, bool exact, char *failed, size_t size);

#endif
