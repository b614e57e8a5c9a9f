/* The sandbox's seccomp filter: built with libseccomp once at start-up and exported as BPF, so
 * that a child makes two seccomp() calls just before execve and nothing else (STYLE.md §4,
 * DESIGN.md §3 step 7). filter.c says what is in it and why. */
#ifndef BK_FILTER_H
#define BK_FILTER_H

#include <linux/filter.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef struct bk_seccomp {
	struct sock_fprog allowlist; /* which system calls exist (default ENOSYS) */
	struct sock_fprog arguments; /* refusals by argument (default allow) */
	uint32_t id; /* FNV-1a of both programs: names the filter in the isolation profile */
} bk_seccomp;

int bk_seccomp_compile(bk_seccomp *out, bk_error **err);
/* The file worker's filter (fileworker.c): one program, an allowlist of what file operations
 * need. Free prog->filter. */
int bk_seccomp_compile_files(struct sock_fprog *prog, bk_error **err);
void bk_seccomp_free(bk_seccomp *f); /* accepts a zeroed or half-built filter */

/* The filters in words (markdown), from the same tables they are built from: SECURITY.md's list. */
void bk_seccomp_describe(FILE *out);

#endif
