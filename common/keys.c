#include "keys.h"

#include "fullio.h"
#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

/* A key file larger than this is refused: it cannot be a list of keys. */
#define KEYFILE_MAX_BYTES (64 * 1024)

bool bk_key_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > BK_KEY_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

int bk_key_init(bk_key *key, const char *id, const uint8_t *secret, size_t len, bk_error **err)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC *hmac;

	memset(key, 0, sizeof(*key));
	if (!bk_key_id_valid(id))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "key id '%.80s' is not 1..%d of [A-Za-z0-9._-]",
				    id, BK_KEY_ID_MAX);
	if (len < BK_KEY_MIN || len > BK_KEY_MAX)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "key '%s' is %zu bytes; a key must be %d..%d bytes", id, len, BK_KEY_MIN,
				    BK_KEY_MAX);
	strcpy(key->id, id);
	memcpy(key->secret, secret, len);
	key->len = len;

	hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (hmac)
		key->mac = EVP_MAC_CTX_new(hmac);
	EVP_MAC_free(hmac);
	if (!key->mac || !EVP_MAC_init(key->mac, key->secret, key->len, params)) {
		bk_key_clear(key);
		return bk_error_set(err, BK_INTERNAL, EIO, "cannot set up HMAC-SHA256 in libcrypto");
	}
	return 0;
}

void bk_key_clear(bk_key *key)
{
	EVP_MAC_CTX_free(key->mac);
	OPENSSL_cleanse(key, sizeof(*key));
}

void bk_keyring_free(bk_keyring *ring)
{
	if (!ring)
		return;
	for (size_t i = 0; i < ring->n; i++)
		bk_key_clear(&ring->keys[i]);
	free(ring);
}

/* Parse one non-comment line "<id> <hex>" into key. */
static int keyline_parse(const char *line, size_t len, const char *origin, unsigned lineno, bk_key *key,
			 bk_error **err)
{
	char id[BK_KEY_ID_MAX + 2];
	uint8_t secret[BK_KEY_MAX];
	size_t i = 0, idlen = 0, nhex = 0;
	int ret;

	while (i < len && line[i] != ' ' && line[i] != '\t') {
		if (idlen <= BK_KEY_ID_MAX)
			id[idlen++] = line[i];
		i++;
	}
	id[idlen] = '\0';
	if (idlen > BK_KEY_ID_MAX || !bk_key_id_valid(id))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "%s line %u: key id is not 1..%d of [A-Za-z0-9._-]", origin, lineno, BK_KEY_ID_MAX);
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	for (; i < len && line[i] != ' ' && line[i] != '\t'; i++, nhex++) {
		int v = OPENSSL_hexchar2int((unsigned char)line[i]);
		if (v < 0)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "%s line %u: key '%s' has a non-hex character", origin, lineno, id);
		if (nhex / 2 < BK_KEY_MAX)
			secret[nhex / 2] = (uint8_t)(nhex % 2 ? (secret[nhex / 2] | v) : v << 4);
	}
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i != len)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "%s line %u: unexpected text after the key of '%s'", origin, lineno, id);
	if (nhex % 2 || nhex / 2 < BK_KEY_MIN || nhex / 2 > BK_KEY_MAX)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "%s line %u: key '%s' has %zu hex digits; a key is %d..%d hex digits (%d..%d bytes)",
				    origin, lineno, id, nhex, 2 * BK_KEY_MIN, 2 * BK_KEY_MAX, BK_KEY_MIN, BK_KEY_MAX);
	ret = bk_key_init(key, id, secret, nhex / 2, err);
	OPENSSL_cleanse(secret, sizeof(secret));
	if (ret < 0)
		return bk_error_prefix(err, ret, "%s line %u", origin, lineno);
	return 0;
}

int bk_keyring_parse(const char *text, size_t len, const char *origin, bk_keyring **out, bk_error **err)
{
	_cleanup_(bk_keyring_freep) bk_keyring *ring = NULL;
	const bk_key *added;
	size_t nlines = 1, pos = 0;
	unsigned lineno = 0;
	int ret;

	for (size_t i = 0; i < len; i++)
		nlines += text[i] == '\n';
	ring = calloc(1, sizeof(*ring) + nlines * sizeof(bk_key));
	if (!ring)
		return bk_error_errno(err, ENOMEM, "%s", origin);

	while (pos < len) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t llen = nl ? (size_t)(nl - line) : len - pos;

		pos += llen + (nl != NULL);
		lineno++;
		if (llen && line[llen - 1] == '\r')
			llen--;
		while (llen && (*line == ' ' || *line == '\t'))
			line++, llen--;
		if (llen == 0 || line[0] == '#')
			continue;
		if (memchr(line, '\0', llen))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s line %u: NUL byte", origin, lineno);

		ret = keyline_parse(line, llen, origin, lineno, &ring->keys[ring->n], err);
		if (ret < 0)
			return ret;
		/* Counted before the duplicate check, so that a refusal still frees and clears it. */
		added = &ring->keys[ring->n++];
		if (bk_keyring_find(ring, added->id) != added)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s line %u: duplicate key id '%s'",
					    origin, lineno, added->id);
	}
	if (ring->n == 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s: no keys", origin);
	*out = TAKE_PTR(ring);
	return 0;
}

int bk_keyring_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	return fd < 0 ? -errno : fd;
}

int bk_keyring_load(const char *path, bk_keyring **out, bk_error **err)
{
	_cleanup_close_ int fd = bk_keyring_open(path);

	if (fd < 0)
		return bk_error_errno(err, -fd, "cannot open key file %s", path);
	return bk_keyring_load_fd(fd, path, out, err);
}

int bk_keyring_load_fd(int fd, const char *path, bk_keyring **out, bk_error **err)
{
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t have;
	ssize_t n;
	int ret;

	if ((ret = bk_secret_file_check(fd, "key file", path, err)) < 0)
		return ret;
	if (fstat(fd, &st) < 0)
		return bk_error_errno(err, errno, "cannot stat key file %s", path);
	if (st.st_size > KEYFILE_MAX_BYTES)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EFBIG, "key file %s is larger than %d bytes", path,
				    KEYFILE_MAX_BYTES);
	buf = malloc(KEYFILE_MAX_BYTES + 1);
	if (!buf)
		return bk_error_errno(err, ENOMEM, "key file %s", path);
	/* One byte more than allowed tells a file that grew past the limit since the fstat. */
	n = bk_pread_full(fd, (uint8_t *)buf, KEYFILE_MAX_BYTES + 1, 0);
	if (n < 0)
		return bk_error_errno(err, (int)-n, "cannot read key file %s", path);
	have = (size_t)n;
	if (have > KEYFILE_MAX_BYTES)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EFBIG, "key file %s is larger than %d bytes", path,
				    KEYFILE_MAX_BYTES);
	ret = bk_keyring_parse(buf, have, path, out, err);
	OPENSSL_cleanse(buf, have);
	return ret;
}

const bk_key *bk_keyring_find(const bk_keyring *ring, const char *id)
{
	if (!ring)
		return NULL;
	for (size_t i = 0; i < ring->n; i++)
		if (strcmp(ring->keys[i].id, id) == 0)
			return &ring->keys[i];
	return NULL;
}

int bk_key_text(const char *id, const uint8_t *secret, size_t len, char *text, size_t size, bk_error **err)
{
	static const char hexdigits[] = "0123456789abcdef";
	int n;

	if (!bk_key_id_valid(id))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "key id '%.80s' is not 1..%d of [A-Za-z0-9._-]",
				    id, BK_KEY_ID_MAX);
	if (len < BK_KEY_MIN || len > BK_KEY_MAX)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "a key is %d..%d bytes, not %zu", BK_KEY_MIN,
				    BK_KEY_MAX, len);
	if (size < BK_KEY_TEXT_MAX)
		return bk_error_set(err, BK_INTERNAL, ENOBUFS, "key text buffer too small");
	n = snprintf(text, size, "# boxkite key file: <key-id> <hex secret>; keep it mode 0600\n%s ", id);
	for (size_t i = 0; i < len; i++) {
		text[n++] = hexdigits[secret[i] >> 4];
		text[n++] = hexdigits[secret[i] & 15];
	}
	text[n++] = '\n';
	text[n] = '\0';
	return n;
}

int bk_key_text_new(const char *id, char *text, size_t size, bk_error **err)
{
	uint8_t secret[32];
	int len;

	if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret))
		return bk_error_errno(err, errno ? errno : EIO, "cannot get random bytes");
	len = bk_key_text(id, secret, sizeof(secret), text, size, err);
	OPENSSL_cleanse(secret, sizeof(secret));
	return len;
}

int bk_keyfile_create(const char *path, const char *id, bk_error **err)
{
	char line[BK_KEY_TEXT_MAX];
	_cleanup_close_ int fd = -1;
	int len, n;

	if ((len = bk_key_text_new(id, line, sizeof(line), err)) < 0)
		return len;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		OPENSSL_cleanse(line, sizeof(line));
		return bk_error_errno(err, errno, "cannot create key file %s", path);
	}
	/* The umask may have narrowed the mode further, never widened it; make it exactly 0600. */
	if (fchmod(fd, 0600) < 0)
		goto fail;
	if ((n = bk_write_full(fd, (const uint8_t *)line, (size_t)len)) < 0) {
		errno = -n;
		goto fail;
	}
	if (fsync(fd) < 0)
		goto fail;
	OPENSSL_cleanse(line, sizeof(line));
	return 0;
fail:;
	int saved = errno;
	OPENSSL_cleanse(line, sizeof(line));
	unlink(path);
	return bk_error_errno(err, saved, "cannot write key file %s", path);
}

int bk_key_store_prefix(const bk_key *key, char out[BK_STORE_PREFIX_LEN + 1])
{
	static const char domain[] = "boxkite-store-prefix-v1"; /* its NUL included below */
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(key->mac);
	uint8_t mac[32];
	size_t maclen = 0;
	int ok = ctx && EVP_MAC_update(ctx, (const uint8_t *)domain, sizeof(domain)) &&
		 EVP_MAC_update(ctx, (const uint8_t *)key->id, strlen(key->id)) &&
		 EVP_MAC_final(ctx, mac, &maclen, sizeof(mac)) && maclen == sizeof(mac);

	EVP_MAC_CTX_free(ctx);
	if (!ok)
		return -EIO;
	memcpy(out, "t-", 2);
	for (size_t i = 0; i < (BK_STORE_PREFIX_LEN - 2) / 2; i++)
		snprintf(out + 2 + 2 * i, 3, "%02x", mac[i]);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}
