/* What the egress proxy does to itself before it reads a byte from its channel: it checks that it
 * holds no privilege (started by the executor as an unprivileged user of its own, no capability
 * in any set, no_new_privs), makes itself not dumpable, and loads its own seccomp filter — the
 * sockets, files, memory and threads it needs; no process, no exec, no listening socket, no
 * unix or raw socket, no file opened for writing. SECURITY.md lists the filter from the tables in
 * confine.c (`make docs`). */
#ifndef BK_EGRESS_CONFINE_H
#define BK_EGRESS_CONFINE_H

#include <stdio.h>

#include "error.h"

/* 0, or -errno with *err: the proxy does not run unconfined. */
int bk_egress_confine(bk_error **err);

/* The filter in words (markdown), from the tables it is built from. */
void bk_egress_filter_describe(FILE *out);

#endif
