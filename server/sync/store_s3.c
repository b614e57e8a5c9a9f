/* s3://BUCKET/PREFIX: keys are objects PREFIX/KEY of the bucket, through libcurl, whose
 * CURLOPT_AWS_SIGV4 signs each request (AWS Signature Version 4, service "s3").
 *
 * The endpoint (--s3-endpoint, default https://s3.REGION.amazonaws.com), the region (--s3-region)
 * and the addressing (virtual-host, or --s3-path-style for servers that want it) come from the
 * configuration; the credentials from --s3-credentials FILE (read as root at start-up) or from
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN in boxkited's environment,
 * which are removed from it once read: they live in the front's memory only, never in an
 * order, the executor or an exec's environment, and never in a message (no URL here carries
 * them; libcurl's verbose output, which shows headers, is never turned on).
 *
 * Transient failures (no connection, a timeout, 429, 5xx) are retried with exponential backoff
 * and jitter; 403 and 404 are answered at once, by name.
 *
 * Nothing here waits on S3 without an end (the store is someone else's server): each call —
 * its tries and their backoff together — ends by BK_STORE_CALL_MS; a connection must be made within
 * BK_STORE_CONNECT_S and a transfer that moves nothing for BK_STORE_STALL_S is given up; an answer larger than
 * the caller's bound is stopped as it arrives (Content-Length, or the bytes themselves); a
 * listing ends by BK_STORE_LIST_NAMES_MAX names, BK_STORE_LIST_PAGES_MAX pages, or a continuation token repeated;
 * and the store's cancel flag ends a call in progress within a second (libcurl's progress
 * callback) — a Reset or a SIGTERM never waits for S3. */
#include "sync/store.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "clock.h"
#include "fullio.h"
#include "secretfile.h"

#define TRIES 5
#define BACKOFF_MS 100
#define LIST_MAX (4u << 20)   /* one page of a listing */

static struct {
	bool ready;
	char unready[256];    /* why not ready: what to change (bk_store_s3_check) */
	char endpoint[512];   /* scheme://host[:port], no trailing '/' */
	char region[64];
	bool path_style;
	char userpwd[512];    /* ACCESS_KEY:SECRET for CURLOPT_USERPWD */
	char token_header[4200]; /* "x-amz-security-token: ..." or "" */
} s3;

struct s3_store {
	char bucket[64];
	char prefix[1024];    /* "" or "a/b/" */
	pthread_mutex_t lock; /* curl: a push's uploaders share the store */
	CURL *curl;
	bk_store base;        /* last: its url[] follows */
};

static struct s3_store *of(bk_store *s)
{
	return (struct s3_store *)((char *)s - offsetof(struct s3_store, base));
}

/* --- set-up ------------------------------------------------------------------------------------ */

static int read_credentials(const char *path, char *key, size_t key_size, char *secret, size_t secret_size,
			    char *token, size_t token_size, bk_error **err)
{
	_cleanup_close_ int fd = bk_secret_file_open("--s3-credentials", path, err);
	_cleanup_free_ uint8_t *text = NULL;
	size_t len;
	int ret;

	if (fd < 0)
		return fd;
	if ((ret = bk_read_all(fd, 8192, &text, &len)) < 0)
		return bk_error_errno(err, -ret, "--s3-credentials %s", path);
	text[len < 8192 ? len : 8191] = '\0';
	/* "ACCESS_KEY_ID SECRET_ACCESS_KEY [SESSION_TOKEN]", whitespace-separated. */
	key[0] = secret[0] = token[0] = '\0';
	char *save = NULL, *w[3] = { NULL };
	for (int i = 0; i < 3; i++)
		w[i] = strtok_r(i ? NULL : (char *)text, " \t\r\n", &save);
	if (!w[0] || !w[1] || strlen(w[0]) >= key_size || strlen(w[1]) >= secret_size ||
	    (w[2] && strlen(w[2]) >= token_size)) {
		explicit_bzero(text, len);
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0,
				    "--s3-credentials %s: expected ACCESS_KEY_ID SECRET_ACCESS_KEY [SESSION_TOKEN]", path);
	}
	snprintf(key, key_size, "%s", w[0]);
	snprintf(secret, secret_size, "%s", w[1]);
	snprintf(token, token_size, "%s", w[2] ? w[2] : "");
	explicit_bzero(text, len);
	return 0;
}

/* Take name out of the environment, and overwrite its NAME=value where it was: the block the
 * kernel shows as /proc/PID/environ keeps what the process was started with otherwise. */
static void env_wipe(const char *name)
{
	char *value = getenv(name);
	char *entry;

	if (!value)
		return;
	entry = value - strlen(name) - 1;
	unsetenv(name);
	explicit_bzero(entry, strlen(name) + 1 + strlen(value));
}

/* Whether the environment variable name's value (not NULL) does not fit in size bytes; if so,
 * s3.unready says so. */
static bool too_long(const char *name, const char *value, size_t size)
{
	if (strlen(value) < size)
		return false;
	snprintf(s3.unready, sizeof(s3.unready), "%s is too long (at most %zu bytes)", name, size - 1);
	return true;
}

/* The credentials from the environment, or s3.unready says what is missing or wrong with them
 * (refused at start-up only if an s3:// store is configured: bk_store_s3_check). */
static void env_credentials(char *key, size_t key_size, char *secret, size_t secret_size, char *token,
			    size_t token_size)
{
	const char *k = getenv("AWS_ACCESS_KEY_ID"), *s = getenv("AWS_SECRET_ACCESS_KEY");
	const char *t = getenv("AWS_SESSION_TOKEN");

	if ((!k || !k[0]) && (!s || !s[0]))
		snprintf(s3.unready, sizeof(s3.unready),
			 "no S3 credentials: give --s3-credentials FILE ('ACCESS_KEY_ID SECRET_ACCESS_KEY "
			 "[SESSION_TOKEN]', mode 0600) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in boxkited's "
			 "environment");
	else if (!k || !k[0] || !s || !s[0])
		snprintf(s3.unready, sizeof(s3.unready), "%s is set but %s is not: set both (or give --s3-credentials FILE)",
			 k && k[0] ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			 k && k[0] ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	else if (!too_long("AWS_ACCESS_KEY_ID", k, key_size) && !too_long("AWS_SECRET_ACCESS_KEY", s, secret_size) &&
		 !(t && too_long("AWS_SESSION_TOKEN", t, token_size))) {
		snprintf(key, key_size, "%s", k);
		snprintf(secret, secret_size, "%s", s);
		snprintf(token, token_size, "%s", t ? t : "");
	}
}

int bk_store_s3_check(const char *url, bk_error **err)
{
	if (s3.ready)
		return 0;
	return bk_error_set(err, BK_FAILED_PRECONDITION, 0, "--sync-store %s: %s", url, s3.unready);
}

int bk_store_s3_setup(const char *endpoint, const char *region, bool path_style, const char *credentials,
		      bk_error **err)
{
	char key[256] = "", secret[256] = "", token[4096] = "";
	int ret = 0;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return bk_error_set(err, BK_INTERNAL, 0, "curl_global_init failed");
	snprintf(s3.region, sizeof(s3.region), "%s", region && region[0] ? region : "us-east-1");
	if (endpoint && endpoint[0])
		snprintf(s3.endpoint, sizeof(s3.endpoint), "%s", endpoint);
	else
		snprintf(s3.endpoint, sizeof(s3.endpoint), "https://s3.%s.amazonaws.com", s3.region);
	for (size_t n = strlen(s3.endpoint); n > 0 && s3.endpoint[n - 1] == '/'; n--)
		s3.endpoint[n - 1] = '\0';
	if (strncmp(s3.endpoint, "https://", 8) && strncmp(s3.endpoint, "http://", 7))
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0, "--s3-endpoint %s: expected http(s)://HOST[:PORT]",
				    s3.endpoint);
	s3.path_style = path_style;
	if (credentials)
		ret = read_credentials(credentials, key, sizeof(key), secret, sizeof(secret), token, sizeof(token), err);
	else
		env_credentials(key, sizeof(key), secret, sizeof(secret), token, sizeof(token));
	/* Read once: nothing started from here on inherits them. */
	env_wipe("AWS_ACCESS_KEY_ID");
	env_wipe("AWS_SECRET_ACCESS_KEY");
	env_wipe("AWS_SESSION_TOKEN");
	if (ret == 0 && key[0] && secret[0]) {
		snprintf(s3.userpwd, sizeof(s3.userpwd), "%s:%s", key, secret);
		if (token[0])
			snprintf(s3.token_header, sizeof(s3.token_header), "x-amz-security-token: %s", token);
		s3.ready = true;
	}
	explicit_bzero(key, sizeof(key));
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(token, sizeof(token));
	return ret;
}

/* --- requests ---------------------------------------------------------------------------------- */

/* What an answer carries: an object (at most max bytes), or an error document. */
#define ERROR_DOC_MAX 65536
struct body {
	uint8_t *data;
	size_t len, max;
	bool over;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;

	if (!b)
		return len;
	if (b->len + len > b->max + ERROR_DOC_MAX) {
		b->over = true;
		return 0;
	}
	uint8_t *grown = realloc(b->data, b->len + len + 1);
	if (!grown)
		return 0;
	b->data = grown;
	memcpy(b->data + b->len, p, len);
	b->len += len;
	b->data[b->len] = '\0';
	return len;
}

/* Percent-encoding of a key or query value for the path (as SigV4's canonical URI wants it:
 * unreserved characters as they are, '/' kept in a path). */
static void encode(const char *in, bool keep_slash, char *out, size_t size)
{
	size_t o = 0;

	for (; *in && o + 4 < size; in++) {
		unsigned char c = (unsigned char)*in;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "%%%02X", c);
	}
	out[o] = '\0';
}

/* The URL of object `key` under the store's prefix (key NULL: the bucket), and a query. 0, or
 * -ENAMETOOLONG. */
static int object_url(const struct s3_store *st, const char *key, const char *query, char *out, size_t size)
{
	char path[3200], enc[3 * sizeof(path)];
	const char *scheme_end = strstr(s3.endpoint, "://") + 3;
	int n;

	snprintf(path, sizeof(path), "%s%s", key ? st->prefix : "", key ? key : "");
	encode(path, true, enc, sizeof(enc));
	if (s3.path_style)
		n = snprintf(out, size, "%s/%s/%s%s%s", s3.endpoint, st->bucket, enc, query ? "?" : "", query ? query : "");
	else
		n = snprintf(out, size, "%.*s%s.%s/%s%s%s", (int)(scheme_end - s3.endpoint), s3.endpoint, st->bucket,
			     scheme_end, enc, query ? "?" : "", query ? query : "");
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static bool transient(CURLcode rc, long http)
{
	if (rc != CURLE_OK)
		return rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_SEND_ERROR ||
		       rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING || rc == CURLE_COULDNT_RESOLVE_HOST ||
		       rc == CURLE_PARTIAL_FILE;
	return http == 429 || http >= 500;
}

static bool cancelled(const struct s3_store *st)
{
	return st->base.cancel && atomic_load(st->base.cancel);
}

/* libcurl calls this at least once a second, even while nothing moves: non-zero ends the
 * transfer (CURLE_ABORTED_BY_CALLBACK). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancelled(arg);
}

/* Wait before try number attempt + 1, in slices that notice the cancel; not past deadline. */
static void backoff(const struct s3_store *st, int attempt, int64_t deadline)
{
	uint32_t r = 0;
	int64_t ms = BACKOFF_MS << attempt, end;

	if (getrandom(&r, sizeof(r), 0) == sizeof(r))
		ms += r % (ms + 1);
	end = bk_clock_monotonic_ms() + ms;
	if (end > deadline)
		end = deadline;
	for (int64_t left; !cancelled(st) && (left = end - bk_clock_monotonic_ms()) > 0;) {
		left = left > 100 ? 100 : left;
		nanosleep(&(struct timespec){ .tv_nsec = left * 1000000 }, NULL);
	}
}

enum method { HEAD, GET, PUT };

/* One request, retried while transient: 0 with *http its status (2xx, 404), or the error (403 and
 * the others). body: what a GET answers (may be NULL); data: what a PUT sends. */
static int request_locked(struct s3_store *st, enum method m, const char *key, const char *query, const uint8_t *data,
			  size_t len, struct body *body, long *http, bk_error **err)
{
	char url[16384], sigv4[128];
	struct curl_slist *headers = NULL;
	CURLcode rc = CURLE_OK;
	CURL *c = st->curl;

	if (!s3.ready)
		return bk_error_set(err, BK_FAILED_PRECONDITION, 0, "%s: %s", st->base.url, s3.unready);
	if (object_url(st, key, query, url, sizeof(url)) < 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "%s: a key's URL is too long", st->base.url);
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s3.region);
	/* S3 wants the payload's SHA-256 as a header, which the signature then covers: the body is
	 * signed too (libcurl does not add it itself before 7.86... nor does 7.88 for non-AWS hosts). */
	uint8_t sum[32];
	char sha_header[sizeof("x-amz-content-sha256: ") + 64];
	if (EVP_Digest(m == PUT ? data : (const uint8_t *)"", m == PUT ? len : 0, sum, NULL, EVP_sha256(), NULL) != 1)
		return bk_error_set(err, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
	size_t o = (size_t)snprintf(sha_header, sizeof(sha_header), "x-amz-content-sha256: ");
	for (size_t i = 0; i < sizeof(sum); i++, o += 2)
		snprintf(sha_header + o, sizeof(sha_header) - o, "%02x", sum[i]);
	headers = curl_slist_append(headers, sha_header);
	if (s3.token_header[0])
		headers = curl_slist_append(headers, s3.token_header);
	/* An empty Expect: no 100-continue round trip before each blob. */
	headers = curl_slist_append(headers, "Expect:");
	int64_t deadline = bk_clock_monotonic_ms() + BK_STORE_CALL_MS, left = BK_STORE_CALL_MS;
	*http = 0;
	int tries = 0;
	for (int attempt = 0; attempt < TRIES; attempt++) {
		FILE *in = NULL;

		if (attempt)
			backoff(st, attempt - 1, deadline);
		left = deadline - bk_clock_monotonic_ms();
		if (cancelled(st) || left <= 0)
			break;
		tries++;
		if (body) {
			free(body->data);
			*body = (struct body){ .max = body->max };
		}
		curl_easy_reset(c);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
		curl_easy_setopt(c, CURLOPT_USERPWD, s3.userpwd);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)BK_STORE_CONNECT_S);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)BK_STORE_STALL_S);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, st);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, m == GET ? body : NULL);
		/* An answer that says it is larger than the bound is not read at all. */
		if (body)
			curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(body->max + ERROR_DOC_MAX));
		if (m == HEAD) {
			curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
		} else if (m == PUT) {
			in = fmemopen((void *)(len ? data : (const uint8_t *)""), len ? len : 1, "rb");
			if (!in) {
				rc = CURLE_OUT_OF_MEMORY;
				break;
			}
			curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(c, CURLOPT_READDATA, in);
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
		}
		rc = curl_easy_perform(c);
		if (in)
			fclose(in);
		*http = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, http);
		if (!transient(rc, *http))
			break;
	}
	curl_slist_free_all(headers);
	if (cancelled(st))
		return bk_error_set(err, BK_CANCELLED, ECANCELED, "%s: cancelled", st->base.url);
	if (left <= 0 || rc == CURLE_OPERATION_TIMEDOUT)
		return bk_error_set(err, BK_DEADLINE_EXCEEDED, ETIMEDOUT,
				    "%s: no answer within %d s (%d tries; a transfer that stalls %d s is given up)",
				    st->base.url, BK_STORE_CALL_MS / 1000, tries, BK_STORE_STALL_S);
	if (body && (body->over || rc == CURLE_FILESIZE_EXCEEDED ||
		     (*http >= 200 && *http < 300 && body->len > body->max)))
		return bk_error_set(err, BK_DATA_LOSS, EFBIG, "%s: %s is larger than %zu bytes", st->base.url, key ? key : "",
				    body->max);
	if (rc != CURLE_OK)
		return bk_error_set(err, BK_UNAVAILABLE, EIO, "%s: %s (after %d tries)", st->base.url, curl_easy_strerror(rc),
				    tries);
	if (*http == 403)
		return bk_error_set(err, BK_PERMISSION_DENIED, EACCES,
				    "%s: access denied (403): the credentials or the bucket's policy do not allow it",
				    st->base.url);
	if (*http >= 200 && *http < 300)
		return 0;
	if (*http == 404) {
		/* NoSuchBucket is the store missing, not a key. */
		if (body && body->data && strstr((char *)body->data, "NoSuchBucket"))
			return bk_error_set(err, BK_NOT_FOUND, ENXIO, "%s: no such bucket (404)", st->base.url);
		return 0;
	}
	return bk_error_set(err, *http == 429 || *http >= 500 ? BK_UNAVAILABLE : BK_INTERNAL, EIO,
			    "%s: HTTP %ld%s", st->base.url, *http, *http >= 500 ? " (after retries)" : "");
}

/* One request at a time on the store's handle. */
static int request(struct s3_store *st, enum method m, const char *key, const char *query, const uint8_t *data,
		   size_t len, struct body *body, long *http, bk_error **err)
{
	int ret;

	pthread_mutex_lock(&st->lock);
	ret = request_locked(st, m, key, query, data, len, body, http, err);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

/* --- the store --------------------------------------------------------------------------------- */

static int s3_has(bk_store *s, const char *key, bk_error **err)
{
	long http;
	int ret = request(of(s), HEAD, key, NULL, NULL, 0, NULL, &http, err);

	return ret < 0 ? ret : http != 404;
}

static int s3_put(bk_store *s, const char *key, const uint8_t *data, size_t len, bk_error **err)
{
	long http;

	int ret = request(of(s), PUT, key, NULL, data, len, NULL, &http, err);
	if (ret == 0 && http == 404)
		return bk_error_set(err, BK_NOT_FOUND, ENXIO, "%s: no such bucket (404)", s->url);
	return ret;
}

static int s3_get(bk_store *s, const char *key, size_t max, uint8_t **data, size_t *len, bk_error **err)
{
	struct body b = { .max = max };
	long http;
	int ret = request(of(s), GET, key, NULL, NULL, 0, &b, &http, err);

	if (ret == 0 && http == 404) {
		free(b.data);
		return bk_error_set(err, BK_NOT_FOUND, ENOENT, "%s: %s", s->url, key);
	}
	if (ret < 0) {
		free(b.data);
		return ret;
	}
	*data = b.data ? b.data : calloc(1, 1);
	*len = b.len;
	return *data ? 0 : bk_error_errno(err, ENOMEM, "%s: %s", s->url, key);
}

/* The text of each <tag>...</tag> after *at, one at a time (no entities: our keys have none). */
static bool xml_next(const char **at, const char *tag, char *out, size_t size)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (!(a = strstr(*at, open)) || !(b = strstr(a, close)))
		return false;
	a += strlen(open);
	snprintf(out, size, "%.*s", (int)(b - a), a);
	*at = b + strlen(close);
	return true;
}

static int s3_list(bk_store *s, const char *dir, char ***names, size_t *n, bk_error **err)
{
	struct s3_store *st = of(s);
	char prefix[1200], enc_prefix[3600], token[1024] = "", last[1024], enc_token[3100], query[8000];
	char **v = NULL;
	size_t count = 0;
	bool more = true;
	int pages = 0, ret = 0;

	*names = NULL;
	*n = 0;
	snprintf(prefix, sizeof(prefix), "%s%s/", st->prefix, dir);
	encode(prefix, false, enc_prefix, sizeof(enc_prefix));
	while (more) {
		struct body b = { .max = LIST_MAX };
		char key[1200], trunc[16];
		const char *at;
		long http;

		encode(token, false, enc_token, sizeof(enc_token));
		/* Parameters in SigV4's canonical order (sorted by name). */
		snprintf(query, sizeof(query), "%s%s%sdelimiter=%%2F&list-type=2&prefix=%s", token[0] ? "continuation-token=" : "",
			 token[0] ? enc_token : "", token[0] ? "&" : "", enc_prefix);
		if (request(st, GET, NULL, query, NULL, 0, &b, &http, err) < 0 || http == 404) {
			free(b.data);
			ret = http == 404 ? bk_error_set(err, BK_NOT_FOUND, ENXIO, "%s: no such bucket (404)", s->url) : -EIO;
			break;
		}
		at = b.data ? (const char *)b.data : "";
		while (xml_next(&at, "Key", key, sizeof(key))) {
			char **grown;
			if (count == BK_STORE_LIST_NAMES_MAX) {
				ret = bk_error_set(err, BK_RESOURCE_EXHAUSTED, EFBIG, "%s: more than %d names under %s/",
						   s->url, BK_STORE_LIST_NAMES_MAX, dir);
				break;
			}
			if (strncmp(key, prefix, strlen(prefix)) || strchr(key + strlen(prefix), '/') ||
			    strchr(key, '&') || !(grown = realloc(v, (count + 1) * sizeof(*v))))
				continue;
			v = grown;
			if ((v[count] = strdup(key + strlen(prefix))))
				count++;
		}
		at = b.data ? (const char *)b.data : "";
		more = xml_next(&at, "IsTruncated", trunc, sizeof(trunc)) && strcmp(trunc, "true") == 0;
		at = b.data ? (const char *)b.data : "";
		memcpy(last, token, sizeof(last));
		if (more && !xml_next(&at, "NextContinuationToken", token, sizeof(token)))
			more = false;
		free(b.data);
		if (ret < 0)
			break;
		/* A listing goes forward or ends: the same token again, or pages without end, is a
		 * store that would keep us here. */
		if (more && (strcmp(token, last) == 0 || ++pages == BK_STORE_LIST_PAGES_MAX)) {
			ret = bk_error_set(err, BK_DATA_LOSS, EPROTO,
					   "%s: the listing of %s/ does not end (%s)", s->url, dir,
					   strcmp(token, last) == 0 ? "a continuation token repeated" : "too many pages");
			break;
		}
	}
	if (ret < 0) {
		for (size_t i = 0; i < count; i++)
			free(v[i]);
		free(v);
		return ret;
	}
	*names = v;
	*n = count;
	return 0;
}

/* A PUT that answered 200 is durable and visible to the next read. */
static int s3_barrier(bk_store *s, bk_error **err)
{
	(void)s;
	(void)err;
	return 0;
}

static void s3_free(bk_store *s)
{
	struct s3_store *st = of(s);

	curl_easy_cleanup(st->curl);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static const struct bk_store_ops s3_ops = {
	.has = s3_has,
	.put = s3_put,
	.get = s3_get,
	.list = s3_list,
	.barrier = s3_barrier,
	.free = s3_free,
};

int bk_store_s3_open(const char *url, const char *rest, bk_store **out, bk_error **err)
{
	size_t blen = strcspn(rest, "/"), len = strlen(url);
	const char *prefix = rest[blen] ? rest + blen + 1 : "";
	struct s3_store *st;

	/* Bucket names: 3-63 of a-z 0-9 . - (DNS-compatible, as virtual-host addressing needs). */
	if (blen < 3 || blen > 63 || strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789.-") < blen ||
	    strlen(prefix) > 900)
		return bk_error_set(err, BK_INVALID_ARGUMENT, 0, "store URL '%.200s': expected s3://BUCKET[/PREFIX]", url);
	st = calloc(1, sizeof(*st) + len + 1);
	if (!st)
		return bk_error_errno(err, ENOMEM, "store");
	snprintf(st->bucket, sizeof(st->bucket), "%.*s", (int)blen, rest);
	snprintf(st->prefix, sizeof(st->prefix), "%s", prefix);
	for (size_t n = strlen(st->prefix); n > 0 && st->prefix[n - 1] == '/'; n--)
		st->prefix[n - 1] = '\0';
	if (st->prefix[0])
		strcat(st->prefix, "/");
	st->base.ops = &s3_ops;
	memcpy(st->base.url, url, len + 1);
	pthread_mutex_init(&st->lock, NULL);
	if (!(st->curl = curl_easy_init())) {
		free(st);
		return bk_error_set(err, BK_INTERNAL, 0, "curl_easy_init failed");
	}
	*out = &st->base;
	return 0;
}
