/* The front gives up its privileges in two steps, around making its listeners (privdrop.c). */
#ifndef BK_PRIVDROP_H
#define BK_PRIVDROP_H

#include <sys/types.h>

#include "error.h"

/* Before any thread exists (capability sets are per thread, and threads inherit them): keep
 * only what making the listeners and the switch to another user need. */
int bk_privileges_narrow(bk_error **err);

/* Once the listeners exist: every thread becomes uid and gid `id`, with no capability. */
int bk_privileges_drop_to(uid_t id, bk_error **err);

#endif
