/* bk-egress-filter-doc: print the egress proxy's seccomp filter in words, from the tables it is
 * built from (egress/confine.c). `make docs` puts the output into SECURITY.md; `make test` fails
 * when SECURITY.md says something else. */
#include "confine.h"

int main(void)
{
	bk_egress_filter_describe(stdout);
	return 0;
}
