/* bk-filter-doc: print the sandbox's seccomp filter in words, from the tables it is built from
 * (sidecar/exec/filter.c). `make docs` puts the output into SECURITY.md; `make test` fails when
 * SECURITY.md says something else. */
#include "exec/filter.h"

int main(void)
{
	bk_seccomp_describe(stdout);
	return 0;
}
