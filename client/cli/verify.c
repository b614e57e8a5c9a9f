/* bkctl verify: the seeds' three network-isolation layers, each checked from the vantage point
 * that tests it, and saying which layer that was (SECURITY.md):
 *
 *   layer 1  a fresh, empty network namespace per exec   -- from inside an exec: only lo, no
 *            route, the sidecar's own address and port unreachable, its ipc socket invisible,
 *            no egress proxy listening for an exec granted nothing; and its one configured
 *            exception, the egress ceiling (keyed Health), reported;
 *   layer 2  the pod's NetworkPolicy                      -- from the sidecar's network
 *            namespace, which bkctl cannot enter: printed as the kubectl commands to run (a
 *            sidecar in local mode has no pod and so no such layer: it says that);
 *   layer 3  the sidecar's own authentication             -- against the sidecar's port without
 *            the key: Health answers (probes), anything else is refused.
 *
 * It contacts nothing but the sidecar it is pointed at, and from inside the exec only the
 * sidecar's own address and the exec's loopback. The cloud metadata endpoint, the classic
 * target, is never dialled: its checks are printed, for the operator to run on their cluster.
 *
 * Exit status: 0 when every check it can run passed; 1 when one failed or hung; 5
 * (BKCTL_EXIT_INCOMPLETE) when none failed but one was skipped for want of a key that can run
 * it: a check not run is not a pass. The printed ones (NOT RUN HERE) are the operator's. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "bkctl.h"
#include "cleanup.h"
#include "json.h"
#include "keys.h"

/* NOT_RUN: printed for the operator to run where it belongs; SKIPPED: bkctl could have run it
 * with the right key; HANG: it did not finish in its time (a failure); NO_LAYER: the layer does
 * not exist where the sidecar runs. */
enum verdict { PASS, FAIL, WARN, NOT_RUN, SKIPPED, HANG, NO_LAYER };
static const char *const verdict_names[] = { "PASS", "FAIL", "WARN", "NOT RUN HERE", "SKIPPED", "HANG",
					     "NO SUCH LAYER" };

/* The layer-one probe's own time: everything in it fails at once when layer one holds. */
#define PROBE_TIMEOUT_MS 20000

struct report {
	bk_json j;
	bool json;
	int fails;
	bk_egress_ceiling ceiling; /* what the sidecar may grant, for -o json's egress_ceiling */
	bool ceiling_known;
	int skipped;
};

/* The probe: POSIX sh and /proc (every image has them), bash or python3 only to try a connect.
 * BK_HOST/BK_PORT: the sidecar's address as the client dials it; BK_SOCK: its ipc socket. */
static const char layer1_script[] =
	"n=0; while IFS= read -r l; do n=$((n+1)); [ $n -gt 2 ] || continue; l=${l%%:*}; echo \"iface ${l##* }\"; "
	"done < /proc/net/dev\n"
	"n=0; while IFS= read -r l; do n=$((n+1)); [ $n -gt 1 ] && echo \"route4 $l\"; done < /proc/net/route\n"
	"while read -r a b c d e f g h i dev; do [ \"$dev\" = lo ] || echo \"route6 $a $dev\"; "
	"done < /proc/net/ipv6_route\n"
	"lo=127.0.0.1; [ \"$BK_HOST\" = $lo ] && lo=\n"
	"for h in ${BK_HOST:+$BK_HOST $lo}; do\n"
	"  if command -v bash >/dev/null 2>&1; then\n"
	"    if r=$(bash -c 'exec 3<>\"/dev/tcp/$1/$2\"' _ \"$h\" \"$BK_PORT\" 2>&1); then echo \"connect $h:$BK_PORT open\";\n"
	"    else echo \"connect $h:$BK_PORT refused ${r##*: }\"; fi\n"
	"  elif command -v python3 >/dev/null 2>&1; then\n"
	"    python3 -c 'import socket,sys\ntry:\n socket.create_connection((sys.argv[1],int(sys.argv[2])),3); "
	"print(\"connect %s:%s open\"%tuple(sys.argv[1:]))\nexcept OSError as e: print(\"connect %s:%s refused %s\"%"
	"(sys.argv[1],sys.argv[2],e.strerror))' \"$h\" \"$BK_PORT\"\n"
	"  else echo \"connect $h:$BK_PORT untested (no bash or python3 in the sandbox)\"; fi\n"
	"done\n"
	"if [ -n \"$BK_SOCK\" ]; then if [ -e \"$BK_SOCK\" ]; then echo \"socket visible\"; else echo \"socket absent\"; fi; fi\n"
	"if command -v bash >/dev/null 2>&1; then\n"
	"  if bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128' 2>/dev/null; then echo \"proxy open\"; else echo \"proxy closed\"; fi\n"
	"fi\n";

static void check(struct report *r, int layer, const char *vantage, const char *what, enum verdict v,
		  const char *detail)
{
	if (v == FAIL || v == HANG)
		r->fails++;
	if (v == SKIPPED)
		r->skipped++;
	if (r->json) {
		bk_json_begin_object(&r->j, NULL);
		bk_json_int(&r->j, "layer", layer);
		bk_json_string(&r->j, "vantage", vantage);
		bk_json_string(&r->j, "check", what);
		bk_json_string(&r->j, "verdict", verdict_names[v]);
		bk_json_string(&r->j, "detail", detail);
		bk_json_end_object(&r->j);
	} else {
		printf("  %-12s %s: %s\n", verdict_names[v], what, detail);
	}
}

static void heading(struct report *r, int layer, const char *name, const char *vantage)
{
	if (!r->json)
		printf("layer %d: %s -- vantage point: %s\n", layer, name, vantage);
}

/* HOST and PORT of a tcp:// or tls+tcp:// URL ([v6] brackets removed), or the path of ipc://. */
static void url_parts(const char *url, char *host, size_t hsize, char *port, size_t psize, char *sock, size_t ssize)
{
	const char *p = strstr(url, "://"), *colon;

	host[0] = port[0] = sock[0] = '\0';
	if (!p)
		return;
	if (strncmp(url, "ipc://", 6) == 0) {
		snprintf(sock, ssize, "%s", url + 6);
		return;
	}
	p += 3;
	colon = strrchr(p, ':');
	if (!colon)
		return;
	if (*p == '[' && colon > p && colon[-1] == ']')
		snprintf(host, hsize, "%.*s", (int)(colon - p - 2), p + 1);
	else
		snprintf(host, hsize, "%.*s", (int)(colon - p), p);
	snprintf(port, psize, "%s", colon + 1);
	if (strcmp(host, "0.0.0.0") == 0 || host[0] == '\0')
		snprintf(host, hsize, "127.0.0.1");
}

static void layer1(struct report *r, bkctl *ctl)
{
	static const char vantage[] = "inside an exec";
	char host[256], port[16], sock[4096], detail[512];
	bk_exec_result res = { 0 };
	bk_status st;
	bk_client *c;
	int code;

	heading(r, 1, "a fresh empty network namespace per exec", vantage);
	if (!ctl->key_file) {
		check(r, 1, vantage, "exec", SKIPPED, "needs the key (--key-file): an exec is keyed; not run, so not passed");
		return;
	}
	url_parts(ctl->url, host, sizeof(host), port, sizeof(port), sock, sizeof(sock));
	bk_env_var env[] = { { "BK_HOST", host }, { "BK_PORT", port }, { "BK_SOCK", sock } };
	bk_exec_request rq = { .shell = layer1_script, .env = env, .n_env = BK_ARRAY_SIZE(env),
			       .timeout_ms = PROBE_TIMEOUT_MS };
	if (!(c = bkctl_connect(ctl, &code))) {
		check(r, 1, vantage, "exec", FAIL, "cannot reach the sidecar");
		return;
	}
	code = bk_exec(c, &rq, &res, &st);
	bk_client_close(c);
	if (code == BK_PERMISSION_DENIED && st.detail == BK_DETAIL_CLAIM_KEY) {
		check(r, 1, vantage, "exec", SKIPPED,
		      "the key is a warm pool's claim key, which runs nothing: claim the sandbox (bkctl reset --new-key) "
		      "and verify with the tenant's key");
		return;
	}
	/* Every step of the probe fails at once when layer one holds (no interface to send on, no
	 * route); one that waits -- a connect whose packets went somewhere -- is the finding. */
	if ((code == BK_OK && res.timed_out) || code == BK_DEADLINE_EXCEEDED) {
		snprintf(detail, sizeof(detail),
			 "the probe did not finish in %d s: something in the exec waited instead of failing at once (a "
			 "connect to %s, most likely): packets may leave its network namespace",
			 PROBE_TIMEOUT_MS / 1000, host[0] ? host : "the sidecar");
		check(r, 1, vantage, "exec", HANG, detail);
		bk_exec_result_free(&res);
		return;
	}
	if (code != BK_OK || res.exit_code != 0) {
		snprintf(detail, sizeof(detail), "the probe did not run: %.400s", code != BK_OK ? st.message : "exit status");
		check(r, 1, vantage, "exec", FAIL, detail);
		bk_exec_result_free(&res);
		return;
	}
	_cleanup_free_ char *out = strndup((const char *)res.stdout_data, res.stdout_len);
	bk_exec_result_free(&res);
	if (!out)
		return;
	bool only_lo = true, saw_lo = false, no_route = true, connects = false, untested = false, sock_seen = false;
	const char *proxy = NULL;
	char ifaces[256] = "", routes[256] = "", conn[512] = "";
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		size_t n;
		if (strncmp(line, "iface ", 6) == 0) {
			saw_lo = saw_lo || strcmp(line + 6, "lo") == 0;
			only_lo = only_lo && strcmp(line + 6, "lo") == 0;
			n = strlen(ifaces);
			snprintf(ifaces + n, sizeof(ifaces) - n, "%s%s", n ? " " : "", line + 6);
		} else if (strncmp(line, "route", 5) == 0) {
			no_route = false;
			n = strlen(routes);
			snprintf(routes + n, sizeof(routes) - n, "%s%s", n ? "; " : "", line);
		} else if (strncmp(line, "connect ", 8) == 0) {
			connects = connects || strstr(line, " open");
			untested = untested || strstr(line, " untested");
			n = strlen(conn);
			snprintf(conn + n, sizeof(conn) - n, "%s%s", n ? "; " : "", line + 8);
		} else if (strcmp(line, "socket visible") == 0) {
			sock_seen = true;
		} else if (strcmp(line, "proxy open") == 0 || strcmp(line, "proxy closed") == 0) {
			proxy = line + 6;
		}
	}
	check(r, 1, vantage, "interfaces", saw_lo && only_lo ? PASS : FAIL, ifaces[0] ? ifaces : "none listed");
	check(r, 1, vantage, "routes", no_route ? PASS : FAIL, no_route ? "none (nowhere to send a packet)" : routes);
	if (host[0])
		check(r, 1, vantage, "the sidecar's port", connects ? FAIL : untested ? WARN : PASS, conn);
	if (sock[0])
		check(r, 1, vantage, "the sidecar's ipc socket", sock_seen ? FAIL : PASS,
		      sock_seen ? "visible in the sandbox" : "absent from the sandbox");
	check(r, 1, vantage, "the egress proxy's port, for an exec granted nothing",
	      !proxy ? WARN : strcmp(proxy, "closed") == 0 ? PASS : FAIL,
	      !proxy ? "untested (no bash in the sandbox)"
	      : strcmp(proxy, "closed") == 0 ? "nothing listens on 127.0.0.1:3128"
					     : "something listens on 127.0.0.1:3128 in an exec granted nothing");
	snprintf(detail, sizeof(detail),
		 "run it yourself, it dials an address outside the sandbox: bkctl exec -- curl --max-time 3 -sS "
		 "http://169.254.169.254/latest/meta-data/; echo \"exit: $?\"  (expect an immediate failure: no "
		 "route; a hang or any answer is worth investigating)");
	check(r, 1, vantage, "the cloud metadata endpoint", NOT_RUN, detail);
}

/* Layer one's scoped exception (SECURITY.md): what an exec may be granted through the egress
 * proxy, as the sidecar tells a keyed caller. */
static void egress_ceiling(struct report *r, bkctl *ctl)
{
	static const char vantage[] = "the sidecar's configuration (keyed Health)";
	char detail[1024];
	size_t n;
	bk_status st;
	bk_client *c;
	int code;

	if (!ctl->key_file) {
		check(r, 1, vantage, "egress ceiling", SKIPPED, "needs the key (--key-file): the sidecar tells it a keyed caller");
		return;
	}
	if (!(c = bkctl_connect(ctl, &code))) {
		check(r, 1, vantage, "egress ceiling", FAIL, "cannot reach the sidecar");
		return;
	}
	code = bk_egress_ceiling_get(c, &r->ceiling, &st);
	bk_client_close(c);
	if (code != BK_OK) {
		snprintf(detail, sizeof(detail), "not told: %.400s", st.message);
		check(r, 1, vantage, "egress ceiling", FAIL, detail);
		return;
	}
	r->ceiling_known = true;
	if (r->ceiling.n == 0) {
		check(r, 1, vantage, "egress ceiling", PASS, "none: no exec can be granted any destination");
		return;
	}
	n = (size_t)snprintf(detail, sizeof(detail), "an exec may be granted, through the egress proxy:");
	for (size_t i = 0; i < r->ceiling.n && n < sizeof(detail); i++)
		n += (size_t)snprintf(detail + n, sizeof(detail) - n, "%s %s", i ? "," : "", r->ceiling.patterns[i]);
	check(r, 1, vantage, "egress ceiling", WARN, detail);
}

static void layer2(struct report *r, const char *pod, const char *ns, const char *mode)
{
	static const char vantage[] = "the sidecar's network namespace (kubectl exec -c sidecar)";
	char detail[768];
	const char *p = pod ? pod : "POD";

	heading(r, 2, "the pod's NetworkPolicy (default deny)", vantage);
	if (strcmp(mode, "local") == 0) {
		check(r, 2, vantage, "the pod's NetworkPolicy", NO_LAYER,
		      "boxkited runs in local mode: there is no pod, so no NetworkPolicy; layers one and three are all that "
		      "stands here");
		return;
	}
	snprintf(detail, sizeof(detail),
		 "kubectl exec -n %s %s -c sidecar -- curl -m 3 -s -o /dev/null -w '%%{http_code}\\n' "
		 "http://169.254.169.254/  (expect 000: no answer; ANY HTTP status means your CNI does not enforce it)",
		 ns, p);
	check(r, 2, vantage, "egress to the metadata endpoint", NOT_RUN, detail);
	snprintf(detail, sizeof(detail),
		 "kubectl get pods -n %s -l app.kubernetes.io/name=boxkite,app.kubernetes.io/component=sandbox  "
		 "(expect %s listed: a policy selecting no pod looks like a working one)", ns, p);
	check(r, 2, vantage, "the policy selects the live pod", NOT_RUN, detail);
	snprintf(detail, sizeof(detail),
		 "kubectl get networkpolicy -n %s  (expect boxkite-sandbox-default-deny, and no "
		 "boxkite-sandbox-permissive-egress unless you opted in)", ns);
	check(r, 2, vantage, "no wider policy unioned in", NOT_RUN, detail);
}

static void layer3(struct report *r, bkctl *ctl)
{
	static const char vantage[] = "the sidecar's port, without the key";
	static const char *const argv[] = { "true", NULL };
	const bk_exec_request rq = { .argv = argv };
	char key_id[BK_KEY_ID_MAX + 1] = "k1", detail[512];
	uint8_t forged[32];
	bk_exec_result res = { 0 };
	bk_health_info h;
	bk_status st;
	bk_client *c = NULL;
	int code;

	heading(r, 3, "the sidecar's own authentication", vantage);
	if (ctl->key_id)
		snprintf(key_id, sizeof(key_id), "%s", ctl->key_id);
	else if (ctl->key_file) {
		_cleanup_(bk_keyring_freep) bk_keyring *ring = NULL;
		bk_error *err = NULL;
		if (bk_keyring_load(ctl->key_file, &ring, &err) == 0)
			snprintf(key_id, sizeof(key_id), "%s", ring->keys[0].id);
		bk_error_free(err);
	}
	if (getrandom(forged, sizeof(forged), 0) != (ssize_t)sizeof(forged))
		return;
	/* No key at all: Health answers, as the probes need; Exec must not. */
	bk_client_options none = { .timeout_ms = ctl->timeout_ms, .tls_cert = ctl->tls_cert };
	if (bk_client_open(&c, ctl->url, &none, &st) != BK_OK) {
		check(r, 3, vantage, "connect", FAIL, st.message);
		return;
	}
	code = bk_health(c, &h, &st);
	check(r, 3, vantage, "Health without a key", code == BK_OK && h.auth_configured ? PASS : FAIL,
	      code != BK_OK ? st.message : h.auth_configured ? "answers (for probes), and a key is configured"
							  : "the sidecar has no key configured");
	code = bk_exec(c, &rq, &res, &st);
	bk_exec_result_free(&res);
	snprintf(detail, sizeof(detail), "%s%s%s", bk_status_name(code), st.detail ? "/" : "",
		 st.detail ? bk_detail_name(st.detail) : "");
	check(r, 3, vantage, "Exec without a key", code == BK_UNAUTHENTICATED ? PASS : FAIL, detail);
	bk_client_close(c);
	/* A key of the right id but the wrong secret: the MAC must not verify. */
	bk_client_options guess = { .key = forged, .key_len = sizeof(forged), .key_id = key_id,
				    .timeout_ms = ctl->timeout_ms, .tls_cert = ctl->tls_cert };
	if (bk_client_open(&c, ctl->url, &guess, &st) != BK_OK) {
		check(r, 3, vantage, "connect", FAIL, st.message);
		return;
	}
	code = bk_exec(c, &rq, &res, &st);
	bk_exec_result_free(&res);
	bk_client_close(c);
	snprintf(detail, sizeof(detail), "key id '%s', random secret: %s%s%s", key_id, bk_status_name(code),
		 st.detail ? "/" : "", st.detail ? bk_detail_name(st.detail) : "");
	check(r, 3, vantage, "Exec with a guessed key", code == BK_UNAUTHENTICATED ? PASS : FAIL, detail);
}

/* The sidecar's mode as its Health says ("local", "pod"; "unknown" when it does not answer):
 * keyed when a key is given, so that the answer is verified. */
static void sidecar_mode(bkctl *ctl, char *mode, size_t size)
{
	bk_health_info h;
	bk_status st;
	bk_client *c;
	int code;

	snprintf(mode, size, "unknown");
	if (!(c = bkctl_connect(ctl, &code)))
		return;
	if (bk_health(c, &h, &st) == BK_OK)
		snprintf(mode, size, "%s", h.mode);
	bk_client_close(c);
}

int bkctl_verify(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	struct report r = { .j = { .out = stdout }, .json = ctl->json };
	const char *pod = NULL, *ns = "boxkite";
	char mode[16];
	int c, help = 0;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (c == BKCTL_OPT_POD)
			pod = optarg;
		else if (c == 'n')
			ns = optarg;
		else
			return BKCTL_EXIT_USAGE;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	if (r.json) {
		bk_json_begin_object(&r.j, NULL);
		bk_json_begin_array(&r.j, "checks");
	}
	sidecar_mode(ctl, mode, sizeof(mode));
	layer1(&r, ctl);
	egress_ceiling(&r, ctl);
	layer2(&r, pod, ns, mode);
	layer3(&r, ctl);
	if (r.json) {
		bk_json_end_array(&r.j);
		bk_json_string(&r.j, "mode", mode);
		bk_json_int(&r.j, "failed", r.fails);
		if (r.ceiling_known) {
			bk_json_begin_array(&r.j, "egress_ceiling");
			for (size_t i = 0; i < r.ceiling.n; i++)
				bk_json_string(&r.j, NULL, r.ceiling.patterns[i]);
			bk_json_end_array(&r.j);
		}
		bk_json_int(&r.j, "skipped", r.skipped);
		bk_json_end_object(&r.j);
		putchar('\n');
	} else if (r.fails) {
		printf("verify: FAILED\n");
	} else if (r.skipped) {
		printf("verify: INCOMPLETE: %d check(s) skipped, which is not a pass; give the key that runs them\n",
		       r.skipped);
	} else {
		printf("verify: every check run here passed%s\n",
		       strcmp(mode, "local") ? "; run the NOT RUN HERE ones on your cluster" : "");
	}
	bk_egress_ceiling_free(&r.ceiling);
	return r.fails ? BKCTL_EXIT_STATUS : r.skipped ? BKCTL_EXIT_INCOMPLETE : BKCTL_EXIT_OK;
}
