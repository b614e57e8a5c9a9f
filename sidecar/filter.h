/* The exec seccomp filter: built with libseccomp once at start-up and exported as BPF, so the
 * exec child makes one seccomp() call just before execve (STYLE.md §4, DESIGN.md §3 step 7). */
#ifndef BK_FILTER_H
#define BK_FILTER_H

#include <linux/filter.h>
#include <stdint.h>

#include "error.h"

typedef struct bk_seccomp {
	struct sock_fprog prog;
	uint32_t id; /* FNV-1a of the program: names the filter in the isolation profile */
} bk_seccomp;

int bk_seccomp_compile(bk_seccomp *out, bk_error **err);
void bk_seccomp_free(bk_seccomp *f);

#endif
