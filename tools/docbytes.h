/* How the documents the tools print write a number of bytes: "16 KiB", "4 MiB + 64 KiB",
 * "1 000 bytes" — one way for bk-limits-doc and bk-bounds-doc alike. */
#ifndef BK_DOCBYTES_H
#define BK_DOCBYTES_H

#include <inttypes.h>
#include <stdio.h>

/* n bytes as the document writes them: "16 KiB", "4 MiB + 64 KiB", "1 000 bytes". */
static inline const char *bytes(uint64_t n, char *out, size_t size)
{
	uint64_t mib = n >> 20, kib = (n >> 10) & 1023;

	if (n == 0)
		snprintf(out, size, "—");
	else if (n % 1024)
		snprintf(out, size, "%" PRIu64 " bytes", n);
	else if (n >= (1ull << 30) && n % (1ull << 30) == 0)
		snprintf(out, size, "%" PRIu64 " GiB", n >> 30);
	else if (mib && kib)
		snprintf(out, size, "%" PRIu64 " MiB + %" PRIu64 " KiB", mib, kib);
	else if (mib)
		snprintf(out, size, "%" PRIu64 " MiB", mib);
	else
		snprintf(out, size, "%" PRIu64 " KiB", kib);
	return out;
}

#endif
