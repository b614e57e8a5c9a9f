#ifndef BK_PRIVDROP_H
#define BK_PRIVDROP_H

#include "error.h"

/* Drop every capability of the calling process for good (see privdrop.c). Single-threaded
 * callers only: capability sets are per thread. */
int bk_drop_all_privileges(bk_error **err);

#endif
