#include "server.h"

#include <string.h>

#include "handlers.h"

int bk_server_init(bk_server *srv, const bk_config *cfg, bk_error **err)
{
	int ret;

	srv->cfg = *cfg;
	srv->started_ms = bk_clock_realtime_ms();
	srv->mode = "none";
	ret = bk_keystore_open(cfg->key_file, &srv->keystore, err);
	if (ret < 0)
		return ret;
	srv->replay = bk_replay_new(cfg->replay_capacity, cfg->window_ms, cfg->replay_answer_cap);
	if (!srv->replay)
		return bk_error_errno(err, ENOMEM, "replay cache");
	return bk_methods_init(srv, err);
}

void bk_server_fini(bk_server *srv)
{
	bk_front_stop(srv);
	bk_replay_free(srv->replay);
	bk_keystore_free(srv->keystore);
	free(srv->methods);
	memset(srv, 0, sizeof(*srv));
}
