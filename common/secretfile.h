/* Files that hold a secret — the HMAC key file, a TLS private key, S3 credentials — are refused
 * when anyone but their owner may read or write them: one rule for all three, so that a key left
 * readable by the whole host is noticed at start-up rather than used. */
#ifndef BK_SECRETFILE_H
#define BK_SECRETFILE_H

#include "error.h"

/* 0 when fd (opened from path, which `what` names in the message: "key file", "--tls-key") is a
 * regular file no group or other user may access; else -EPERM / -EINVAL with *err set. */
int bk_secret_file_check(int fd, const char *what, const char *path, bk_error **err);

/* Open path read-only and check it as above: the descriptor, or -errno with *err set. */
int bk_secret_file_open(const char *what, const char *path, bk_error **err);

#endif
