/* Unit tests of common/keys.c: key files are parsed strictly, refused with a message that names
 * the file and the line, and created private. Each test works in its own temporary directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "keys.h"
#include "support.h"

struct keydir {
	char dir[64];
	char path[128]; /* the file under test: dir/keys */
};

static int setup(void **state)
{
	struct keydir *kd = calloc(1, sizeof(*kd));

	if (!kd)
		return -1;
	strcpy(kd->dir, "/tmp/bk-unit-keys.XXXXXX");
	if (!mkdtemp(kd->dir)) {
		free(kd);
		return -1;
	}
	snprintf(kd->path, sizeof(kd->path), "%s/keys", kd->dir);
	*state = kd;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct keydir *kd = *state;
	int ret = nftw(kd->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);

	free(kd);
	return ret;
}

/* Hex of the bytes first, first+1, ... (n of them) into out (2n+1 bytes), upper or lower case. */
static char *pattern_hex(uint8_t first, size_t n, bool upper, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, upper ? "%02X" : "%02x", (uint8_t)(first + i));
	return out;
}

static void write_file(const char *path, const char *text, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

static void write_keys(const struct keydir *kd, const char *text)
{
	write_file(kd->path, text, strlen(text), 0600);
}

static void assert_secret(const bk_key *key, uint8_t first, size_t len)
{
	assert_non_null(key);
	assert_int_equal(key->len, len);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(key->secret[i], (uint8_t)(first + i));
	assert_non_null(key->mac);
}

/* Load path, which must fail; returns the error for the caller to inspect and free. */
static bk_error *load_fails(const char *path)
{
	bk_keyring *ring = NULL;
	bk_error *err = NULL;

	assert_true(bk_keyring_load(path, &ring, &err) < 0);
	assert_null(ring);
	assert_non_null(err);
	return err;
}

/* Load kd->path, expect a refusal whose message contains the formatted text. */
static void assert_refused(const struct keydir *kd, const char *fmt, ...) BK_PRINTF(2, 3);
static void assert_refused(const struct keydir *kd, const char *fmt, ...)
{
	char want[512];
	bk_error *err = load_fails(kd->path);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	unit_assert_error_has(err, want);
	bk_error_free(err);
}

static void loads_two_keys(void **state)
{
	struct keydir *kd = *state;
	char a[65], b[129], text[512];
	bk_keyring *ring = NULL;
	bk_error *err = NULL;

	snprintf(text, sizeof(text), "alpha %s\nbeta %s\n", pattern_hex(0x00, 32, false, a),
		 pattern_hex(0x80, 64, true, b));
	write_keys(kd, text);
	assert_int_equal(bk_keyring_load(kd->path, &ring, &err), 0);
	assert_null(err);
	assert_int_equal(ring->n, 2);
	assert_string_equal(ring->keys[0].id, "alpha");
	assert_string_equal(ring->keys[1].id, "beta");
	assert_secret(bk_keyring_find(ring, "alpha"), 0x00, 32);
	assert_secret(bk_keyring_find(ring, "beta"), 0x80, 64);
	assert_null(bk_keyring_find(ring, "gamma"));
	assert_null(bk_keyring_find(ring, "alph"));
	bk_keyring_free(ring);
}

static void comments_blank_lines_and_crlf(void **state)
{
	struct keydir *kd = *state;
	char a[65], b[65], text[512];
	bk_keyring *ring = NULL;
	bk_error *err = NULL;

	snprintf(text, sizeof(text),
		 "# boxkite keys\r\n"
		 "\r\n"
		 "   # an indented comment\r\n"
		 " \t \r\n"
		 "\tk.1_a-B\t %s \t\r\n"
		 "\n"
		 "k2 %s", /* no newline at the end */
		 pattern_hex(0x10, 32, false, a), pattern_hex(0x30, 32, true, b));
	write_keys(kd, text);
	assert_int_equal(bk_keyring_load(kd->path, &ring, &err), 0);
	assert_int_equal(ring->n, 2);
	assert_secret(bk_keyring_find(ring, "k.1_a-B"), 0x10, 32);
	assert_secret(bk_keyring_find(ring, "k2"), 0x30, 32);
	bk_keyring_free(ring);
}

static void refuses_group_or_other_access(void **state)
{
	static const mode_t refused[] = { 0644, 0640, 0604, 0660, 0606, 0610 };
	struct keydir *kd = *state;
	char a[65], text[128];
	bk_keyring *ring = NULL;
	bk_error *err;

	snprintf(text, sizeof(text), "k1 %s\n", pattern_hex(0, 32, false, a));
	for (size_t i = 0; i < BK_ARRAY_SIZE(refused); i++) {
		char want[256];

		write_file(kd->path, text, strlen(text), refused[i]);
		err = load_fails(kd->path);
		snprintf(want, sizeof(want), "key file %s has mode %04o: group or others may access it",
			 kd->path, (unsigned)refused[i]);
		unit_assert_error_has(err, want);
		assert_int_equal(err->status, BK_PERMISSION_DENIED);
		bk_error_free(err);
	}
	/* Owner-only modes are fine. */
	write_file(kd->path, text, strlen(text), 0400);
	assert_int_equal(bk_keyring_load(kd->path, &ring, NULL), 0);
	bk_keyring_free(ring);
}

static void refuses_what_is_not_a_regular_file(void **state)
{
	struct keydir *kd = *state;
	bk_error *err;

	assert_int_equal(mkdir(kd->path, 0700), 0);
	assert_refused(kd, "key file %s is not a regular file", kd->path);

	err = load_fails("/dev/null");
	unit_assert_error_has(err, "key file /dev/null is not a regular file");
	bk_error_free(err);

	err = load_fails("/nonexistent/boxkite/keys");
	unit_assert_error_has(err, "cannot open key file /nonexistent/boxkite/keys");
	bk_error_free(err);
}

static void refuses_keys_of_the_wrong_length(void **state)
{
	struct keydir *kd = *state;
	char hex[2 * 65 + 1], text[512];

	snprintf(text, sizeof(text), "# short\nk1 %s\n", pattern_hex(0, 31, false, hex));
	write_keys(kd, text);
	assert_refused(kd, "%s line 2: key 'k1' has 62 hex digits; a key is 64..128 hex digits", kd->path);

	snprintf(text, sizeof(text), "\n\nk1 %s\n", pattern_hex(0, 65, false, hex));
	write_keys(kd, text);
	assert_refused(kd, "%s line 3: key 'k1' has 130 hex digits", kd->path);

	/* 32 bytes and an odd half-byte */
	snprintf(text, sizeof(text), "k1 %sa\n", pattern_hex(0, 32, false, hex));
	write_keys(kd, text);
	assert_refused(kd, "%s line 1: key 'k1' has 65 hex digits", kd->path);

	snprintf(text, sizeof(text), "k1 %.63s\n", pattern_hex(0, 32, false, hex));
	write_keys(kd, text);
	assert_refused(kd, "%s line 1: key 'k1' has 63 hex digits", kd->path);

	write_keys(kd, "k1\n");
	assert_refused(kd, "%s line 1: key 'k1' has 0 hex digits", kd->path);
}

static void refuses_non_hex_characters(void **state)
{
	struct keydir *kd = *state;
	char good[65], hex[65], text[256];

	pattern_hex(0, 32, false, hex);
	hex[17] = 'g';
	snprintf(text, sizeof(text), "k0 %s\nk1 %s\n", pattern_hex(0x40, 32, false, good), hex);
	write_keys(kd, text);
	assert_refused(kd, "%s line 2: key 'k1' has a non-hex character", kd->path);

	pattern_hex(0, 32, false, hex);
	snprintf(text, sizeof(text), "k1 %s trailing\n", hex);
	write_keys(kd, text);
	assert_refused(kd, "%s line 1: unexpected text after the key of 'k1'", kd->path);
}

static void refuses_invalid_key_ids(void **state)
{
	static const char *const bad_ids[] = {
		"a/b", "key:1", "caf\xc3\xa9",
		"x2345678901234567890123456789012345678901234567890123456789012345", /* 65 */
	};
	struct keydir *kd = *state;
	char hex[65], id64[BK_KEY_ID_MAX + 1], text[256];
	bk_keyring *ring = NULL;

	pattern_hex(0, 32, false, hex);
	for (size_t i = 0; i < BK_ARRAY_SIZE(bad_ids); i++) {
		snprintf(text, sizeof(text), "# id %zu\n%s %s\n", i, bad_ids[i], hex);
		write_keys(kd, text);
		assert_refused(kd, "%s line 2: key id is not 1..64 of [A-Za-z0-9._-]", kd->path);
	}
	/* 64 characters is the longest id. */
	snprintf(id64, sizeof(id64), "%.64s", bad_ids[3]);
	snprintf(text, sizeof(text), "%s %s\n", id64, hex);
	write_keys(kd, text);
	assert_int_equal(bk_keyring_load(kd->path, &ring, NULL), 0);
	assert_non_null(bk_keyring_find(ring, id64));
	bk_keyring_free(ring);
}

static void refuses_duplicate_key_ids(void **state)
{
	struct keydir *kd = *state;
	char a[65], b[65], text[256];

	snprintf(text, sizeof(text), "dup %s\nother %s\n\ndup %s\n", pattern_hex(0, 32, false, a),
		 pattern_hex(0x20, 32, false, b), pattern_hex(0x20, 32, false, b));
	write_keys(kd, text);
	assert_refused(kd, "%s line 4: duplicate key id 'dup'", kd->path);
}

static void refuses_a_file_without_keys(void **state)
{
	struct keydir *kd = *state;

	write_keys(kd, "");
	assert_refused(kd, "%s: no keys", kd->path);
	write_keys(kd, "# only a comment\n\n   \n");
	assert_refused(kd, "%s: no keys", kd->path);
}

static void refuses_a_file_over_64_kib(void **state)
{
	enum { MAX = 64 * 1024 };
	struct keydir *kd = *state;
	char *text = malloc(MAX + 1);
	char hex[65];
	bk_keyring *ring = NULL;
	int n;

	assert_non_null(text);
	/* A key, then comment lines up to exactly 64 KiB: accepted. */
	n = snprintf(text, MAX, "k1 %s\n", pattern_hex(0, 32, false, hex));
	memset(text + n, '#', MAX - (size_t)n);
	for (size_t i = (size_t)n + 99; i < MAX; i += 100)
		text[i] = '\n';
	write_file(kd->path, text, MAX, 0600);
	assert_int_equal(bk_keyring_load(kd->path, &ring, NULL), 0);
	assert_int_equal(ring->n, 1);
	bk_keyring_free(ring);

	/* One byte more: refused before it is parsed. */
	text[MAX] = '\n';
	write_file(kd->path, text, MAX + 1, 0600);
	assert_refused(kd, "key file %s is larger than 65536 bytes", kd->path);
	free(text);
}

static void read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void keyfile_create_is_private_and_loads_back(void **state)
{
	struct keydir *kd = *state;
	char other[160];
	mode_t old_umask = umask(0);
	bk_keyring *ring = NULL, *ring2 = NULL;
	bk_error *err = NULL;
	struct stat st;
	int ret;

	ret = bk_keyfile_create(kd->path, "ops-1", &err);
	umask(old_umask);
	assert_int_equal(ret, 0);
	assert_null(err);
	assert_int_equal(stat(kd->path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	assert_int_equal(bk_keyring_load(kd->path, &ring, &err), 0);
	assert_int_equal(ring->n, 1);
	assert_string_equal(ring->keys[0].id, "ops-1");
	assert_int_equal(ring->keys[0].len, 32);

	/* A umask that takes the owner's write bit away does not make it 0400 either. A second key
	 * file gets a different secret. */
	snprintf(other, sizeof(other), "%s/other", kd->dir);
	old_umask = umask(0277);
	ret = bk_keyfile_create(other, "ops-1", NULL);
	umask(old_umask);
	assert_int_equal(ret, 0);
	assert_int_equal(stat(other, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(bk_keyring_load(other, &ring2, NULL), 0);
	assert_memory_not_equal(ring->keys[0].secret, ring2->keys[0].secret, 32);
	bk_keyring_free(ring);
	bk_keyring_free(ring2);
}

static void keyfile_create_never_replaces_a_file(void **state)
{
	struct keydir *kd = *state;
	char before[512], after[512], want[256];
	bk_error *err = NULL;

	assert_int_equal(bk_keyfile_create(kd->path, "first", NULL), 0);
	read_file(kd->path, before, sizeof(before));
	assert_int_equal(bk_keyfile_create(kd->path, "second", &err), -EEXIST);
	snprintf(want, sizeof(want), "cannot create key file %s", kd->path);
	unit_assert_error_has(err, want);
	bk_error_free(err);
	read_file(kd->path, after, sizeof(after));
	assert_string_equal(before, after);
}

static void keyfile_create_rejects_an_invalid_id(void **state)
{
	struct keydir *kd = *state;
	bk_error *err = NULL;

	assert_int_equal(bk_keyfile_create(kd->path, "not valid", &err), -EINVAL);
	unit_assert_error_has(err, "key id 'not valid' is not 1..64 of [A-Za-z0-9._-]");
	bk_error_free(err);
	assert_int_equal(access(kd->path, F_OK), -1);
	assert_int_equal(errno, ENOENT);

	err = NULL;
	assert_int_equal(bk_keyfile_create(kd->path, "", &err), -EINVAL);
	bk_error_free(err);
}

/* The store prefix: pinned by a vector computed independently (Python's hmac: key bytes 1..32,
 * id k1); another id or secret, another prefix. */
static void store_prefix_vector(void **state)
{
	char prefix[BK_STORE_PREFIX_LEN + 1], other[BK_STORE_PREFIX_LEN + 1];
	bk_key key, key2;

	(void)state;
	unit_key(&key, "k1", 1, 32);
	assert_int_equal(bk_key_store_prefix(&key, prefix), 0);
	assert_string_equal(prefix, "t-b01b77dda2ae434a39823b1200b2fe6a");
	unit_key(&key2, "k2", 1, 32);
	assert_int_equal(bk_key_store_prefix(&key2, other), 0);
	assert_string_not_equal(prefix, other);
	bk_key_clear(&key2);
	unit_key(&key2, "k1", 2, 32);
	assert_int_equal(bk_key_store_prefix(&key2, other), 0);
	assert_string_not_equal(prefix, other);
	bk_key_clear(&key2);
	bk_key_clear(&key);
}

#define KEYS_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		KEYS_TEST(loads_two_keys),
		KEYS_TEST(comments_blank_lines_and_crlf),
		KEYS_TEST(refuses_group_or_other_access),
		KEYS_TEST(refuses_what_is_not_a_regular_file),
		KEYS_TEST(refuses_keys_of_the_wrong_length),
		KEYS_TEST(refuses_non_hex_characters),
		KEYS_TEST(refuses_invalid_key_ids),
		KEYS_TEST(refuses_duplicate_key_ids),
		KEYS_TEST(refuses_a_file_without_keys),
		KEYS_TEST(refuses_a_file_over_64_kib),
		KEYS_TEST(keyfile_create_is_private_and_loads_back),
		KEYS_TEST(keyfile_create_never_replaces_a_file),
		KEYS_TEST(keyfile_create_rejects_an_invalid_id),
		cmocka_unit_test(store_prefix_vector),
	};

	return cmocka_run_group_tests_name("keys", tests, NULL, NULL);
}
