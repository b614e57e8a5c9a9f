#include "fullio.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

ssize_t bk_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int bk_read_all(int fd, size_t max, uint8_t **out, size_t *len)
{
	size_t cap = 0;
	uint8_t *buf = NULL;

	*len = 0;
	for (;;) {
		ssize_t n;

		if (*len == cap) {
			uint8_t *nb;
			if (cap > max) {
				free(buf);
				return -EFBIG;
			}
			cap = cap ? 2 * cap : 65536;
			if (cap > max + 1)
				cap = max + 1; /* one byte past max tells a too-long input */
			if (!(nb = realloc(buf, cap))) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	if (*len > max) {
		free(buf);
		return -EFBIG;
	}
	*out = buf;
	return 0;
}

int bk_write_full(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int bk_pwrite_full(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int bk_sha256_fd(int fd, uint64_t size, uint8_t *buf, size_t buf_len, uint8_t out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint64_t off = 0;
	int ret = -ENOMEM;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		goto out;
	while (off < size) {
		ssize_t n = bk_pread_full(fd, buf, size - off < buf_len ? (size_t)(size - off) : buf_len, off);
		if (n <= 0) {
			ret = n < 0 ? (int)n : -ENODATA;
			goto out;
		}
		if (!EVP_DigestUpdate(md, buf, (size_t)n))
			goto out;
		off += (uint64_t)n;
	}
	ret = EVP_DigestFinal_ex(md, out, NULL) ? 0 : -ENOMEM;
out:
	EVP_MD_CTX_free(md);
	return ret;
}
