/* Writing JSON for bkctl's `-o json`: just what the commands print, correctly escaped. */
#ifndef BK_JSON_H
#define BK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct bk_json {
	FILE *out;
	int depth;
	bool need_comma[16];
} bk_json;

void bk_json_begin_object(bk_json *j, const char *key);
void bk_json_end_object(bk_json *j);
void bk_json_begin_array(bk_json *j, const char *key);
void bk_json_end_array(bk_json *j);
void bk_json_string(bk_json *j, const char *key, const char *value);
/* A byte string as JSON text: valid UTF-8 kept, each byte that is not part of it written as the
 * lone surrogate \udcXX (XX the byte: Python's surrogateescape), which no UTF-8 text produces. */
void bk_json_bytes(bk_json *j, const char *key, const uint8_t *data, size_t len);
void bk_json_int(bk_json *j, const char *key, long long value);
void bk_json_uint(bk_json *j, const char *key, unsigned long long value);
void bk_json_bool(bk_json *j, const char *key, bool value);

#endif
