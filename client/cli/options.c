/* bkctl's command line: the global options every command takes, the usage text, and the
 * values options take (durations, sizes, environment variables). */
#include "bkctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_URL = 1000, OPT_KEY_FILE, OPT_KEY_ID, OPT_TIMEOUT, OPT_HELP, OPT_TLS_CERT };

static const struct option global_longopts[] = {
	{ "url", required_argument, NULL, OPT_URL },
	{ "key-file", required_argument, NULL, OPT_KEY_FILE },
	{ "key-id", required_argument, NULL, OPT_KEY_ID },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "output", required_argument, NULL, 'o' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "help", no_argument, NULL, OPT_HELP },
};

const char bkctl_global_help[] =
	"Global options (also after the command name):\n"
	"  --url URL            boxkited address (env BOXKITE_URL; default " BK_DEFAULT_URL ")\n"
	"  --key-file PATH      key file (env BOXKITE_KEY_FILE)\n"
	"  --key-id ID          which key of the file (default: the first)\n"
	"  --tls-cert PATH      tls+tcp:// URLs: the server's certificate, pinned (env BOXKITE_TLS_CERT)\n"
	"  -o, --output FMT     text (default) or json\n"
	"  --timeout S          seconds to wait for an answer (default 30; exec: the command's timeout)\n"
	"  -h, --help           this help\n";

int bkctl_key(const bkctl *ctl, const char *what, bk_keyring **ring, const bk_key **key)
{
	bk_error *err = NULL;

	if (!ctl->key_file) {
		fprintf(stderr, "%s: %s: --key-file PATH or BOXKITE_KEY_FILE\n", ctl->prog, what);
		return BKCTL_EXIT_AUTH;
	}
	if (bk_keyring_load(ctl->key_file, ring, &err) < 0) {
		fprintf(stderr, "%s: %s\n", ctl->prog, bk_error_msg(err));
		bk_error_free(err);
		return BKCTL_EXIT_AUTH;
	}
	*key = ctl->key_id ? bk_keyring_find(*ring, ctl->key_id) : &(*ring)->keys[0];
	if (!*key) {
		fprintf(stderr, "%s: no key '%s' in %s\n", ctl->prog, ctl->key_id, ctl->key_file);
		bk_keyring_free(*ring);
		*ring = NULL;
		return BKCTL_EXIT_AUTH;
	}
	return 0;
}

void bkctl_usage(FILE *out, const bkctl_command *cmd)
{
	fprintf(out, "Usage: bkctl %s [options]%s%s\n\n%s\n", cmd->name, cmd->usage[0] ? " " : "", cmd->usage,
		cmd->summary);
	if (cmd->options[0])
		fprintf(out, "\nOptions:\n%s", cmd->options);
	if (cmd->notes[0])
		fprintf(out, "\n%s", cmd->notes);
	fprintf(out, "\n%s\nSee bkctl(1).\n", bkctl_global_help);
}

int bkctl_parse_seconds(const char *s, uint32_t *ms)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !(v > 0) || v > 86400)
		return -1;
	/* Rounded up: a timeout shorter than a millisecond is the shortest there is, never none. */
	*ms = (uint32_t)(v * 1000);
	if (*ms < v * 1000)
		(*ms)++;
	return 0;
}

/* Apply one global option; false if it is not one. */
static bool global_option(bkctl *ctl, int c, const char *arg, int *bad)
{
	uint32_t ms = 0;

	switch (c) {
	case OPT_URL:
		ctl->url = arg;
		return true;
	case OPT_KEY_FILE:
		ctl->key_file = arg;
		return true;
	case OPT_KEY_ID:
		ctl->key_id = arg;
		return true;
	case OPT_TLS_CERT:
		ctl->tls_cert = arg;
		return true;
	case 'o':
		if (strcmp(arg, "json") && strcmp(arg, "text")) {
			fprintf(stderr, "%s: -o %s: expected text or json\n", ctl->prog, arg);
			*bad = 1;
		}
		ctl->json = strcmp(arg, "json") == 0;
		return true;
	case OPT_TIMEOUT:
		if (bkctl_parse_seconds(arg, &ms) < 0) {
			fprintf(stderr, "%s: --timeout %s: expected seconds (0 < S <= 86400)\n", ctl->prog, arg);
			*bad = 1;
		}
		ctl->timeout_ms = (int)ms;
		return true;
	default:
		return false;
	}
}

int bkctl_getopt(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, const char *shortopts,
		 const struct option *longopts, int *want_help)
{
	struct option all[32];
	char shorts[64];
	size_t n = 0;

	for (const struct option *o = longopts; o && o->name && n < 20; o++)
		all[n++] = *o;
	for (size_t i = 0; i < sizeof(global_longopts) / sizeof(global_longopts[0]); i++)
		all[n++] = global_longopts[i];
	all[n] = (struct option){ 0 };
	snprintf(shorts, sizeof(shorts), "+%sho:", shortopts ? shortopts : "");

	for (;;) {
		int bad = 0, c = getopt_long(argc, argv, shorts, all, NULL);

		if (c == 'h' || c == OPT_HELP) {
			*want_help = 1;
			if (cmd)
				bkctl_usage(stdout, cmd);
			return -1;
		}
		if (c == -1 || c == '?' || c == ':')
			return c;
		if (!global_option(ctl, c, optarg, &bad))
			return c;
		if (bad)
			return '?';
	}
}

int bkctl_parse_env(const bkctl *ctl, char *arg, bk_env_var *env, size_t *n)
{
	char *eq = strchr(arg, '=');

	if (!eq) {
		fprintf(stderr, "%s: -e %s: expected NAME=VALUE\n", ctl->prog, arg);
		return -1;
	}
	*eq = '\0';
	env[(*n)++] = (bk_env_var){ .name = arg, .value = eq + 1 };
	return 0;
}

int bkctl_parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -1;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	default: break;
	}
	if (*end || errno || v == 0 || v > (1ull << 40) >> shift)
		return -1;
	*bytes = (uint64_t)v << shift;
	return 0;
}
