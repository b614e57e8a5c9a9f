#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/methods.h"
#include "transport/door.h"
#include "transport/proxy.h"
#include "sync/store.h"
#include "version.h"

enum opt_type { OPT_STRING, OPT_LISTEN, OPT_STORE, OPT_UINT, OPT_SIZE, OPT_SECONDS, OPT_FLAG, OPT_ROOT, OPT_EGRESS_ALLOW,
		OPT_EGRESS_CREDENTIAL };

struct option_def {
	const char *name;
	enum opt_type type;
	size_t offset;
	const char *arg, *help;
};

#define FIELD(f) offsetof(bk_config, f)

static const struct option_def option_defs[] = {
	{ "listen", OPT_LISTEN, FIELD(listen), "URL", "listen on URL (tcp://HOST:PORT, tls+tcp://HOST:PORT, ipc:///PATH); repeatable" },
	{ "key-file", OPT_STRING, FIELD(key_file), "PATH", "key file (bkctl keygen); without one only Health is served" },
	{ "key-env", OPT_STRING, FIELD(key_env), "NAME", "read the keys from environment variable NAME instead (a Kubernetes secretKeyRef); never reloaded" },
	{ "claim-key-file", OPT_STRING, FIELD(claim_key_file), "PATH", "a warm pool's claim key instead: Health and Reset only, until a Reset installs the tenant's key (kept in --state-dir: the claim key is refused for good)" },
	{ "claim-key-env", OPT_STRING, FIELD(claim_key_env), "NAME", "the claim key from environment variable NAME (a Kubernetes secretKeyRef); never reloaded" },
	{ "http-listen", OPT_STRING, FIELD(http_listen), "URL", "serve /livez, /readyz and /metrics on URL (http://HOST:PORT)" },
	{ "preview-listen", OPT_STRING, FIELD(preview_listen), "URL", "relay previews (/preview/PORT/TOKEN/...) to exposed ports on URL (http://HOST:PORT)" },
	{ "preview-ttl-max", OPT_SECONDS, FIELD(preview_ttl_max_ms), "SECONDS", "the longest a preview token may be good for (default 86400)" },
	{ "tls-cert", OPT_STRING, FIELD(tls_cert), "PATH", "tls+tcp:// listeners: the certificate (PEM) clients pin" },
	{ "tls-key", OPT_STRING, FIELD(tls_key), "PATH", "tls+tcp:// listeners: its private key (PEM)" },
	{ "contexts", OPT_UINT, FIELD(contexts), "N", "requests served at once (default 64)" },
	{ "max-message", OPT_SIZE, FIELD(max_message), "BYTES", "largest message accepted (default and most: the largest legal request, 8M + 1K)" },
	{ "max-connections", OPT_UINT, FIELD(max_connections), "N", "connections at once, before any is authenticated (default 64)" },
	{ "decode-cap", OPT_SIZE, FIELD(decode_cap), "BYTES", "memory one request may decode into (default 2 x max-message)" },
	{ "window", OPT_SECONDS, FIELD(window_ms), "SECONDS", "accepted clock skew each way (default 30)" },
	{ "replay-capacity", OPT_SIZE, FIELD(replay_capacity), "N", "live nonces remembered (default 1M)" },
	{ "replay-answer-cap", OPT_SIZE, FIELD(replay_answer_cap), "BYTES", "answers kept for re-sent requests (default 64M)" },
	{ "local", OPT_FLAG, FIELD(pod), "", "make a sandbox of our own (the default)" },
	{ "pod", OPT_FLAG, FIELD(pod), "", "find the pod's sandbox container (shareProcessNamespace)" },
	{ "state-dir", OPT_STRING, FIELD(state_dir), "DIR", "boxkited's private state, made mode 0700 (default /var/lib/boxkite)" },
	{ "workspace", OPT_STRING, FIELD(workspace), "DIR", "local: host directory shown as /workspace (default STATE-DIR/workspace)" },
	{ "home", OPT_STRING, FIELD(home), "DIR", "local: host directory shown as the sandbox user's home (default STATE-DIR/home)" },
	{ "init", OPT_STRING, FIELD(init_path), "PATH", "local: the boxkite-init binary (default: next to boxkited)" },
	{ "executor", OPT_STRING, FIELD(executor_path), "PATH", "the boxkite-executor binary (default: next to boxkited)" },
	{ "init-name", OPT_STRING, FIELD(init_name), "NAME", "pod: process name of the sandbox's init (default boxkite-init)" },
	{ "sandbox-uid", OPT_UINT, FIELD(sandbox_uid), "UID", "the sandbox user and group (default 1001)" },
	{ "front-uid", OPT_UINT, FIELD(front_uid), "UID", "the user and group the network-facing process runs as (default 65532)" },
	{ "tmp-size", OPT_SIZE, FIELD(tmp_size), "BYTES", "local: size of the sandbox's /tmp (default: half of --exec-memory)" },
	{ "exec-timeout", OPT_SECONDS, FIELD(exec_timeout_ms), "SECONDS", "default exec timeout (default 600: a pip install or npm ci fits)" },
	{ "exec-timeout-max", OPT_SECONDS, FIELD(exec_timeout_max_ms), "SECONDS", "largest timeout a request may ask (default 3600)" },
	{ "exec-output", OPT_SIZE, FIELD(exec_output), "BYTES", "default bytes kept per output stream (default 1M)" },
	{ "exec-output-max", OPT_SIZE, FIELD(exec_output_max), "BYTES", "largest per-stream limit a request may ask (default 64M)" },
	{ "exec-output-budget", OPT_SIZE, FIELD(exec_output_budget), "BYTES", "output and stdin buffered for all running execs together (default 256M)" },
	{ "exec-memory", OPT_SIZE, FIELD(exec_memory), "BYTES", "memory limit per exec (default 512M)" },
	{ "exec-pids", OPT_UINT, FIELD(exec_pids), "N", "process limit per exec (default 256)" },
	{ "sandbox-memory", OPT_SIZE, FIELD(sandbox_memory), "BYTES", "memory of every exec and process together (default 4 x --exec-memory)" },
	{ "sandbox-pids", OPT_UINT, FIELD(sandbox_pids), "N", "processes of every exec and process together (default 4 x --exec-pids)" },
	{ "exec-nofile", OPT_UINT, FIELD(exec_nofile), "N", "RLIMIT_NOFILE per exec (default 1024)" },
	{ "exec-nproc", OPT_UINT, FIELD(exec_nproc), "N", "RLIMIT_NPROC of the sandbox user, only without a pids cgroup (default 4096; else --exec-pids limits)" },
	{ "exec-fsize", OPT_SIZE, FIELD(exec_fsize), "BYTES", "largest file an exec may write (default 1G)" },
	{ "processes-max", OPT_UINT, FIELD(processes_max), "N", "background processes kept, running or ended and not removed (default 64)" },
	{ "process-ring", OPT_SIZE, FIELD(process_ring), "BYTES", "default bytes kept per process output stream (default 1M)" },
	{ "process-ring-max", OPT_SIZE, FIELD(process_ring_max), "BYTES", "largest per-stream ring a process may ask (default 64M)" },
	{ "process-ring-budget", OPT_SIZE, FIELD(process_ring_budget), "BYTES", "ring bytes for all processes together (default 512M)" },
	{ "process-runtime-max", OPT_SECONDS, FIELD(process_runtime_max_ms), "SECONDS", "longest a process may run, and the default (default 0: no limit)" },
	{ "root", OPT_ROOT, FIELD(roots), "PATH[:ro]", "another sandbox path files may be read (and written) under; repeatable" },
	{ "file-max", OPT_SIZE, FIELD(file_max), "BYTES", "largest file an upload may write (default 16G)" },
	{ "uploads-max", OPT_UINT, FIELD(uploads_max), "N", "uploads open at once (default 64)" },
	{ "upload-idle", OPT_SECONDS, FIELD(upload_idle_ms), "SECONDS", "drop an upload untouched this long (default 900)" },
	{ "workspace-quota", OPT_SIZE, FIELD(workspace_quota), "BYTES", "refuse uploads that would fill /workspace past BYTES" },
	{ "sync-store", OPT_STORE, FIELD(sync_store), "URL", "a store snapshots may be pushed to and pulled from (file:///DIR, s3://BUCKET/PREFIX); repeatable, the first is the default" },
	{ "restore-from", OPT_STRING, FIELD(restore_from), "URL", "pull the latest snapshot under URL (a --sync-store or under one) into /workspace before serving" },
	{ "s3-endpoint", OPT_STRING, FIELD(s3_endpoint), "URL", "s3:// stores: the S3 endpoint, http(s)://HOST[:PORT] (default https://s3.REGION.amazonaws.com)" },
	{ "s3-region", OPT_STRING, FIELD(s3_region), "REGION", "s3:// stores: the region requests are signed for (default us-east-1)" },
	{ "s3-path-style", OPT_FLAG, FIELD(s3_path_style), "", "s3:// stores: ENDPOINT/BUCKET/KEY addressing instead of BUCKET.ENDPOINT/KEY" },
	{ "s3-credentials", OPT_STRING, FIELD(s3_credentials), "PATH", "s3:// stores: a file 'ACCESS_KEY_ID SECRET_ACCESS_KEY [SESSION_TOKEN]' (default: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)" },
	{ "sync-on-reset", OPT_STRING, FIELD(sync_on_reset), "URL", "push a final snapshot of /workspace to URL before a reset wipes it" },
	{ "egress-allow", OPT_EGRESS_ALLOW, FIELD(egress_allow), "HOST:PORT", "the egress ceiling: a destination a request may grant its command (a name, *.DOMAIN, an address or CIDR; a port or *); repeatable. None: no egress" },
	{ "egress-credential", OPT_EGRESS_CREDENTIAL, FIELD(egress_credential), "HOST:PORT=FILE", "add FILE's header lines (mode 0600) to requests to HOST:PORT through the egress proxy; repeatable" },
	{ "egress", OPT_STRING, FIELD(egress_path), "PATH", "the boxkite-egress binary (default: next to boxkited)" },
	{ "egress-uid", OPT_UINT, FIELD(egress_uid), "UID", "the egress proxy's user and group (default 65533)" },
	{ "egress-connections", OPT_UINT, FIELD(egress_connections), "N", "egress connections one command may have open at once (default 32)" },
	{ "egress-idle", OPT_SECONDS, FIELD(egress_idle_ms), "SECONDS", "end an egress connection with no byte either way for this long (default 60)" },
	{ "egress-connect-timeout", OPT_SECONDS, FIELD(egress_connect_ms), "SECONDS", "to read a request head, resolve and dial, and shake hands (default 10)" },
	{ "egress-header-max", OPT_SIZE, FIELD(egress_header_max), "BYTES", "largest request head the egress proxy reads, 1K-64K (default 16K)" },
};

static void config_defaults(bk_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->contexts = 64;
	cfg->max_connections = 64;
	cfg->window_ms = 30000;
	cfg->replay_capacity = 1u << 20;
	cfg->replay_answer_cap = 64u << 20;
	cfg->sandbox_uid = 1001;
	cfg->front_uid = 65532;
	cfg->exec_timeout_ms = 600000;
	cfg->exec_timeout_max_ms = 3600000;
	cfg->exec_output = 1u << 20;
	cfg->exec_output_max = 64u << 20;
	cfg->exec_output_budget = 256u << 20;
	cfg->processes_max = 64;
	cfg->preview_ttl_max_ms = 86400 * 1000;
	cfg->process_ring = 1u << 20;
	cfg->process_ring_max = 64u << 20;
	cfg->process_ring_budget = 512u << 20;
	cfg->exec_memory = 512u << 20;
	cfg->exec_pids = 256;
	cfg->exec_nofile = 1024;
	cfg->exec_nproc = 4096;
	cfg->exec_fsize = 1u << 30;
	bk_roots_default(&cfg->roots);
	cfg->file_max = 16ull << 30;
	cfg->uploads_max = 64;
	cfg->upload_idle_ms = 900000;
	cfg->egress_uid = 65533;
	cfg->egress_connections = 32;
	cfg->egress_idle_ms = 60000;
	cfg->egress_connect_ms = 10000;
	cfg->egress_header_max = 16384;
}

void bk_config_free(bk_config *cfg)
{
	for (size_t i = 0; i < cfg->nlisten; i++)
		free(cfg->listen[i]);
	free(cfg->key_file);
	free(cfg->key_env);
	free(cfg->claim_key_file);
	free(cfg->claim_key_env);
	free(cfg->http_listen);
	free(cfg->preview_listen);
	free(cfg->tls_cert);
	free(cfg->tls_key);
	free(cfg->state_dir);
	free(cfg->workspace);
	free(cfg->home);
	free(cfg->init_path);
	free(cfg->executor_path);
	free(cfg->init_name);
	for (size_t i = 0; i < cfg->nsync_store; i++)
		free(cfg->sync_store[i]);
	free(cfg->restore_from);
	free(cfg->sync_on_reset);
	free(cfg->s3_endpoint);
	free(cfg->s3_region);
	free(cfg->s3_credentials);
	for (size_t i = 0; i < cfg->negress_allow; i++)
		free(cfg->egress_allow[i]);
	free(cfg->egress_ceiling);
	for (size_t i = 0; i < cfg->negress_credential; i++) {
		free(cfg->egress_credential[i].destination);
		free(cfg->egress_credential[i].path);
	}
	free(cfg->egress_path);
	memset(cfg, 0, sizeof(*cfg));
}

/* "123", "64K", "16M", "1G" → bytes. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	uint64_t v, mul = 1;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int apply_option(bk_config *cfg, const struct option_def *def, const char *value, bk_error **err)
{
	void *field = (char *)cfg + def->offset;
	uint64_t v = 0;

	switch (def->type) {
	case OPT_LISTEN:
		if (cfg->nlisten == BK_LISTEN_MAX)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--listen: at most %d URLs", BK_LISTEN_MAX);
		if (strncmp(value, "tcp://", 6) && strncmp(value, "tls+tcp://", 10) && strncmp(value, "ipc://", 6) &&
		    strncmp(value, "inproc://", 9))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--listen %s: a URL is tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc:///PATH",
					    value);
		cfg->listen[cfg->nlisten] = strdup(value);
		if (!cfg->listen[cfg->nlisten])
			return bk_error_errno(err, ENOMEM, "--listen");
		cfg->nlisten++;
		return 0;
	case OPT_STORE:
		if (cfg->nsync_store == BK_SYNC_STORES_MAX)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--sync-store: at most %d URLs",
					    BK_SYNC_STORES_MAX);
		if (strncmp(value, "file:///", 8) && strncmp(value, "s3://", 5))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--sync-store %s: a store is file:///DIR or s3://BUCKET[/PREFIX]", value);
		if (!(cfg->sync_store[cfg->nsync_store] = strdup(value)))
			return bk_error_errno(err, ENOMEM, "--sync-store");
		cfg->nsync_store++;
		return 0;
	case OPT_STRING:
		free(*(char **)field);
		*(char **)field = strdup(value);
		return *(char **)field ? 0 : bk_error_errno(err, ENOMEM, "--%s", def->name);
	case OPT_UINT:
		if (parse_size(value, &v) < 0 || v == 0 || v > 65536)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--%s %s: expected a count 1..65536",
					    def->name, value);
		*(unsigned *)field = (unsigned)v;
		return 0;
	case OPT_SIZE:
		if (parse_size(value, &v) < 0 || v == 0 || v > (1ull << 40))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--%s %s: expected a positive size like 4096, 64K, 16M", def->name, value);
		*(size_t *)field = (size_t)v;
		return 0;
	case OPT_ROOT: {
		int ret = bk_roots_add(&cfg->roots, value, err);
		return ret < 0 ? bk_error_prefix(err, ret, "--root %s", value) : 0;
	}
	case OPT_EGRESS_ALLOW: {
		bk_egress_pattern p;
		int ret;
		if (cfg->negress_allow == BK_EGRESS_CEILING_MAX)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--egress-allow: at most %d patterns",
					    BK_EGRESS_CEILING_MAX);
		if ((ret = bk_egress_pattern_parse(value, &p, err)) < 0)
			return bk_error_prefix(err, ret, "--egress-allow %s", value);
		if (!(cfg->egress_allow[cfg->negress_allow] = strdup(value)))
			return bk_error_errno(err, ENOMEM, "--egress-allow");
		cfg->negress_allow++;
		return 0;
	}
	case OPT_EGRESS_CREDENTIAL: {
		bk_egress_credential *c = &cfg->egress_credential[cfg->negress_credential];
		const char *eq = strchr(value, '=');
		int ret;
		if (cfg->negress_credential == BK_EGRESS_CREDENTIALS_MAX)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--egress-credential: at most %d",
					    BK_EGRESS_CREDENTIALS_MAX);
		if (!eq || eq[1] != '/')
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--egress-credential %s: expected HOST:PORT=/ABSOLUTE/FILE", value);
		if (!(c->destination = strndup(value, (size_t)(eq - value))) || !(c->path = strdup(eq + 1)))
			return bk_error_errno(err, ENOMEM, "--egress-credential");
		cfg->negress_credential++;
		if ((ret = bk_egress_destination_parse(c->destination, &c->host, &c->port, err)) < 0)
			return bk_error_prefix(err, ret, "--egress-credential %s", value);
		return 0;
	}
	case OPT_FLAG:
		if (strcmp(value, "true") && strcmp(value, "1") && strcmp(value, "yes"))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s = %s: a flag is true or absent",
					    def->name, value);
		/* --local sets the same field as --pod, the other way. */
		*(bool *)field = strcmp(def->name, "local") != 0;
		return 0;
	case OPT_SECONDS:
		if (parse_size(value, &v) < 0 || v == 0 || v > 86400)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--%s %s: expected seconds 1..86400",
					    def->name, value);
		*(int64_t *)field = (int64_t)v * 1000;
		return 0;
	}
	return -EINVAL;
}

static const struct option_def *find_def(const char *name)
{
	for (size_t i = 0; i < BK_ARRAY_SIZE(option_defs); i++)
		if (strcmp(option_defs[i].name, name) == 0)
			return &option_defs[i];
	return NULL;
}

/* A config file: `name = value` per line, names as the long flags, '#' comments. */
static int config_file_load(bk_config *cfg, const char *path, bk_error **err)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	unsigned lineno = 0;
	int ret = 0;

	if (!f)
		return bk_error_errno(err, errno, "cannot open config file %s", path);
	while (ret == 0 && fgets(line, sizeof(line), f)) {
		char *name = line, *eq, *value, *end;
		const struct option_def *def;

		lineno++;
		while (isspace((unsigned char)*name))
			name++;
		if (*name == '\0' || *name == '#')
			continue;
		eq = strchr(name, '=');
		if (!eq) {
			ret = bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s line %u: expected name = value", path,
					   lineno);
			break;
		}
		for (end = eq; end > name && isspace((unsigned char)end[-1]); end--)
			;
		*end = '\0';
		for (value = eq + 1; isspace((unsigned char)*value); value++)
			;
		for (end = value + strlen(value); end > value && isspace((unsigned char)end[-1]); end--)
			;
		*end = '\0';
		def = find_def(name);
		if (!def)
			ret = bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "%s line %u: unknown setting '%s'", path,
					   lineno, name);
		else if ((ret = apply_option(cfg, def, value, err)) < 0)
			bk_error_prefix(err, ret, "%s line %u", path, lineno);
	}
	fclose(f);
	return ret;
}

/* Where a helper binary of ours is by default: next to our own binary (build/NAME), or
 * PREFIX/libexec/boxkite/NAME for an installed PREFIX/sbin/boxkited. */
static int next_to_self(const char *name, char **out, bk_error **err)
{
	char self[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 32);

	if (n <= 0)
		return bk_error_errno(err, errno, "readlink /proc/self/exe");
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	if (asprintf(out, "%s/%s", self, name) < 0)
		return bk_error_errno(err, ENOMEM, "config");
	if (access(*out, X_OK) < 0 && (slash = strrchr(self, '/'))) {
		*slash = '\0';
		free(*out);
		if (asprintf(out, "%s/libexec/boxkite/%s", self, name) < 0)
			return bk_error_errno(err, ENOMEM, "config");
	}
	return 0;
}

/* The egress settings, once all are read: the ceiling parsed, each credential's destination
 * within it, the proxy's user apart from every other. */
static int egress_finish(bk_config *cfg, bk_error **err)
{
	int ret;

	if (cfg->negress_allow == 0) {
		if (cfg->negress_credential)
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--egress-credential without --egress-allow: no destination is reachable");
		return 0;
	}
	if ((ret = bk_egress_patterns_parse(cfg->egress_allow, cfg->negress_allow, &cfg->egress_ceiling, err)) < 0)
		return bk_error_prefix(err, ret, "--egress-allow");
	for (size_t i = 0; i < cfg->negress_credential; i++) {
		const bk_egress_credential *c = &cfg->egress_credential[i];
		if (!bk_egress_patterns_match(cfg->egress_ceiling, cfg->negress_allow, &c->host, c->port))
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
					    "--egress-credential %s: not within --egress-allow", c->destination);
		for (size_t j = 0; j < i; j++)
			if (strcmp(cfg->egress_credential[j].destination, c->destination) == 0)
				return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--egress-credential %s: given twice",
						    c->destination);
	}
	if (cfg->egress_uid == 0 || cfg->egress_uid == cfg->sandbox_uid || cfg->egress_uid == cfg->front_uid)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--egress-uid %u: neither 0, the sandbox's nor the front's uid", cfg->egress_uid);
	if (cfg->egress_header_max < 1024 || cfg->egress_header_max > 65536)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--egress-header-max: 1K-64K");
	if (!cfg->egress_path && (ret = next_to_self("boxkite-egress", &cfg->egress_path, err)) < 0)
		return ret;
	return 0;
}

/* Defaults that depend on other settings, and settings that contradict each other. */
static int config_finish(bk_config *cfg, bk_error **err)
{
	int ret;

	/* Root would own every root-owned file; the sandbox's uid could signal and trace it. */
	if (cfg->front_uid == 0 || cfg->front_uid == cfg->sandbox_uid)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--front-uid %u: neither 0 nor the sandbox's uid",
				    cfg->front_uid);
	if (!cfg->state_dir && !(cfg->state_dir = strdup("/var/lib/boxkite")))
		return bk_error_errno(err, ENOMEM, "config");
	if (cfg->state_dir[0] != '/')
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--state-dir %s: an absolute path", cfg->state_dir);
	if (!cfg->workspace && asprintf(&cfg->workspace, "%s/workspace", cfg->state_dir) < 0)
		return bk_error_errno(err, ENOMEM, "config");
	if (!cfg->home && asprintf(&cfg->home, "%s/home", cfg->state_dir) < 0)
		return bk_error_errno(err, ENOMEM, "config");
	/* tmpfs pages are charged to the memory cgroup of the exec that writes them: a /tmp and
	 * /dev/shm that could outgrow an exec's memory limit would make a full /tmp an OOM kill
	 * instead of ENOSPC. So /dev/shm is an eighth of the limit, /tmp half by default, and a
	 * quarter is always left for the command itself. */
	cfg->shm_size = cfg->exec_memory / 8;
	if (!cfg->tmp_size)
		cfg->tmp_size = cfg->exec_memory / 2;
	if (!cfg->pod && cfg->tmp_size + cfg->shm_size > cfg->exec_memory - cfg->exec_memory / 4)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--tmp-size %zu with /dev/shm %zu leaves less than a quarter of --exec-memory %zu "
				    "to the command: a full /tmp would be an OOM kill, not ENOSPC; lower --tmp-size "
				    "(at most %zu) or raise --exec-memory",
				    cfg->tmp_size, cfg->shm_size, cfg->exec_memory,
				    cfg->exec_memory - cfg->exec_memory / 4 - cfg->shm_size);
	if (!cfg->sandbox_memory)
		cfg->sandbox_memory = 4 * cfg->exec_memory;
	if (!cfg->sandbox_pids)
		cfg->sandbox_pids = 4 * cfg->exec_pids;
	if (cfg->sandbox_memory < cfg->exec_memory || cfg->sandbox_pids < cfg->exec_pids)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--sandbox-memory and --sandbox-pids are at least one exec's (--exec-memory, --exec-pids)");
	if (!cfg->init_name && !(cfg->init_name = strdup("boxkite-init")))
		return bk_error_errno(err, ENOMEM, "config");
	if (!cfg->init_path && (ret = next_to_self("boxkite-init", &cfg->init_path, err)) < 0)
		return ret;
	if (!cfg->executor_path && (ret = next_to_self("boxkite-executor", &cfg->executor_path, err)) < 0)
		return ret;
	if (!!cfg->key_file + !!cfg->key_env + !!cfg->claim_key_file + !!cfg->claim_key_env > 1)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--key-file, --key-env, --claim-key-file, --claim-key-env: one source of keys (a pod's "
				    "own key, or a warm pool's claim key)");
	/* A claim key is read like any key; only what it may do differs. --state-dir always names
	 * a directory (the default above), where the tenant key its Reset installs outlives a
	 * restart, and the claim key with it stays refused. */
	if (cfg->claim_key_file || cfg->claim_key_env) {
		cfg->claim = true;
		cfg->key_file = TAKE_PTR(cfg->claim_key_file);
		cfg->key_env = TAKE_PTR(cfg->claim_key_env);
	}
	bool tls = false;
	for (size_t i = 0; i < cfg->nlisten; i++)
		tls = tls || strncmp(cfg->listen[i], "tls+tcp://", 10) == 0;
	if (tls != (cfg->tls_cert != NULL) || !cfg->tls_cert != !cfg->tls_key)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "a tls+tcp:// listener needs --tls-cert and --tls-key, and they need one");
	if (cfg->http_listen && strncmp(cfg->http_listen, "http://", 7))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--http-listen %s: expected http://HOST:PORT",
				    cfg->http_listen);
	if (cfg->restore_from &&
	    (ret = bk_store_url_allowed(cfg->restore_from, cfg->sync_store, cfg->nsync_store, err)) < 0)
		return bk_error_prefix(err, ret, "--restore-from");
	if (cfg->sync_on_reset &&
	    (ret = bk_store_url_allowed(cfg->sync_on_reset, cfg->sync_store, cfg->nsync_store, err)) < 0)
		return bk_error_prefix(err, ret, "--sync-on-reset");
	if (cfg->exec_timeout_ms > cfg->exec_timeout_max_ms)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--exec-timeout is above --exec-timeout-max");
	if (cfg->process_ring == 0 || cfg->process_ring > cfg->process_ring_max ||
	    cfg->process_ring_budget < 2 * cfg->process_ring)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--process-ring must be 1 byte to --process-ring-max, and two of it fit in --process-ring-budget");
	if (cfg->exec_output_budget < 2 * cfg->exec_output)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL,
				    "--exec-output-budget is below two streams of --exec-output: no exec would fit");
	if (cfg->exec_output > cfg->exec_output_max)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--exec-output is above --exec-output-max");
	return egress_finish(cfg, err);
}

size_t bk_config_descriptors(const bk_config *cfg)
{
	return BK_FRONT_FIXED_FDS + cfg->max_connections + (cfg->http_listen ? BK_DOOR_MAX : 0) +
	       (cfg->preview_listen ? BK_DOOR_MAX + 2 * BK_PROXY_MAX : 0) + BK_EXEC_FDS * cfg->contexts +
	       BK_PROCESS_FDS * cfg->processes_max + cfg->uploads_max;
}

static void usage(FILE *out)
{
	static const struct { const char *flag, *arg, *help; } own[] = {
		{ "config", "FILE", "read settings from FILE first; flags win" },
		{ "help", "", "this help" },
		{ "version", "", "print boxkited's version" },
	};
	int width = 0;

	/* One column for "--name ARG", as wide as the widest. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(option_defs); i++) {
		int w = (int)(strlen(option_defs[i].name) + strlen(option_defs[i].arg)) + 3;
		width = w > width ? w : width;
	}
	fprintf(out, "Usage: boxkited [--config FILE] --listen URL [--listen URL]... [--key-file PATH] [options]\n\n"
		     "The boxkite sandbox sidecar. Options (also settable in the config file as name = value):\n");
	for (size_t i = 0; i < BK_ARRAY_SIZE(option_defs); i++)
		fprintf(out, "  --%s%s%-*s  %s\n", option_defs[i].name, option_defs[i].arg[0] ? " " : "",
			width - (int)strlen(option_defs[i].name) - 2 - (option_defs[i].arg[0] ? 1 : 0),
			option_defs[i].arg, option_defs[i].help);
	fprintf(out, "Command line only:\n");
	for (size_t i = 0; i < BK_ARRAY_SIZE(own); i++)
		fprintf(out, "  --%s%s%-*s  %s\n", own[i].flag, own[i].arg[0] ? " " : "",
			width - (int)strlen(own[i].flag) - 2 - (own[i].arg[0] ? 1 : 0), own[i].arg, own[i].help);
	fprintf(out, "\nSee boxkited(8).\n");
}

int bk_config_parse(bk_config *cfg, int argc, char **argv, bk_error **err)
{
	/* getopt_long returns an option's val: each row's is its index past OPT_ROW, so that no row
	 * can come back as '?' or ':' (63 and 58 once there were as many rows). */
	enum { OPT_CONFIG = 1000, OPT_HELP, OPT_VERSION, OPT_ROW = 2000 };
	struct option longopts[BK_ARRAY_SIZE(option_defs) + 4];
	bool listen_from_flags = false;
	size_t n = 0;
	int c, idx, ret;

	config_defaults(cfg);
	for (size_t i = 0; i < BK_ARRAY_SIZE(option_defs); i++)
		longopts[n++] = (struct option){ option_defs[i].name,
						 option_defs[i].type == OPT_FLAG ? no_argument : required_argument, NULL,
						 OPT_ROW + (int)i };
	longopts[n++] = (struct option){ "config", required_argument, NULL, OPT_CONFIG };
	longopts[n++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	longopts[n++] = (struct option){ "version", no_argument, NULL, OPT_VERSION };
	longopts[n] = (struct option){ 0 };

	/* First pass: only --config, --help, --version, so that flags override the file. */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		if (c == OPT_HELP) {
			usage(stdout);
			return 1;
		}
		if (c == OPT_VERSION) {
			printf("boxkited %s\n", BK_VERSION);
			return 1;
		}
		if (c == OPT_CONFIG && (ret = config_file_load(cfg, optarg, err)) < 0)
			return ret;
	}
	opterr = 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		if (c == '?' || c == ':') {
			usage(stderr);
			return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "bad command line");
		}
		/* --listen flags replace the file's list rather than adding to it. */
		size_t row = (size_t)(c - OPT_ROW);
		bool is_row = c >= OPT_ROW && row < BK_ARRAY_SIZE(option_defs);
		if (is_row && option_defs[row].type == OPT_LISTEN && !listen_from_flags) {
			listen_from_flags = true;
			for (size_t i = 0; i < cfg->nlisten; i++)
				free(cfg->listen[i]);
			cfg->nlisten = 0;
		}
		if (is_row && (ret = apply_option(cfg, &option_defs[row], optarg ? optarg : "true", err)) < 0)
			return ret;
	}
	if (optind < argc)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "unexpected argument '%s'", argv[optind]);
	if (cfg->nlisten == 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "no --listen URL given");
	/* No message larger than the largest legal one is read: each connection can hold that much
	 * unauthenticated, and no more (front.c). */
	if (!cfg->max_message || cfg->max_message > BK_REQUEST_MAX)
		cfg->max_message = BK_REQUEST_MAX;
	if (!cfg->decode_cap)
		cfg->decode_cap = 2 * cfg->max_message;
	return config_finish(cfg, err);
}
