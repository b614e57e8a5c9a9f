#include "envpolicy.h"

#include <string.h>

#include "cleanup.h"

/* Start-up hooks of the dynamic loader, shells and interpreters: a variable that makes a
 * program run code or load libraries it was not asked to. The command can still set any of
 * them itself; what this stops is a request smuggling them into a command a backend meant to be
 * fixed (a test runner, a linter). */
static const char *const denied_names[] = {
	"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "GLOBIGNORE",
	"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
	"NODE_REPL_EXTERNAL_MODULE", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
	"GCONV_PATH", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "NLSPATH", "TMPDIR_HOOK",
	"GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "OPENSSL_CONF", "OPENSSL_ENGINES",
};

static const char *const denied_prefixes[] = { "LD_", "MALLOC_", "BOXKITE_", "DYLD_" };

bool bk_env_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > 256 || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

const char *bk_env_denied(const char *name, size_t len, bool allow_path)
{
	if (!bk_env_name_valid(name, len))
		return "not a valid variable name";
	for (size_t i = 0; i < BK_ARRAY_SIZE(denied_prefixes); i++) {
		size_t plen = strlen(denied_prefixes[i]);
		if (len >= plen && memcmp(name, denied_prefixes[i], plen) == 0)
			return "loader, allocator and boxkite variables are not allowed";
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(denied_names); i++)
		if (strlen(denied_names[i]) == len && memcmp(name, denied_names[i], len) == 0)
			return "interpreter and shell start-up hooks are not allowed";
	if (len == 4 && memcmp(name, "PATH", 4) == 0 && !allow_path)
		return "PATH is fixed unless boxkited runs with --allow-path-override";
	return NULL;
}
