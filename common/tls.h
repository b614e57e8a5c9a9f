/* Transport TLS for tls+tcp:// (nng's TLS, Debian's libnng built with mbedTLS), one certificate
 * per sidecar and clients that pin it: the only trust anchor a client has is that very
 * certificate (self-signed, a CA of itself: bkctl kube makes it), and the name checked is the
 * certificate's own CN, so neither a public CA nor DNS can vouch for anything else. The
 * envelope's HMAC stays on inside TLS. */
#ifndef BK_TLS_H
#define BK_TLS_H

#include <stdbool.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "error.h"

#define BK_TLS_PEM_MAX (64 * 1024)

/* A server configuration from a certificate and its key (PEM files). */
int bk_tls_server_config(const char *cert_path, const char *key_path, nng_tls_config **out, bk_error **err);
/* A client configuration that accepts only the certificate in cert_path (PEM). */
int bk_tls_client_config(const char *cert_path, nng_tls_config **out, bk_error **err);

bool bk_tls_url(const char *url);
/* Whether a URL's transport keeps its bytes off the network in clear: ipc://, inproc:// and
 * tls+tcp://, not tcp://. What a secret in a request's body (a Reset's new key) needs. */
bool bk_url_private(const char *url);

/* nng_listen / nng_dial, with tls (NULL for a plain URL) set on a tls+tcp:// endpoint. An nng
 * error number. The listener started is in *out. */
int bk_tls_listen(nng_socket sock, const char *url, nng_tls_config *tls, nng_listener *out);
int bk_tls_dial(nng_socket sock, const char *url, nng_tls_config *tls);

#endif
