/* bkctl preview PORT: a URL that reaches PORT — a port a background process exposes
 * (bkctl start --expose PORT) — through boxkited's preview listener (--preview-listen), for
 * --ttl seconds. The token is minted here with the key (common/preview.h): nothing is asked of
 * the server, which checks it on every request. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bkctl.h"
#include "clock.h"
#include "json.h"
#include "keys.h"
#include "preview.h"

#define DEFAULT_BASE "http://127.0.0.1:8081"
#define DEFAULT_TTL_S 3600

int bkctl_preview(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const char *base = getenv("BOXKITE_PREVIEW_URL");
	uint32_t ttl_ms = DEFAULT_TTL_S * 1000;
	char token[BK_PREVIEW_TOKEN_MAX], *end;
	bk_keyring *ring = NULL;
	const bk_key *key;
	int64_t expires;
	unsigned long port;
	int help = 0, c;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (c == BKCTL_OPT_TTL && bkctl_parse_seconds(optarg, &ttl_ms) == 0)
			continue;
		if (c == BKCTL_OPT_TTL) {
			fprintf(stderr, "%s: --ttl %s: expected seconds (at most 86400)\n", ctl->prog, optarg);
			return BKCTL_EXIT_USAGE;
		}
		if (c == BKCTL_OPT_BASE) {
			base = optarg;
			continue;
		}
		return BKCTL_EXIT_USAGE;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return BKCTL_EXIT_USAGE;
	errno = 0;
	port = strtoul(argv[optind], &end, 10);
	if (errno || *end || port < 1 || port > 65535) {
		fprintf(stderr, "%s: %s: a port is 1-65535\n", ctl->prog, argv[optind]);
		return BKCTL_EXIT_USAGE;
	}
	if (!base || !base[0])
		base = DEFAULT_BASE;
	if ((c = bkctl_key(ctl, "a preview is signed with the sandbox's key", &ring, &key)) != 0)
		return c;
	expires = bk_clock_realtime_ms() / 1000 + (ttl_ms + 999) / 1000;
	c = bk_preview_token_make(key, (uint16_t)port, expires, token, sizeof(token));
	bk_keyring_free(ring);
	if (c < 0) {
		fprintf(stderr, "%s: cannot make the token: %s\n", ctl->prog, strerror(-c));
		return BKCTL_EXIT_STATUS;
	}
	size_t blen = strlen(base);
	while (blen && base[blen - 1] == '/')
		blen--;
	char url[512];
	snprintf(url, sizeof(url), "%.*s/preview/%lu/%s/", (int)blen, base, port, token);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "url", url);
		bk_json_uint(&j, "port", port);
		bk_json_int(&j, "expires", expires);
		bk_json_end_object(&j);
	} else {
		printf("%s\n", url);
	}
	return BKCTL_EXIT_OK;
}
