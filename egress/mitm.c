#include "mitm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cleanup.h"

/* A leaf lives 60 days and is made again after 30: a proxy that runs for months keeps serving
 * certificates that strict clients accept. The CA lives as long as the process. */
#define LEAF_DAYS 60
#define LEAF_RENEW_S (30L * 86400)
#define CA_DAYS 3650
#define TRUST_FILE_MAX (16u << 20)

static const unsigned char alpn_http11[] = "\x08http/1.1";

struct leaf {
	bk_egress_host host;
	SSL_CTX *ctx;          /* presents this host's certificate */
	time_t made;
};

struct bk_mitm {
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca;
	SSL_CTX *client;
	char *trust_pem;       /* the system's roots, as read */
	size_t trust_len;
	pthread_mutex_t lock;  /* leaves[].ctx and .made */
	size_t n;
	struct leaf leaves[];
};

BK_DEFINE_PTR_CLEANUP(x509_freep, X509, X509_free)
BK_DEFINE_PTR_CLEANUP(bn_freep, BIGNUM, BN_free)
BK_DEFINE_PTR_CLEANUP(ssl_ctx_freep, SSL_CTX, SSL_CTX_free)

static int ssl_error(bk_error **err, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return bk_error_set(err, BK_INTERNAL, EIO, "%s: %s", what, e ? buf : "failed");
}

static bool host_equal(const bk_egress_host *a, const bk_egress_host *b)
{
	return a->is_addr == b->is_addr &&
	       (a->is_addr ? memcmp(a->addr, b->addr, 16) == 0 : strcmp(a->name, b->name) == 0);
}

/* "DNS:name" or "IP:addr" (with a mask for a name constraint). */
static void general_name(const bk_egress_host *h, bool with_mask, char *out, size_t size)
{
	char a[BK_EGRESS_ADDR_TEXT_MAX];

	if (!h->is_addr) {
		snprintf(out, size, "DNS:%s", h->name);
		return;
	}
	bk_egress_addr_format(h->addr, 0, a, sizeof(a));
	if (!with_mask)
		snprintf(out, size, "IP:%s", a);
	else if (bk_egress_addr_is_v4(h->addr))
		snprintf(out, size, "IP:%s/255.255.255.255", a);
	else
		snprintf(out, size, "IP:%s/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", a);
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value, bk_error **err)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return ssl_error(err, "certificate extension");
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : ssl_error(err, "certificate extension");
}

/* A certificate for subject's key with a random serial, valid from an hour ago for `days`. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, long days, bk_error **err)
{
	_cleanup_(x509_freep) X509 *x = X509_new();
	_cleanup_(bn_freep) BIGNUM *serial = BN_new();
	X509_NAME *name;

	if (!x || !serial || !X509_set_version(x, 2) || !BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
	    !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) || !X509_set_pubkey(x, key)) {
		ssl_error(err, "a certificate");
		return NULL;
	}
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"boxkite", -1, -1, 0) ||
	    (cn && !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0))) {
		ssl_error(err, "a certificate's name");
		return NULL;
	}
	return TAKE_PTR(x);
}

static int make_ca(bk_mitm *m, bk_error **err)
{
	char constraints[8192] = "critical";
	size_t used = strlen(constraints);
	int ret;

	m->ca_key = EVP_EC_gen("P-256");
	m->leaf_key = EVP_EC_gen("P-256");
	if (!m->ca_key || !m->leaf_key)
		return ssl_error(err, "the CA's key");
	m->ca = cert_new(m->ca_key, "boxkite egress CA", CA_DAYS, err);
	if (!m->ca)
		return -EIO;
	/* Permitted: the credentialed destinations, nothing else. */
	for (size_t i = 0; i < m->n; i++) {
		char gn[BK_EGRESS_NAME_MAX + 96];
		general_name(&m->leaves[i].host, true, gn, sizeof(gn));
		int w = snprintf(constraints + used, sizeof(constraints) - used, ",permitted;%s", gn);
		if (w < 0 || (size_t)w >= sizeof(constraints) - used)
			return bk_error_set(err, BK_INVALID_ARGUMENT, E2BIG, "too many credentialed destinations");
		used += (size_t)w;
	}
	if (!X509_set_issuer_name(m->ca, X509_get_subject_name(m->ca)))
		return ssl_error(err, "the CA's issuer");
	if ((ret = add_ext(m->ca, m->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0", err)) < 0 ||
	    (ret = add_ext(m->ca, m->ca, NID_key_usage, "critical,keyCertSign,cRLSign", err)) < 0 ||
	    (ret = add_ext(m->ca, m->ca, NID_subject_key_identifier, "hash", err)) < 0 ||
	    (ret = add_ext(m->ca, m->ca, NID_name_constraints, constraints, err)) < 0)
		return ret;
	if (!X509_sign(m->ca, m->ca_key, EVP_sha256()))
		return ssl_error(err, "signing the CA");
	return 0;
}

/* ALPN on the command's side: http/1.1 when offered, else none (HTTP/1.1 all the same). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, alpn_http11, sizeof(alpn_http11) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

/* A server context presenting a fresh leaf for host. */
static SSL_CTX *leaf_ctx(bk_mitm *m, const bk_egress_host *host, bk_error **err)
{
	_cleanup_(ssl_ctx_freep) SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	_cleanup_(x509_freep) X509 *leaf = NULL;
	char san[BK_EGRESS_NAME_MAX + 16];

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		ssl_error(err, "a TLS server context");
		return NULL;
	}
	/* CN holds at most 64 bytes; the name is in the SAN, which is what clients check. */
	leaf = cert_new(m->leaf_key, !host->is_addr && strlen(host->name) <= 64 ? host->name : NULL, LEAF_DAYS, err);
	if (!leaf)
		return NULL;
	general_name(host, false, san, sizeof(san));
	if (!X509_set_issuer_name(leaf, X509_get_subject_name(m->ca)) ||
	    add_ext(leaf, m->ca, NID_basic_constraints, "critical,CA:FALSE", err) < 0 ||
	    add_ext(leaf, m->ca, NID_key_usage, "critical,digitalSignature", err) < 0 ||
	    add_ext(leaf, m->ca, NID_ext_key_usage, "serverAuth", err) < 0 ||
	    add_ext(leaf, m->ca, NID_authority_key_identifier, "keyid:always", err) < 0 ||
	    add_ext(leaf, m->ca, NID_subject_alt_name, san, err) < 0)
		return NULL;
	if (!X509_sign(leaf, m->ca_key, EVP_sha256()) || !SSL_CTX_use_certificate(ctx, leaf) ||
	    !SSL_CTX_use_PrivateKey(ctx, m->leaf_key) || !SSL_CTX_add1_chain_cert(ctx, m->ca)) {
		ssl_error(err, "the leaf certificate");
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	return TAKE_PTR(ctx);
}

static int load_trust(bk_mitm *m, bk_error **err)
{
	const char *path = X509_get_default_cert_file();
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return bk_error_errno(err, errno, "the system's trust store %s", path);
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (size_t)st.st_size > TRUST_FILE_MAX)
		return bk_error_set(err, BK_FAILED_PRECONDITION, EINVAL, "the system's trust store %s is not a file of 1 B-16 MiB",
				    path);
	m->trust_pem = malloc((size_t)st.st_size);
	if (!m->trust_pem)
		return bk_error_errno(err, ENOMEM, "the system's trust store");
	while (m->trust_len < (size_t)st.st_size) {
		ssize_t r = read(fd, m->trust_pem + m->trust_len, (size_t)st.st_size - m->trust_len);
		if (r <= 0)
			return bk_error_errno(err, r ? errno : EIO, "reading %s", path);
		m->trust_len += (size_t)r;
	}
	m->client = SSL_CTX_new(TLS_client_method());
	if (!m->client || !SSL_CTX_set_min_proto_version(m->client, TLS1_2_VERSION) ||
	    !SSL_CTX_load_verify_file(m->client, path))
		return ssl_error(err, "the client's TLS context and trust store");
	SSL_CTX_set_verify(m->client, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(m->client, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	if (SSL_CTX_set_alpn_protos(m->client, alpn_http11, sizeof(alpn_http11) - 1) != 0)
		return ssl_error(err, "ALPN");
	return 0;
}

int bk_mitm_new(bk_mitm **out, const bk_egress_host *hosts, size_t n, bk_error **err)
{
	bk_mitm *m = calloc(1, sizeof(*m) + n * sizeof(struct leaf));
	int ret;

	*out = NULL;
	if (!m)
		return bk_error_errno(err, ENOMEM, "the egress CA");
	pthread_mutex_init(&m->lock, NULL);
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < m->n && !seen; j++)
			seen = host_equal(&m->leaves[j].host, &hosts[i]);
		if (!seen)
			m->leaves[m->n++].host = hosts[i];
	}
	if ((ret = load_trust(m, err)) < 0 || (ret = make_ca(m, err)) < 0) {
		bk_mitm_free(m);
		return ret;
	}
	*out = m;
	return 0;
}

void bk_mitm_free(bk_mitm *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		SSL_CTX_free(m->leaves[i].ctx);
	SSL_CTX_free(m->client);
	X509_free(m->ca);
	EVP_PKEY_free(m->ca_key);
	EVP_PKEY_free(m->leaf_key);
	free(m->trust_pem);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

int bk_mitm_bundle(const bk_mitm *m, char **pem, size_t *len, bk_error **err)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *ca = NULL, *out;
	long ca_len;

	if (!bio || !PEM_write_bio_X509(bio, m->ca)) {
		BIO_free(bio);
		return ssl_error(err, "the CA's PEM");
	}
	ca_len = BIO_get_mem_data(bio, &ca);
	out = malloc(m->trust_len + 1 + (size_t)ca_len);
	if (!out) {
		BIO_free(bio);
		return bk_error_errno(err, ENOMEM, "the CA bundle");
	}
	memcpy(out, m->trust_pem, m->trust_len);
	*len = m->trust_len;
	if (*len && out[*len - 1] != '\n')
		out[(*len)++] = '\n';
	memcpy(out + *len, ca, (size_t)ca_len);
	*len += (size_t)ca_len;
	*pem = out;
	BIO_free(bio);
	return 0;
}

SSL *bk_mitm_accepting(bk_mitm *m, const bk_egress_host *host, int fd)
{
	struct leaf *l = NULL;
	SSL *ssl = NULL;

	for (size_t i = 0; i < m->n && !l; i++)
		if (host_equal(&m->leaves[i].host, host))
			l = &m->leaves[i];
	if (!l)
		return NULL;
	pthread_mutex_lock(&m->lock);
	if (!l->ctx || time(NULL) - l->made > LEAF_RENEW_S) {
		bk_error *err = NULL;
		SSL_CTX *ctx = leaf_ctx(m, host, &err);
		bk_error_free(err);
		if (ctx) {
			SSL_CTX_free(l->ctx);
			l->ctx = ctx;
			l->made = time(NULL);
		}
	}
	if (l->ctx)
		ssl = SSL_new(l->ctx);
	pthread_mutex_unlock(&m->lock);
	if (ssl && !SSL_set_fd(ssl, fd)) {
		SSL_free(ssl);
		return NULL;
	}
	if (ssl)
		SSL_set_accept_state(ssl);
	return ssl;
}

SSL *bk_mitm_connecting(bk_mitm *m, const bk_egress_host *host, int fd)
{
	SSL *ssl = SSL_new(m->client);
	int ok;

	if (!ssl)
		return NULL;
	if (host->is_addr) {
		bool v4 = bk_egress_addr_is_v4(host->addr);
		ok = X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), v4 ? host->addr + 12 : host->addr, v4 ? 4 : 16);
	} else {
		ok = SSL_set_tlsext_host_name(ssl, host->name) && SSL_set1_host(ssl, host->name);
	}
	if (!ok || !SSL_set_fd(ssl, fd)) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	return ssl;
}
