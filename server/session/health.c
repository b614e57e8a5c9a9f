#include "rpc/handlers.h"
#include "version.h"

void bk_handle_health(bk_call *call, const ProtobufCMessage *request)
{
	Boxkite__V1__HealthResponse resp = BOXKITE__V1__HEALTH_RESPONSE__INIT;
	bk_server *srv = call->srv;

	(void)request;
	resp.version = (char *)BK_VERSION;
	resp.mode = (char *)srv->mode;
	/* A failed reset: the sandbox may hold the last tenant's processes or files. */
	resp.not_ready_reason = (char *)bk_server_failure(srv);
	resp.sandbox_ready = srv->sandbox_ready && !resp.not_ready_reason;
	if (!resp.not_ready_reason)
		resp.not_ready_reason = "";
	resp.auth_configured = bk_keystore_configured(srv->keystore);
	resp.uptime_ms = (uint64_t)(bk_clock_monotonic_ms() - atomic_load(&srv->served_since_ms));
	/* What the sidecar may grant is the operator's business: told to a caller whose MAC
	 * verified (bkctl verify reports it), not to anyone who can reach the port. */
	if (call->key) {
		resp.n_egress_ceiling = srv->cfg.negress_allow;
		resp.egress_ceiling = (char **)srv->cfg.egress_allow;
	}
	bk_call_reply(call, &resp.base);
}
