/* The shells' completion of bkctl (bkctl completion bash | zsh), printed from the command table
 * (client/cli/main.c) and the global options: the rows bkctl_getopt parses and --help prints, so
 * that what a shell offers is what bkctl takes. */
#include <errno.h>
#include <string.h>

#include "bkctl.h"

/* A word in single quotes for sh (bash and zsh alike). */
static void put_quoted(FILE *out, const char *s)
{
	fputc('\'', out);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", out);
		else
			fputc(*s, out);
	}
	fputc('\'', out);
}

/* The first line of a help text. */
static int first_line_len(const char *s)
{
	const char *nl = strchr(s, '\n');

	return nl ? (int)(nl - s) : (int)strlen(s);
}

/* --- bash ------------------------------------------------------------------------------------- */

/* The completion of an option's argument, as the bash function's table holds it: "file",
 * "words:A B C", "command", or "none". */
static void bash_kind(FILE *out, enum bkctl_complete kind, const char *words)
{
	switch (kind) {
	case BKCTL_COMPLETE_FILE:
		put_quoted(out, "file");
		break;
	case BKCTL_COMPLETE_WORDS: {
		char w[256];
		snprintf(w, sizeof(w), "words:%s", words);
		put_quoted(out, w);
		break;
	}
	case BKCTL_COMPLETE_COMMAND:
		put_quoted(out, "command");
		break;
	default:
		put_quoted(out, "none");
		break;
	}
}

static void bash_options(FILE *out, const char *key, const bkctl_option *opts)
{
	fprintf(out, "\t[%s]=", key);
	fputc('\'', out);
	for (const bkctl_option *o = opts; o && o->name; o++) {
		if (o->short_name)
			fprintf(out, "-%c ", o->short_name);
		fprintf(out, "--%s ", o->name);
	}
	fputs("'\n", out);
}

static void bash_arguments(FILE *out, const char *key, const bkctl_option *opts)
{
	for (const bkctl_option *o = opts; o && o->name; o++) {
		if (!o->arg)
			continue;
		fprintf(out, "\t[%s:--%s]=", key, o->name);
		bash_kind(out, o->complete, o->words);
		fputc('\n', out);
		if (o->short_name) {
			fprintf(out, "\t[%s:-%c]=", key, o->short_name);
			bash_kind(out, o->complete, o->words);
			fputc('\n', out);
		}
	}
}

static void print_bash(FILE *out, const bkctl_command *cmds, size_t n)
{
	fputs("# bash completion for bkctl: printed by 'bkctl completion bash' from bkctl's command table,\n"
	      "# the one its --help is printed from.\n"
	      "declare -gA _bkctl_options=(\n",
	      out);
	bash_options(out, "_", bkctl_global_options);
	for (size_t i = 0; i < n; i++)
		bash_options(out, cmds[i].name, cmds[i].options);
	fputs(")\n# What completes the argument of each option that takes one ('_' stands for the global ones).\n"
	      "declare -gA _bkctl_arguments=(\n",
	      out);
	bash_arguments(out, "_", bkctl_global_options);
	for (size_t i = 0; i < n; i++)
		bash_arguments(out, cmds[i].name, cmds[i].options);
	fputs(")\n# What completes each command's operands.\ndeclare -gA _bkctl_operands=(\n", out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "\t[%s]=", cmds[i].name);
		bash_kind(out, cmds[i].operands, cmds[i].operand_words);
		fputc('\n', out);
	}
	fputs(")\n_bkctl_commands=", out);
	{
		char names[1024] = "";
		for (size_t i = 0; i < n; i++) {
			strncat(names, cmds[i].name, sizeof(names) - strlen(names) - 2);
			strncat(names, " ", sizeof(names) - strlen(names) - 1);
		}
		put_quoted(out, names);
	}
	fputs("\n\n"
	      "# COMPREPLY for a word of kind $1 (as the tables hold it) that starts with $2.\n"
	      "_bkctl_complete_kind() {\n"
	      "\tcase $1 in\n"
	      "\tfile) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- \"$2\") ;;\n"
	      "\twords:*) mapfile -t COMPREPLY < <(compgen -W \"${1#words:}\" -- \"$2\") ;;\n"
	      "\tcommand) mapfile -t COMPREPLY < <(compgen -W \"$_bkctl_commands\" -- \"$2\") ;;\n"
	      "\t*) COMPREPLY=() ;;\n"
	      "\tesac\n"
	      "}\n\n"
	      "_bkctl() {\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} cmd= operands=0 i w kind\n"
	      "\tCOMPREPLY=()\n"
	      "\t# The words before the cursor: the command, options and their arguments, operands.\n"
	      "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "\t\tw=${COMP_WORDS[i]}\n"
	      "\t\tif [[ $w == -- ]]; then\n"
	      "\t\t\t[[ -n $cmd ]] && return 0 # the command line of exec or start: nothing of ours\n"
	      "\t\telif [[ $w == -?* && $w != *=* && $operands == 0 ]]; then\n"
	      "\t\t\tif [[ -n ${_bkctl_arguments[$cmd:$w]+x} || -n ${_bkctl_arguments[_:$w]+x} ]]; then\n"
	      "\t\t\t\t((i++)) # its argument\n"
	      "\t\t\tfi\n"
	      "\t\telif [[ -z $cmd ]]; then\n"
	      "\t\t\tcmd=$w\n"
	      "\t\telse\n"
	      "\t\t\t((operands++))\n"
	      "\t\tfi\n"
	      "\tdone\n"
	      "\t# The argument of the option before the cursor.\n"
	      "\tw=${COMP_WORDS[COMP_CWORD-1]}\n"
	      "\tif ((COMP_CWORD > 1)) && [[ $w == -?* ]]; then\n"
	      "\t\tkind=${_bkctl_arguments[$cmd:$w]-${_bkctl_arguments[_:$w]-}}\n"
	      "\t\tif [[ -n $kind ]]; then\n"
	      "\t\t\t_bkctl_complete_kind \"$kind\" \"$cur\"\n"
	      "\t\t\treturn 0\n"
	      "\t\tfi\n"
	      "\tfi\n"
	      "\tif [[ $cur == -* ]]; then\n"
	      "\t\tmapfile -t COMPREPLY < <(compgen -W \"${_bkctl_options[$cmd]-} ${_bkctl_options[_]}\" -- \"$cur\")\n"
	      "\telif [[ -z $cmd ]]; then\n"
	      "\t\t_bkctl_complete_kind command \"$cur\"\n"
	      "\telse\n"
	      "\t\tkind=${_bkctl_operands[$cmd]-none}\n"
	      "\t\t# A list of words is the first operand's (a subcommand, a command's name).\n"
	      "\t\t[[ $kind == words:* || $kind == command ]] && ((operands > 0)) && kind=none\n"
	      "\t\t[[ $cur == :* ]] && kind=none # a sandbox path: nothing bkctl can list here\n"
	      "\t\t_bkctl_complete_kind \"$kind\" \"$cur\"\n"
	      "\tfi\n"
	      "\treturn 0\n"
	      "}\n"
	      "complete -F _bkctl bkctl\n",
	      out);
}

/* --- zsh -------------------------------------------------------------------------------------- */

/* s with what _arguments gives a meaning to inside a description escaped. */
static void zsh_escaped(FILE *out, const char *s, int len)
{
	for (int i = 0; i < len && s[i]; i++) {
		if (strchr("[]:\\", s[i]))
			fputc('\\', out);
		if (s[i] == '\'')
			fputs("'\\''", out);
		else
			fputc(s[i], out);
	}
}

static void zsh_action(FILE *out, enum bkctl_complete kind, const char *words)
{
	switch (kind) {
	case BKCTL_COMPLETE_FILE:
		fputs("_files", out);
		break;
	case BKCTL_COMPLETE_WORDS:
		fprintf(out, "(%s)", words);
		break;
	case BKCTL_COMPLETE_COMMAND:
		fputs("_bkctl_commands", out);
		break;
	default:
		fputs(" ", out);
		break;
	}
}

/* One _arguments spec per name of an option, a line each: '*--timeout[seconds ...]:S: '. Every
 * option may be given again (-e, -x are repeatable; of the others, bkctl takes the last). An
 * alias has the text of the row it stands for. */
static void zsh_options(FILE *out, const char *indent, const bkctl_option *opts)
{
	for (const bkctl_option *o = opts; o && o->name; o++) {
		const char *help = o->help;

		for (const bkctl_option *p = opts; !help && p->name; p++) {
			if (p->val == o->val && p->help)
				help = p->help;
		}
		if (!help)
			help = "";
		for (int pass = 0; pass < (o->short_name ? 2 : 1); pass++) {
			fprintf(out, "%s'*", indent);
			if (pass == 0)
				fprintf(out, "--%s[", o->name);
			else
				fprintf(out, "-%c[", o->short_name);
			zsh_escaped(out, help, first_line_len(help));
			fputc(']', out);
			if (o->arg) {
				fputc(':', out);
				zsh_escaped(out, o->arg, (int)strlen(o->arg));
				fputc(':', out);
				zsh_action(out, o->complete, o->words);
			}
			fputs("'\n", out);
		}
	}
}

static void print_zsh(FILE *out, const bkctl_command *cmds, size_t n)
{
	fputs("#compdef bkctl\n"
	      "# zsh completion for bkctl: printed by 'bkctl completion zsh' from bkctl's command table,\n"
	      "# the one its --help is printed from.\n\n"
	      "_bkctl_commands() {\n"
	      "\tlocal -a commands=(\n",
	      out);
	for (size_t i = 0; i < n; i++) {
		char spec[256];
		snprintf(spec, sizeof(spec), "%s:%s", cmds[i].name, cmds[i].summary);
		fputs("\t\t", out);
		put_quoted(out, spec);
		fputc('\n', out);
	}
	fputs("\t)\n\t_describe -t commands 'bkctl command' commands\n}\n\n"
	      "_bkctl() {\n"
	      "\tlocal curcontext=$curcontext state line\n"
	      "\tlocal -a globals=(\n",
	      out);
	zsh_options(out, "\t\t", bkctl_global_options);
	fputs("\t)\n"
	      "\t_arguments -C -S $globals ': :_bkctl_commands' '*:: :->command' && return\n"
	      "\tcurcontext=${curcontext%:*:*}:bkctl-$words[1]:\n"
	      "\tlocal -a opts\n"
	      "\tcase $words[1] in\n",
	      out);
	for (size_t i = 0; i < n; i++) {
		const bkctl_command *c = &cmds[i];

		fprintf(out, "\t%s)\n\t\topts=(\n", c->name);
		zsh_options(out, "\t\t\t", c->options);
		fputs("\t\t)\n\t\t_arguments -S $globals $opts ", out);
		switch (c->operands) {
		case BKCTL_COMPLETE_FILE:
			fputs("'*:file:_files'", out);
			break;
		case BKCTL_COMPLETE_WORDS:
			fprintf(out, "'1:%s:(%s)'", c->name, c->operand_words);
			break;
		case BKCTL_COMPLETE_COMMAND:
			fputs("'1:command:_bkctl_commands'", out);
			break;
		default:
			/* Nothing to offer (a rest-arguments spec with no action would hide the options). */
			break;
		}
		fputs("\n\t\t;;\n", out);
	}
	fputs("\tesac\n}\n\n"
	      "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n"
	      "\t_bkctl \"$@\"\n"
	      "else\n"
	      "\tcompdef _bkctl bkctl\n"
	      "fi\n",
	      out);
}

int bkctl_completion_script(FILE *out, const char *shell, const bkctl_command *cmds, size_t n)
{
	if (strcmp(shell, "bash") == 0)
		print_bash(out, cmds, n);
	else if (strcmp(shell, "zsh") == 0)
		print_zsh(out, cmds, n);
	else
		return -EINVAL;
	return 0;
}
