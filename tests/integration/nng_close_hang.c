/* A fixture of test_hostile.py (LD_PRELOAD): nng_close() that never returns, as libnng 1.5.2's
 * does when a pipe's close races a receive (common/nngclose.h). The programs must exit anyway. */
#include <unistd.h>

#include <nng/nng.h>

int nng_close(nng_socket s)
{
	(void)s;
	for (;;)
		pause();
}
