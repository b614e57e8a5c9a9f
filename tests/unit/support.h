/* Test-only helpers shared by the unit tests: keys made from a byte pattern, hex rendering and
 * assertions on bk_error messages. Included after <cmocka.h>. */
#ifndef BK_UNIT_SUPPORT_H
#define BK_UNIT_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "keys.h"

/* A key whose secret is first, first+1, ... (len bytes); fails the test if it cannot be made. */
static inline void unit_key(bk_key *key, const char *id, uint8_t first, size_t len)
{
	uint8_t secret[BK_KEY_MAX];
	bk_error *err = NULL;

	for (size_t i = 0; i < len; i++)
		secret[i] = (uint8_t)(first + i);
	if (bk_key_init(key, id, secret, len, &err) < 0)
		fail_msg("bk_key_init(%s): %s", id, bk_error_msg(err));
}

/* Lowercase hex of data into out (2 * len + 1 bytes). */
static inline char *unit_hex(const uint8_t *data, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++)
		sprintf(out + 2 * i, "%02x", data[i]);
	out[2 * len] = '\0';
	return out;
}

/* Fail unless err is set and its message contains needle. */
static inline void unit_assert_error_has(const bk_error *err, const char *needle)
{
	if (!err)
		fail_msg("expected an error containing \"%s\", got none", needle);
	if (!strstr(bk_error_msg(err), needle))
		fail_msg("error \"%s\" does not contain \"%s\"", bk_error_msg(err), needle);
}

#endif
