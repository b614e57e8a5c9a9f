/* bkctl doctor: run a probe inside the sandbox and print the isolation actually in force,
 * checked against what DESIGN.md promises. The probe is plain POSIX sh reading /proc — no tool
 * the sandbox image might lack — and bkctl does the parsing. */
#include <stdlib.h>
#include <string.h>

#include "bkctl.h"
#include "cleanup.h"
#include "json.h"

static const char probe_script[] =
	"cat_() { while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done < \"$1\"; }\n"
	"echo '@@status'; cat_ /proc/self/status\n"
	"echo '@@pid'; echo \"$$ $PPID\"\n"
	"echo '@@pids'; for d in /proc/[0-9]*; do echo \"${d#/proc/}\"; done\n"
	"echo '@@netdev'; cat_ /proc/net/dev\n"
	"echo '@@route'; cat_ /proc/net/route\n"
	"echo '@@route6'; cat_ /proc/net/ipv6_route\n"
	"echo '@@cgroup'; cat_ /proc/self/cgroup\n"
	"echo '@@limits'; cat_ /proc/self/limits\n"
	"echo '@@mounts'; cat_ /proc/self/mountinfo\n";

/* The probe's sections, as its "@@name" lines name them. */
enum section { S_STATUS, S_PID, S_PIDS, S_NETDEV, S_ROUTE, S_ROUTE6, S_CGROUP, S_LIMITS, S_MOUNTS, N_SECTIONS };
static const char *const section_names[N_SECTIONS] = {
	[S_STATUS] = "status", [S_PID] = "pid",       [S_PIDS] = "pids",     [S_NETDEV] = "netdev",
	[S_ROUTE] = "route",   [S_ROUTE6] = "route6", [S_CGROUP] = "cgroup", [S_LIMITS] = "limits",
	[S_MOUNTS] = "mounts",
};

enum verdict { OK, WARN, FAIL };

struct report {
	bk_json j;
	bool json;
	int fails, warns;
};

/* Split the probe's output in place: a line "@@name" ends the section before it and starts
 * section name. sec[i] gets section i's lines (the first of that name), "" when there is none. */
static void split_sections(char *out, const char *sec[N_SECTIONS])
{
	for (int i = 0; i < N_SECTIONS; i++)
		sec[i] = NULL;
	for (char *line = out, *nl; line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (line[0] != '@' || line[1] != '@')
			continue;
		line[0] = '\0';
		if (nl)
			*nl = '\0';
		for (int i = 0; i < N_SECTIONS; i++)
			if (!sec[i] && strcmp(line + 2, section_names[i]) == 0)
				sec[i] = nl ? nl + 1 : "";
	}
	for (int i = 0; i < N_SECTIONS; i++)
		if (!sec[i])
			sec[i] = "";
}

/* The value after "Key:" in /proc/self/status text, whitespace-trimmed. */
static void status_field(const char *status, const char *key, char *out, size_t size)
{
	char pat[32];
	const char *p;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "%s:", key);
	out[0] = '\0';
	for (p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, pat, strlen(pat)) == 0) {
			p += strlen(pat);
			while (*p == ' ' || *p == '\t')
				p++;
			while (p[n] && p[n] != '\n' && n + 1 < size)
				n++;
			memcpy(out, p, n);
			out[n] = '\0';
			return;
		}
	}
}

static void row(struct report *r, const char *what, const char *value, enum verdict v, const char *expect)
{
	static const char *const names[] = { "ok", "WARN", "FAIL" };

	r->fails += v == FAIL;
	r->warns += v == WARN;
	if (r->json) {
		bk_json_begin_object(&r->j, NULL);
		bk_json_string(&r->j, "check", what);
		bk_json_string(&r->j, "value", value);
		bk_json_string(&r->j, "verdict", names[v]);
		bk_json_string(&r->j, "expected", expect);
		bk_json_end_object(&r->j);
		return;
	}
	printf("  %-14s %-4s  %s\n", what, names[v], value);
	if (v != OK)
		printf("  %-14s       expected: %s\n", "", expect);
}

static void check_identity(struct report *r, const char *status)
{
	char uid[64], gid[64], groups[128], value[300];
	unsigned u[4] = { 0 }, g[4] = { 0 };

	status_field(status, "Uid", uid, sizeof(uid));
	status_field(status, "Gid", gid, sizeof(gid));
	status_field(status, "Groups", groups, sizeof(groups));
	sscanf(uid, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]);
	sscanf(gid, "%u %u %u %u", &g[0], &g[1], &g[2], &g[3]);
	snprintf(value, sizeof(value), "uid %u/%u/%u gid %u/%u/%u groups [%s]", u[0], u[1], u[2], g[0], g[1], g[2],
		 groups);
	bool ok = u[0] != 0 && u[0] == u[1] && u[1] == u[2] && g[0] == g[1] && g[1] == g[2] && u[0] == g[0] &&
		  (groups[0] == '\0' || strtoul(groups, NULL, 10) == g[0]);
	row(r, "identity", value, ok ? OK : FAIL, "one unprivileged uid and gid (1001), no other groups");
}

static void check_caps(struct report *r, const char *status)
{
	static const char *const sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	char value[256] = "", v[64], nnp[16], sc[16];
	bool zero = true;

	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		status_field(status, sets[i], v, sizeof(v));
		zero &= v[0] && strtoull(v, NULL, 16) == 0;
		snprintf(value + strlen(value), sizeof(value) - strlen(value), "%s%s %s", i ? ", " : "", sets[i], v);
	}
	row(r, "capabilities", value, zero ? OK : FAIL, "every set empty, the bounding set included");
	status_field(status, "NoNewPrivs", nnp, sizeof(nnp));
	row(r, "no_new_privs", nnp, strcmp(nnp, "1") == 0 ? OK : FAIL, "1: no exec can gain privilege");
	status_field(status, "Seccomp", sc, sizeof(sc));
	snprintf(value, sizeof(value), "mode %s%s", sc, strcmp(sc, "2") == 0 ? " (filter)" : "");
	row(r, "seccomp", value, strcmp(sc, "2") == 0 ? OK : FAIL, "mode 2: a filter is loaded");
}

static void check_network(struct report *r, const char *netdev, const char *route, const char *route6)
{
	char value[512] = "interfaces:", name[64];
	bool only_lo = true;
	int routes = 0, lines = 0;

	/* /proc/net/dev: two header lines, then "  name: counters". */
	for (const char *p = netdev; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (++lines <= 2 || sscanf(p, " %63[^:]:", name) != 1)
			continue;
		only_lo &= strcmp(name, "lo") == 0;
		snprintf(value + strlen(value), sizeof(value) - strlen(value), " %s", name);
	}
	/* IPv4 main table: a header line, then routes; IPv6: routes over lo are loopback's own. */
	lines = 0;
	for (const char *p = route; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		routes += ++lines > 1 && *p != '\n';
	for (const char *p = route6; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > 3 && !(len >= 3 && strncmp(p + len - 3, " lo", 3) == 0))
			routes++;
	}
	snprintf(value + strlen(value), sizeof(value) - strlen(value), "; routes beyond loopback: %d", routes);
	row(r, "network", value, only_lo && routes == 0 ? OK : FAIL, "a fresh namespace: only lo, no routes out");
}

/* pid: "PID PPID" of the probe's shell: 2, a child of the exec's own init (pid 1). */
static void check_pidns(struct report *r, const char *pid, const char *pids)
{
	char value[128];
	int n = 0, self = 0, parent = 0;

	for (const char *p = pids; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		n += *p >= '0' && *p <= '9';
	if (sscanf(pid, "%d %d", &self, &parent) != 2)
		self = parent = 0;
	snprintf(value, sizeof(value), "the probe is pid %d, child of pid %d; %d process(es) visible", self, parent, n);
	row(r, "pid namespace", value, self == 2 && parent == 1 ? OK : FAIL,
	    "a namespace of its own (the probe is pid 2, under the exec's init): other commands are invisible");
}

/* With a cgroup namespace of its own, the exec sees its cgroup as "/" in every hierarchy. */
static void check_cgroup(struct report *r, const char *cgroup, const char *profile)
{
	char value[512];
	const char *mode = strstr(profile, "cgroup-");
	bool none = !mode || strncmp(mode, "cgroup-none", 11) == 0, rooted = cgroup && *cgroup;

	for (const char *p = cgroup; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t len = strcspn(p, "\n");
		rooted &= len >= 2 && strncmp(p + len - 2, ":/", 2) == 0;
	}
	if (none)
		snprintf(value, sizeof(value), "none: rlimits only");
	else
		snprintf(value, sizeof(value), "%.*s: %s", (int)strcspn(mode, ","), mode,
			 rooted ? "its own cgroup, seen as / (a cgroup namespace)" : "host cgroup paths visible");
	row(r, "cgroup", value, none ? WARN : rooted ? OK : FAIL,
	    "a per-exec cgroup with pids and memory limits, in a cgroup namespace of its own (none where no cgroup "
	    "hierarchy is writable)");
}

/* RLIMIT_NPROC is boxkited's --exec-nproc only where no pids cgroup limits the exec (it counts every
 * process of the uid on the node): with one, the cgroup is the limit, and nproc is what boxkited
 * inherited, shown as such and not judged. */
static void check_limits(struct report *r, const char *limits, const char *profile)
{
	static const char *const keys[][2] = { { "Max core file size", "core" },
					       { "Max open files", "nofile" },
					       { "Max file size", "fsize" },
					       { "Max processes", "nproc" } };
	const char *mode = profile ? strstr(profile, "cgroup-") : NULL;
	bool pids_cgroup = mode && strncmp(mode, "cgroup-none", 11) != 0;
	char value[256] = "";
	bool core0 = false, bounded = true;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *p = strstr(limits, keys[i][0]);
		bool nproc = i == 3;
		char soft[32] = "?";
		if (p)
			sscanf(p + strlen(keys[i][0]), " %31s", soft);
		if (i == 0)
			core0 = strcmp(soft, "0") == 0;
		else if (!(nproc && pids_cgroup))
			bounded &= strcmp(soft, "unlimited") != 0;
		snprintf(value + strlen(value), sizeof(value) - strlen(value), "%s%s %s%s", i ? ", " : "", keys[i][1],
			 soft, nproc && pids_cgroup ? " (inherited: the pids cgroup limits processes)" : "");
	}
	row(r, "rlimits", value, core0 && bounded ? OK : FAIL,
	    "core 0; nofile, fsize bounded; nproc bounded where no pids cgroup is the limit (--exec-nproc)");
}

/* Whether a mountinfo line after p mounts on mp again: then p's mount is covered, and only the
 * last one there (mountinfo is in mount order) is what a process sees. */
static bool mounted_over(const char *p, const char *mp)
{
	char later[512];

	for (p = strchr(p, '\n'); p && *++p; p = strchr(p, '\n'))
		if (sscanf(p, "%*s %*s %*s %*s %511s", later) == 1 && strcmp(later, mp) == 0)
			return true;
	return false;
}

/* mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ..." — report every writable mount once:
 * the exec's own /proc is mounted over the sandbox's, and only the one on top counts. */
static void check_mounts(struct report *r, const char *mounts)
{
	static const char *const expected_rw[] = { "/workspace",  "/tmp",      "/home/sandbox", "/dev/shm",
						   "/dev/pts",    "/proc",     "/dev/null",     "/dev/zero",
						   "/dev/full",   "/dev/random", "/dev/urandom", "/dev/tty" };
	char value[1024] = "writable:", mp[512], opts[256];
	enum verdict v = OK;

	for (const char *p = mounts; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		bool expected = false;
		if (sscanf(p, "%*s %*s %*s %*s %511s %255s", mp, opts) != 2 || strncmp(opts, "rw", 2) != 0 ||
		    mounted_over(p, mp))
			continue;
		for (size_t i = 0; i < sizeof(expected_rw) / sizeof(expected_rw[0]); i++) {
			size_t n = strlen(expected_rw[i]);
			expected |= strncmp(mp, expected_rw[i], n) == 0 && (mp[n] == '\0' || mp[n] == '/');
		}
		if (strcmp(mp, "/") == 0)
			v = FAIL;
		else if (!expected && v == OK)
			v = WARN;
		snprintf(value + strlen(value), sizeof(value) - strlen(value), " %s%s", mp, expected ? "" : "(!)");
	}
	row(r, "mounts", value, v,
	    "/ read-only; writable only /workspace, /tmp, /home/sandbox, /dev/shm (and /proc, /dev/pts, the device nodes)");
}

int bkctl_doctor(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	bk_exec_request rq = { .shell = probe_script, .timeout_ms = 10000 };
	struct report r = { .j = { .out = stdout } };
	bk_exec_result res;
	bk_status st;
	bk_client *c;
	_cleanup_free_ char *out = NULL;
	const char *sec[N_SECTIONS];
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1)
		return BKCTL_EXIT_USAGE;
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	r.json = ctl->json;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_exec(c, &rq, &res, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (res.exit_code != 0 || res.signal || res.timed_out) {
		fprintf(stderr, "%s: the probe failed (exit %d, signal %d): %.*s\n", ctl->prog, res.exit_code, res.signal,
			(int)res.stderr_len, (const char *)res.stderr_data);
		bk_exec_result_free(&res);
		return BKCTL_EXIT_STATUS;
	}
	out = strndup((const char *)res.stdout_data, res.stdout_len);
	if (!out) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		bk_exec_result_free(&res);
		return BKCTL_EXIT_STATUS;
	}
	split_sections(out, sec);

	if (r.json) {
		bk_json_begin_object(&r.j, NULL);
		bk_json_string(&r.j, "isolation_profile", res.isolation_profile);
		bk_json_begin_array(&r.j, "checks");
	} else {
		printf("boxkite doctor: the isolation a command in the sandbox runs with\n"
		       "  profile        %s\n", res.isolation_profile);
	}
	check_identity(&r, sec[S_STATUS]);
	check_caps(&r, sec[S_STATUS]);
	check_network(&r, sec[S_NETDEV], sec[S_ROUTE], sec[S_ROUTE6]);
	check_pidns(&r, sec[S_PID], sec[S_PIDS]);
	check_cgroup(&r, sec[S_CGROUP], res.isolation_profile);
	check_limits(&r, sec[S_LIMITS], res.isolation_profile);
	check_mounts(&r, sec[S_MOUNTS]);
	if (r.json) {
		bk_json_end_array(&r.j);
		bk_json_int(&r.j, "failed", r.fails);
		bk_json_int(&r.j, "warnings", r.warns);
		bk_json_end_object(&r.j);
	} else {
		printf("%s: %d failed, %d warning(s)\n", r.fails ? "NOT ISOLATED" : "isolated", r.fails, r.warns);
	}
	bk_exec_result_free(&res);
	return r.fails ? BKCTL_EXIT_STATUS : BKCTL_EXIT_OK;
}
