/* bkctl internals: the options every subcommand shares, and the subcommand table. */
#ifndef BKCTL_H
#define BKCTL_H

#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>

#include "boxkite/boxkite.h"

/* Exit codes (bkctl(1), EXIT STATUS). `exec` instead exits with the command's own status. */
enum {
	BKCTL_EXIT_OK = 0,
	BKCTL_EXIT_STATUS = 1,      /* the server answered with an error status */
	BKCTL_EXIT_USAGE = 2,       /* bad command line */
	BKCTL_EXIT_UNREACHABLE = 3, /* no answer: cannot connect, timed out, or a broken answer */
	BKCTL_EXIT_AUTH = 4,        /* authentication refused, or no key configured */
	BKCTL_EXIT_EXEC_TIMEOUT = 124, /* exec: the command timed out */
	BKCTL_EXIT_EXEC_FAILED = 125,  /* exec: bkctl or the server failed, the command did not run */
};

typedef struct bkctl {
	const char *url;
	const char *key_file;
	const char *key_id;
	int timeout_ms;
	bool json;
	const char *prog; /* "bkctl health" etc., for messages */
} bkctl;

typedef struct bkctl_command {
	const char *name;
	int (*run)(bkctl *ctl, const struct bkctl_command *cmd, int argc, char **argv);
	const char *summary;
	const char *usage; /* the rest of the usage line after "bkctl NAME" */
	const char *help;  /* the command's own options, one per line */
} bkctl_command;

/* Parse the global options that may appear anywhere before "--" (--url, --key-file, --key-id,
 * -o/--output, --timeout, --help) together with the command's own short/long options; getopt
 * semantics. Returns the option character, -1 at the end, or '?' on error (already reported). */
int bkctl_getopt(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, const char *shortopts,
		 const struct option *longopts, int *want_help);

/* Connect with the global options. On failure reports it, sets *exit_code and returns NULL. */
bk_client *bkctl_connect(bkctl *ctl, int *exit_code);

/* The exit code for a failed call, after reporting it on stderr. */
int bkctl_fail(const bkctl *ctl, const bk_status *st);

void bkctl_usage(FILE *out, const bkctl_command *cmd);

int bkctl_keygen(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_health(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_exec(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_doctor(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);

#endif
