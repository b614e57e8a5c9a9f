#include "orders.h"

#include <stdbool.h>
#include <string.h>

const char *bk_order_check_none(const bk_roots *roots, const bk_order *o)
{
	(void)roots;
	(void)o;
	return NULL;
}

const char *bk_order_check_path(const bk_roots *roots, const char *path)
{
	char norm[4096];
	const char *why = NULL;

	if (!path[0])
		return "empty path";
	return bk_sandbox_path(roots, path, norm, sizeof(norm), NULL, &why) < 0 ? why : NULL;
}

/* No unknown field anywhere in m: protobuf-c keeps and re-encodes them, so the size check alone
 * would let a field of another version through in a nested message. */
static bool known_fields_only(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (m->n_unknown_fields)
		return false;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *at = (const char *)m + f->offset;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			const ProtobufCMessage *const *v = *(const ProtobufCMessage *const *const *)at;
			for (size_t k = 0; k < n; k++)
				if (!known_fields_only(v[k]))
					return false;
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		if (*(const ProtobufCMessage *const *)at && !known_fields_only(*(const ProtobufCMessage *const *)at))
			return false;
	}
	return true;
}

static const bk_order_row *find_row(const bk_order_table *t, Boxkite__Executor__Order__KindCase kind)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i].kind == kind)
			return &t->rows[i];
	return NULL;
}

enum bk_order_verdict bk_order_decode(const bk_order_table *t, const bk_roots *roots, const uint8_t *buf,
				      size_t len, size_t nfds, bk_order **order, const bk_order_row **row,
				      const char **why)
{
	bk_order *o = boxkite__executor__order__unpack(NULL, len, buf);
	const bk_order_row *r;

	*order = NULL;
	*row = NULL;
	*why = NULL;
	if (!o)
		return BK_ORDER_GARBAGE;
	/* Only what protobuf-c itself would write: a string with a NUL byte would be acted on up to
	 * the NUL, and an unknown field means a front of another version. */
	if (o->id == 0 || !known_fields_only(&o->base) || protobuf_c_message_get_packed_size(&o->base) != len) {
		bk_order_free(o);
		return BK_ORDER_GARBAGE;
	}
	*order = o;
	r = find_row(t, o->kind_case);
	if (!r) {
		*why = "not an order this process serves";
		return BK_ORDER_REFUSED;
	}
	if (nfds != r->nfds) {
		*why = "the wrong number of descriptors for this order";
		return BK_ORDER_REFUSED;
	}
	if ((*why = r->check(roots, o)))
		return BK_ORDER_REFUSED;
	*row = r;
	return BK_ORDER_OK;
}

void bk_order_free(bk_order *o)
{
	if (o)
		boxkite__executor__order__free_unpacked(o, NULL);
}
