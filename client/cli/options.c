/* bkctl's command line: the global options every command takes, the usage text, and the
 * values options take (durations, sizes, environment variables). */
#include "bkctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

const bkctl_option bkctl_global_options[] = {
	{ "url", 0, BKCTL_OPT_URL, "URL", "boxkited address (env BOXKITE_URL; default " BK_DEFAULT_URL ")" },
	{ "key-file", 0, BKCTL_OPT_KEY_FILE, "PATH", "key file (env BOXKITE_KEY_FILE)", BKCTL_COMPLETE_FILE },
	{ "key-id", 0, BKCTL_OPT_KEY_ID, "ID", "which key of the file (default: the first)" },
	{ "tls-cert", 0, BKCTL_OPT_TLS_CERT, "PATH",
	  "tls+tcp:// URLs: the server's certificate, pinned (env BOXKITE_TLS_CERT)", BKCTL_COMPLETE_FILE },
	{ "output", 'o', 'o', "FMT", "text (default) or json", BKCTL_COMPLETE_WORDS, "text json" },
	{ "timeout", 0, BKCTL_OPT_CALL_TIMEOUT, "S", "seconds to wait for an answer (default 30; exec: the command's timeout)" },
	{ "help", 'h', 'h', NULL, "this help" },
	{ 0 },
};

/* "-w, --workdir DIR", as --help shows an option. */
static void option_label(const bkctl_option *o, char *out, size_t size)
{
	char s[8] = "";

	if (o->short_name)
		snprintf(s, sizeof(s), "-%c, ", o->short_name);
	snprintf(out, size, "%s--%s%s%s", s, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

void bkctl_options_help(FILE *out, const bkctl_option *opts)
{
	enum { LABEL = 20 }; /* the text starts in column 23 */

	for (const bkctl_option *o = opts; o && o->name; o++) {
		char label[64];
		const char *line = o->help;

		if (!line)
			continue;
		option_label(o, label, sizeof(label));
		if (strlen(label) > LABEL)
			fprintf(out, "  %s\n%*s", label, LABEL + 3, "");
		else
			fprintf(out, "  %-*s ", LABEL, label);
		for (;;) {
			const char *nl = strchr(line, '\n');
			int len = nl ? (int)(nl - line) : (int)strlen(line);
			fprintf(out, "%.*s\n", len, line);
			if (!nl)
				break;
			line = nl + 1;
			fprintf(out, "%*s", LABEL + 3, "");
		}
	}
}

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
	if (cmd->options && cmd->options[0].name) {
		fprintf(out, "\nOptions:\n");
		bkctl_options_help(out, cmd->options);
	}
	if (cmd->notes[0])
		fprintf(out, "\n%s", cmd->notes);
	fprintf(out, "\nGlobal options (also after the command name):\n");
	bkctl_options_help(out, bkctl_global_options);
	fprintf(out, "\nSee bkctl(1).\n");
}

int bkctl_usage_error(const bkctl_command *cmd)
{
	fprintf(stderr, "Usage: bkctl %s [options]%s%s\n'bkctl %s --help' for more.\n", cmd->name,
		cmd->usage[0] ? " " : "", cmd->usage, cmd->name);
	return BKCTL_EXIT_USAGE;
}

bool bkctl_args_fit(const bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, int min, int max)
{
	int n = argc - optind;

	if (n < min)
		fprintf(stderr, "%s: missing argument\n", ctl->prog);
	else if (max >= 0 && n > max)
		fprintf(stderr, "%s: unexpected argument '%s'\n", ctl->prog, argv[optind + max]);
	else
		return true;
	bkctl_usage_error(cmd);
	return false;
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
	case BKCTL_OPT_URL:
		ctl->url = arg;
		return true;
	case BKCTL_OPT_KEY_FILE:
		ctl->key_file = arg;
		return true;
	case BKCTL_OPT_KEY_ID:
		ctl->key_id = arg;
		return true;
	case BKCTL_OPT_TLS_CERT:
		ctl->tls_cert = arg;
		return true;
	case 'o':
		if (strcmp(arg, "json") && strcmp(arg, "text")) {
			fprintf(stderr, "%s: -o %s: expected text or json\n", ctl->prog, arg);
			*bad = 1;
		}
		ctl->json = strcmp(arg, "json") == 0;
		return true;
	case BKCTL_OPT_CALL_TIMEOUT:
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

/* Rows of the command's options, then the global ones (a command's own row wins: exec's
 * --timeout is the command's), as getopt_long takes them, and its short options. */
static void getopt_tables(const bkctl_command *cmd, struct option *all, size_t n_all, char *shorts, size_t n_shorts)
{
	const bkctl_option *tables[] = { cmd ? cmd->options : NULL, bkctl_global_options };
	size_t n = 0, ns = 0;

	shorts[ns++] = '+';
	for (size_t t = 0; t < BK_ARRAY_SIZE(tables); t++) {
		for (const bkctl_option *o = tables[t]; o && o->name; o++) {
			if (n + 1 >= n_all || ns + 3 >= n_shorts)
				abort(); /* the tables are ours: a row too many is a bug caught by any run */
			all[n++] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL, o->val };
			if (o->short_name) {
				shorts[ns++] = o->short_name;
				if (o->arg)
					shorts[ns++] = ':';
			}
		}
	}
	all[n] = (struct option){ 0 };
	shorts[ns] = '\0';
}

int bkctl_getopt(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, int *want_help)
{
	struct option all[48];
	char shorts[96];

	getopt_tables(cmd, all, BK_ARRAY_SIZE(all), shorts, sizeof(shorts));
	/* Our own messages: they name the command and where its options are listed. */
	opterr = 0;
	for (;;) {
		int bad = 0, c = getopt_long(argc, argv, shorts, all, NULL);

		if (c == 'h') {
			*want_help = 1;
			if (cmd)
				bkctl_usage(stdout, cmd);
			return -1;
		}
		if (c == -1)
			return c;
		if (c == '?') {
			const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
			bool is_long = strncmp(word, "--", 2) == 0;

			if (!optopt)
				fprintf(stderr, "%s: unknown option '%s'\n", ctl->prog, word);
			else if (is_long && strchr(word, '='))
				fprintf(stderr, "%s: option '%.*s' takes no argument\n", ctl->prog,
					(int)(strchr(word, '=') - word), word);
			else if (is_long || (optopt < 256 && strchr(shorts + 1, optopt)))
				fprintf(stderr, "%s: option '%s' needs an argument\n", ctl->prog, word);
			else
				fprintf(stderr, "%s: unknown option '-%c'\n", ctl->prog, optopt);
			fprintf(stderr, "%s: '%s --help' lists its options\n", ctl->prog, ctl->prog);
			return '?';
		}
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
