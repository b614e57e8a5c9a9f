#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cleanup.h"
#include "fullio.h"
#include "secretfile.h"

bool bk_tls_url(const char *url)
{
	return strncmp(url, "tls+tcp://", 10) == 0;
}

bool bk_url_private(const char *url)
{
	return strncmp(url, "ipc://", 6) == 0 || strncmp(url, "inproc://", 9) == 0 || bk_tls_url(url);
}

/* A PEM file, NUL-terminated (what nng's TLS wants), malloc'd; a private key's (`secret` names
 * it) only if nobody but its owner may access it, like the key file. */
static int read_pem(const char *path, const char *secret, char **out, bk_error **err)
{
	_cleanup_close_ int fd = secret ? bk_secret_file_open(secret, path, err)
					: open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	uint8_t *data = NULL;
	size_t len = 0;
	int ret;

	if (fd < 0)
		return secret ? fd : bk_error_errno(err, errno, "cannot open %s", path);
	ret = bk_read_all(fd, BK_TLS_PEM_MAX, &data, &len);
	if (ret < 0)
		return bk_error_errno(err, -ret, "cannot read %s", path);
	*out = realloc(data, len + 1);
	if (!*out) {
		free(data);
		return bk_error_errno(err, ENOMEM, "%s", path);
	}
	(*out)[len] = '\0';
	return 0;
}

static int nng_failed(bk_error **err, int rv, const char *what, const char *path)
{
	return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s %s: %s", what, path, nng_strerror(rv));
}

int bk_tls_server_config(const char *cert_path, const char *key_path, nng_tls_config **out, bk_error **err)
{
	_cleanup_free_ char *cert = NULL;
	char *key = NULL;
	nng_tls_config *cfg = NULL;
	int ret, rv;

	if ((ret = read_pem(cert_path, NULL, &cert, err)) < 0 || (ret = read_pem(key_path, "--tls-key", &key, err)) < 0)
		return ret;
	rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_SERVER);
	if (rv == 0)
		rv = nng_tls_config_own_cert(cfg, cert, key, NULL);
	OPENSSL_cleanse(key, strlen(key));
	free(key);
	if (rv) {
		if (cfg)
			nng_tls_config_free(cfg);
		return nng_failed(err, rv, "TLS certificate and key", cert_path);
	}
	*out = cfg;
	return 0;
}

/* The certificate's subject CN: the name the client checks (bkctl kube sets it to the pod's). */
static int cert_common_name(const char *pem, char *cn, size_t size)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	int n = x ? X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, (int)size) : -1;

	X509_free(x);
	BIO_free(bio);
	return n > 0 ? 0 : -1;
}

int bk_tls_client_config(const char *cert_path, nng_tls_config **out, bk_error **err)
{
	_cleanup_free_ char *cert = NULL;
	nng_tls_config *cfg = NULL;
	char cn[256];
	int ret, rv;

	if ((ret = read_pem(cert_path, NULL, &cert, err)) < 0)
		return ret;
	if (cert_common_name(cert, cn, sizeof(cn)) < 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s: not a PEM certificate with a CN", cert_path);
	if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT)) ||
	    (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) ||
	    (rv = nng_tls_config_ca_chain(cfg, cert, NULL)) || (rv = nng_tls_config_server_name(cfg, cn))) {
		if (cfg)
			nng_tls_config_free(cfg);
		return nng_failed(err, rv, "TLS certificate", cert_path);
	}
	*out = cfg;
	return 0;
}

int bk_tls_listen(nng_socket sock, const char *url, nng_tls_config *tls, nng_listener *out)
{
	nng_listener l;
	int rv;

	if (!bk_tls_url(url))
		return nng_listen(sock, url, out, 0);
	if (!tls)
		return NNG_EINVAL;
	if ((rv = nng_listener_create(&l, sock, url)) == 0 &&
	    ((rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, tls)) || (rv = nng_listener_start(l, 0))))
		nng_listener_close(l);
	if (rv == 0)
		*out = l;
	return rv;
}

int bk_tls_dial(nng_socket sock, const char *url, nng_tls_config *tls)
{
	nng_dialer d;
	int rv;

	if (!bk_tls_url(url))
		return nng_dial(sock, url, NULL, 0);
	if (!tls)
		return NNG_EINVAL;
	if ((rv = nng_dialer_create(&d, sock, url)) == 0 &&
	    ((rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tls)) || (rv = nng_dialer_start(d, 0))))
		nng_dialer_close(d);
	return rv;
}
