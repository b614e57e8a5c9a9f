/* bkctl kube NAME: one sandbox's Kubernetes objects, ready for `kubectl apply -f -` — its own
 * Secret with a fresh HMAC key and a fresh self-signed TLS certificate, then the sandbox pod of
 * deploy/sandbox/pod.yaml (compiled in; --template FILE for an overlay's rendering) under
 * NAME. With --secret, the Secret alone: a warm pool's (deploy/agent-sandbox), whose key is the
 * pool's claim key. Nothing is written anywhere but stdout: the key and the certificate live only
 * in the Secret, from which a client takes them (docs/DEPLOY.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "bkctl.h"
#include "cleanup.h"
#include "keys.h"

/* deploy/sandbox/pod.yaml, made into a C string by the Makefile. */
extern const char bkctl_sandbox_pod_yaml[];

#define TEMPLATE_NAME "boxkite-sandbox" /* the name the template's objects carry */
#define TEMPLATE_MAX (1u << 20)
#define CERT_DAYS 397                   /* at most what public CAs issue; a pod lives less */

/* A DNS-1123 label: a pod, its Secret and the label value app.kubernetes.io/instance. */
static bool name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 63 || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
			return false;
	return true;
}

static void bio_freep(BIO **b)
{
	BIO_free(*b);
}

/* A self-signed P-256 certificate for NAME (subject CN and DNS SAN) and its key, both PEM, into
 * two memory BIOs. The client pins this certificate (libboxkite's tls_cert): nothing else
 * vouches for it. */
static int make_certificate(const char *name, BIO *cert_pem, BIO *key_pem)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *subject;
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	char san[80];
	uint8_t serial[16];
	BIGNUM *bn = NULL;
	int ok = 0;

	if (!key || !x || RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] &= 0x7f; /* a positive serial number */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	snprintf(san, sizeof(san), "DNS:%s", name);
	subject = X509_get_subject_name(x);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (!bn || !X509_set_version(x, 2) || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -300) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), (long)CERT_DAYS * 86400) || !X509_set_pubkey(x, key) ||
	    !X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0) ||
	    !X509_set_issuer_name(x, subject))
		goto out;
	/* A CA (itself) so that a verifier given it as the only trust anchor accepts it. */
	static const char *const exts[][2] = {
		{ "basicConstraints", "critical,CA:TRUE,pathlen:0" },
		{ "keyUsage", "critical,digitalSignature,keyCertSign" },
		{ "extendedKeyUsage", "serverAuth" },
		{ "subjectAltName", NULL },
	};
	for (size_t i = 0; i < BK_ARRAY_SIZE(exts); i++) {
		ext = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1] ? exts[i][1] : san);
		if (!ext || !X509_add_ext(x, ext, -1)) {
			X509_EXTENSION_free(ext);
			goto out;
		}
		X509_EXTENSION_free(ext);
	}
	ok = X509_sign(x, key, EVP_sha256()) > 0 && PEM_write_bio_X509(cert_pem, x) &&
	     PEM_write_bio_PrivateKey(key_pem, key, NULL, NULL, 0, NULL, NULL);
out:
	BN_free(bn);
	X509_free(x);
	EVP_PKEY_free(key);
	return ok ? 0 : -1;
}

static void put_base64(const char *field, const void *data, size_t len)
{
	size_t cap = 4 * ((len + 2) / 3) + 1;
	_cleanup_free_ unsigned char *out = malloc(cap);

	if (!out)
		return;
	EVP_EncodeBlock(out, data, (int)len);
	printf("  %s: %s\n", field, out);
	OPENSSL_cleanse(out, cap);
}

static size_t bio_data(BIO *b, const char **data)
{
	char *p = NULL;
	long n = BIO_get_mem_data(b, &p);

	*data = p;
	return n > 0 ? (size_t)n : 0;
}

/* The template with TEMPLATE_NAME replaced by name wherever it is a whole value ("key: NAME"
 * at the end of a line), and the object's namespace (metadata.namespace, two spaces in) set to
 * ns, or added after "metadata:". Returns the number of names replaced. */
static int render_template(const char *tpl, const char *name, const char *ns, FILE *out)
{
	static const char ns_key[] = "  namespace: ";
	bool has_ns = strncmp(tpl, ns_key, sizeof(ns_key) - 1) == 0 || strstr(tpl, "\n  namespace: ");
	size_t tl = strlen(TEMPLATE_NAME);
	int replaced = 0;

	for (const char *line = tpl; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		size_t end = len;

		while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\r'))
			end--;
		if (strncmp(line, ns_key, sizeof(ns_key) - 1) == 0) {
			fprintf(out, "%s%s\n", ns_key, ns);
		} else if (end >= tl + 2 && memcmp(line + end - tl, TEMPLATE_NAME, tl) == 0 &&
			   line[end - tl - 1] == ' ' && line[end - tl - 2] == ':') {
			fprintf(out, "%.*s%s\n", (int)(end - tl), line, name);
			replaced++;
		} else {
			fprintf(out, "%.*s\n", (int)len, line);
			if (!has_ns && end == 9 && memcmp(line, "metadata:", 9) == 0) {
				fprintf(out, "%s%s\n", ns_key, ns);
				has_ns = true;
			}
		}
		line += len + (nl ? 1 : 0);
	}
	return replaced;
}

static char *read_template(const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(TEMPLATE_MAX + 1);
	n = buf ? fread(buf, 1, TEMPLATE_MAX + 1, f) : 0;
	if (f != stdin)
		fclose(f);
	if (!buf || n > TEMPLATE_MAX) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

int bkctl_kube(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const char *ns = "boxkite", *template_path = NULL;
	_cleanup_free_ char *template = NULL;
	_cleanup_(bio_freep) BIO *cert = BIO_new(BIO_s_mem());
	_cleanup_(bio_freep) BIO *key = BIO_new(BIO_s_mem());
	char keytext[BK_KEY_TEXT_MAX];
	const char *name, *data;
	bk_error *err = NULL;
	int c, help = 0, len;
	bool secret_only = false;
	size_t n;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (c == 'n')
			ns = optarg;
		else if (c == BKCTL_OPT_TEMPLATE)
			template_path = optarg;
		else if (c == BKCTL_OPT_SECRET)
			secret_only = true;
		else
			return BKCTL_EXIT_USAGE;
	}
	if (secret_only && template_path) {
		fprintf(stderr, "%s: --secret prints no pod: --template has nothing to do\n", ctl->prog);
		return BKCTL_EXIT_USAGE;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return BKCTL_EXIT_USAGE;
	if (ctl->json) {
		fprintf(stderr, "%s: -o json: kube prints YAML manifests, what kubectl apply -f - reads (kubectl "
				"convert or yq turns them into JSON)\n", ctl->prog);
		return BKCTL_EXIT_USAGE;
	}
	name = argv[optind];
	if (!name_valid(name) || !name_valid(ns)) {
		fprintf(stderr, "%s: '%s': a name and a namespace are 1..63 of [a-z0-9-], not starting or ending with '-'\n",
			ctl->prog, name_valid(name) ? ns : name);
		return BKCTL_EXIT_USAGE;
	}
	if (template_path && !(template = read_template(template_path))) {
		fprintf(stderr, "%s: cannot read template %s: %s\n", ctl->prog, template_path, strerror(errno));
		return BKCTL_EXIT_USAGE;
	}
	if (!cert || !key || make_certificate(name, cert, key) < 0) {
		fprintf(stderr, "%s: cannot make the TLS certificate\n", ctl->prog);
		return BKCTL_EXIT_STATUS;
	}
	if ((len = bk_key_text_new("k1", keytext, sizeof(keytext), &err)) < 0) {
		fprintf(stderr, "%s: %s\n", ctl->prog, bk_error_msg(err));
		bk_error_free(err);
		return BKCTL_EXIT_STATUS;
	}
	if (secret_only)
		printf("# boxkite Secret %s (a fresh key and TLS certificate), e.g. a warm pool's: its key is the\n"
		       "# pool's claim key. kubectl apply -f - ; the orchestrator reads the key and the certificate.\n",
		       name);
	else
		printf("# boxkite sandbox %s: its Secret (a fresh key and TLS certificate) and its pod.\n"
		       "# kubectl apply -f - ; the client's key and pinned certificate are in the Secret.\n",
		       name);
	printf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n"
	       "    app.kubernetes.io/name: boxkite\n    app.kubernetes.io/component: sandbox-secret\n"
	       "    app.kubernetes.io/instance: %s\n    app.kubernetes.io/part-of: boxkite\n"
	       "type: Opaque\nimmutable: true\ndata:\n",
	       name, ns, name);
	put_base64("key", keytext, (size_t)len);
	OPENSSL_cleanse(keytext, sizeof(keytext));
	n = bio_data(cert, &data);
	put_base64("tls.crt", data, n);
	n = bio_data(key, &data);
	put_base64("tls.key", data, n);
	if (secret_only)
		return fflush(stdout) == 0 ? BKCTL_EXIT_OK : BKCTL_EXIT_STATUS;
	printf("---\n");
	if (render_template(template ? template : bkctl_sandbox_pod_yaml, name, ns, stdout) < 1) {
		fprintf(stderr, "%s: the template names nothing '%s': not a boxkite sandbox pod\n", ctl->prog,
			TEMPLATE_NAME);
		return BKCTL_EXIT_USAGE;
	}
	return fflush(stdout) == 0 ? BKCTL_EXIT_OK : BKCTL_EXIT_STATUS;
}
