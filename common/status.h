/* Status codes for the server and the client: the public set (include/boxkite/status.h) and
 * how an errno maps onto it. */
#ifndef BK_STATUS_H
#define BK_STATUS_H

#include "boxkite/status.h"

/* The status an errno from a file or process operation maps to. */
int bk_status_from_errno(int errnum);

#endif
