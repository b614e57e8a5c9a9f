/* fuzz_order: what a front could send across the privilege boundary, through the decoder the
 * executor and the file worker run on every packet (bk_order_decode, sidecar/orders.c): the
 * protobuf decode, the canonical-encoding check, the kind's row, its descriptor count, its
 * field checks. Nothing is served: the question is whether anything unchecked gets through.
 *
 * An input is one flag byte, then the packet:
 *   bits 0-1  the number of descriptors said to come with it (0-3)
 *   bits 2-3  the table: 0 the executor's orders, 1 the file worker's, 2 the executor's first
 *             packet (Configure), 3 the executor's again
 *
 * Oracles beside the sanitizers: garbage (-EBADMSG) gives no order; a refusal (-EINVAL) gives
 * an order and a reason; acceptance (0) gives the row of the order's own kind, exactly its
 * descriptors, a packet that re-encodes to its own length, and fields that satisfy what serving
 * assumes — every path inside a root once normalized, a spawn with an id, an argv and well-formed variables, a kill with a signal
 * in range, modes of permission bits only, a page token of one component, a first Configure
 * with a sandbox user other than root and a root.
 *
 * Blind spots: protobuf-c is the system library (no coverage from inside it); the serving
 * functions behind the rows are not run. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envpolicy.h"
#include "executor.h"
#include "files/fileworker.h"
#include "orders.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn)) static void die(const char *what, const bk_order *o)
{
	fprintf(stderr, "fuzz_order: %s (order kind %d)\n", what, o ? (int)o->kind_case : -1);
	abort();
}

static void path_inside(const bk_roots *roots, const char *path, const bk_order *o)
{
	char norm[4096];

	if (bk_sandbox_path(roots, path, norm, sizeof(norm), NULL, NULL) < 0)
		die("an order accepted with a path outside the roots", o);
}

/* What the serving functions take for granted of an order its row accepted. (Configure
 * passes the executor's table to be refused when served: only the first packet's row checks
 * it.) */
static void accepted_fields(const bk_roots *roots, const bk_order *o, bool first)
{
	switch (o->kind_case) {
	case BOXKITE__EXECUTOR__ORDER__KIND_SPAWN:
		if (!o->spawn->exec_id || !o->spawn->n_argv || !o->spawn->argv[0][0])
			die("a spawn accepted without an id or an argv", o);
		for (size_t i = 0; i < o->spawn->n_env; i++) {
			const char *eq = strchr(o->spawn->env[i], '=');
			if (!eq || !bk_env_name_valid(o->spawn->env[i], (size_t)(eq - o->spawn->env[i])))
				die("a spawn accepted with a malformed variable", o);
		}
		path_inside(roots, o->spawn->cwd, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_KILL:
		if (!o->kill->exec_id || o->kill->signal < 0 || o->kill->signal > 64)
			die("a kill accepted with no exec or a bad signal", o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_STAT:
		path_inside(roots, o->stat->path, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_LIST:
		path_inside(roots, o->list->path, o);
		if (strchr(o->list->after, '/') || strlen(o->list->after) > 255)
			die("a list accepted with a token that is not one name", o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ:
		path_inside(roots, o->open_read->path, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP:
		path_inside(roots, o->create_temp->path, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_COMMIT:
		path_inside(roots, o->commit->path, o);
		if (o->commit->mode > 0777)
			die("a commit accepted with more than permission bits", o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_MKDIR:
		path_inside(roots, o->mkdir->path, o);
		if (o->mkdir->mode > 0777)
			die("a mkdir accepted with more than permission bits", o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_REMOVE:
		path_inside(roots, o->remove->path, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_RENAME:
		path_inside(roots, o->rename->from, o);
		path_inside(roots, o->rename->to, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_USAGE:
		path_inside(roots, o->usage->path, o);
		break;
	case BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE:
		if (first && (o->configure->sandbox_uid == 0 || !o->configure->n_roots))
			die("a configuration accepted with uid 0 or no root", o);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bk_roots roots;
	static bool ready;
	const bk_order_table *tables[4] = { &bk_executor_orders, &bk_fileworker_orders, &bk_executor_first_order,
					    &bk_executor_orders };
	const bk_order_row *row;
	bk_error *err = NULL;
	bk_order *o;
	size_t nfds;
	int ret;

	if (!ready) {
		bk_roots_default(&roots);
		bk_roots_add(&roots, "/data:ro", NULL);
		ready = true;
	}
	if (size < 1)
		return 0;
	nfds = data[0] & 3;
	ret = bk_order_decode(tables[(data[0] >> 2) & 3], &roots, data + 1, size - 1, nfds, &o, &row, &err);
	switch (ret) {
	case -EBADMSG:
		if (o || row || err)
			die("garbage gave an order", o);
		break;
	case -EINVAL:
		if (!o || !err || !bk_error_msg(err)[0] || row)
			die("a refusal without its order or its reason", o);
		break;
	case 0:
		if (!o || !row || err || row->kind != o->kind_case || row->nfds != nfds || o->id == 0)
			die("an order accepted against its row", o);
		if (protobuf_c_message_get_packed_size(&o->base) != size - 1)
			die("an order accepted that is not canonically encoded", o);
		if (row->check(&roots, o, NULL) < 0)
			die("an order accepted that its row's check refuses", o);
		accepted_fields(&roots, o, tables[(data[0] >> 2) & 3] == &bk_executor_first_order);
		break;
	default:
		die("no verdict", o);
	}
	bk_error_free(err);
	bk_order_free(o);
	return 0;
}
