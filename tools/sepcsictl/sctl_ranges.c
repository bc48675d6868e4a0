/*
 * sepcsictl's printer of the SnapshotMetadata streams (GetMetadataAllocated,
 * GetMetadataDelta): each message printed, and flushed, as it arrives, so
 * that a long stream shows as it goes and is never held whole. Runs as the
 * operator; nothing privileged, nothing fatal.
 *
 * Text is what sctl_print_text() prints for one message, continued across
 * the stream: the message's block_metadata_type and volume_capacity_bytes
 * (the same in every message, says the spec; printed again should one
 * differ), then "block_metadata:" and each range as a list item with its
 * byte_offset and size_bytes. A message without ranges adds nothing but its
 * header, if that is new. JSON is sctl_print_json() of each message: one
 * object per message, one per line.
 */
#include <errno.h>
#include <stdlib.h>

#include "csi.pb-c.h"
#include "csic.h"
#include "sctl.h"

/* The fields of either answer, which csi.proto gives the same numbers and types. */
struct ranges_msg {
	int type;
	int64_t capacity;
	size_t n;
	Csi__V1__BlockMetadata *const *v;
};

static void ranges_of(const ProtobufCMessage *m, struct ranges_msg *r)
{
	if (m->descriptor == &csi__v1__get_metadata_delta_response__descriptor) {
		const Csi__V1__GetMetadataDeltaResponse *d = (const void *)m;
		*r = (struct ranges_msg){(int)d->block_metadata_type, d->volume_capacity_bytes,
		                         d->n_block_metadata, d->block_metadata};
	} else if (m->descriptor == &csi__v1__get_metadata_allocated_response__descriptor) {
		const Csi__V1__GetMetadataAllocatedResponse *a = (const void *)m;
		*r = (struct ranges_msg){(int)a->block_metadata_type, a->volume_capacity_bytes,
		                         a->n_block_metadata, a->block_metadata};
	} else {
		fprintf(stderr, "sepcsictl: internal error: %s is not a block range answer\n",
		        m->descriptor->name);
		abort();
	}
}

/* A byte count as the text printer shows one: the number, and a human size from 1 KiB. */
static void bytes(FILE *o, const char *name, int64_t v)
{
	fprintf(o, "%s: %lld", name, (long long)v);
	if (v >= 1024) {
		char human[32];
		units_format_size(v, human, sizeof(human));
		fprintf(o, " (%s)", human);
	}
	fputc('\n', o);
}

static void text(struct sctl_ranges *p, const struct ranges_msg *r)
{
	if (!p->started || r->type != p->type || r->capacity != p->capacity) {
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
		    &csi__v1__block_metadata_type__descriptor, r->type);
		if (ev)
			fprintf(p->o, "block_metadata_type: %s\n", ev->name);
		else
			fprintf(p->o, "block_metadata_type: %d\n", r->type);
		bytes(p->o, "volume_capacity_bytes", r->capacity);
		p->started = true;
		p->listing = false;
		p->type = r->type;
		p->capacity = r->capacity;
	}
	if (r->n > 0 && !p->listing) {
		fputs("block_metadata:\n", p->o);
		p->listing = true;
	}
	for (size_t i = 0; i < r->n; i++) {
		fprintf(p->o, "  - byte_offset: %lld\n    ", (long long)r->v[i]->byte_offset);
		bytes(p->o, "size_bytes", r->v[i]->size_bytes);
	}
}

int sctl_print_ranges(const ProtobufCMessage *m, void *arg)
{
	struct sctl_ranges *p = arg;

	if (p->output == SCTL_OUT_JSON) {
		sctl_print_json(p->o, m);
	} else {
		struct ranges_msg r;
		ranges_of(m, &r);
		text(p, &r);
	}
	errno = 0;
	if (fflush(p->o) != 0 || ferror(p->o)) {
		p->write_errno = errno ? errno : EIO;
		return -1;
	}
	return 0;
}
