/*
 * Every CSI RPC rpcd serves, from raw request bytes to the controller, as
 * rpcd's dispatch() does it: the method is found in rpcd's own table
 * (rpcd/rpcd_methods.c), the bytes are unpacked with protobuf-c as that
 * method's request type, and its handler runs against a real sqlite store
 * (in a private directory on /dev/shm) and a fake helper: a thread on the
 * other end of a SOCK_SEQPACKET socketpair that speaks the real helper
 * protocol and answers as the helper would, keeping a table of images.
 *
 * Input: byte 0 picks the method; byte 1, if its high bit is set, makes the
 * fake helper fail the next request with error kind (bits 0-2); the rest is
 * the request. So that a request can name volumes and snapshots made by
 * earlier inputs (their ids are random), any string field of the request
 * that reads "@v<digit>", "@s<digit>" or "@g<digit>" is replaced with one of
 * the volume, snapshot or group snapshot ids that earlier responses returned.
 * State lives on across inputs, but the store and the helper's table start
 * over every RESET_EVERY inputs.
 *
 * Checks:
 *  - the status is a gRPC code with a message when it is not OK; OK comes with
 *    a response that packs (to the size protobuf-c computed) and unpacks again
 *    as the method's response type;
 *  - nothing is ever ABORTED for being busy (one call at a time here: a busy
 *    volume would be a lock left held), only for a bad list token;
 *  - no store error: whatever the request holds, the store takes it or the
 *    controller refuses it first (INTERNAL only when the helper failed);
 *  - every volume and snapshot id rpcd sends the helper has the fixed syntax
 *    ("sv-"/"ss-" and 32 lowercase hex digits): nothing from the request
 *    reaches the helper as an id.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"
#include "mh_client.h"
#include "mh_helper_ops.h"
#include "mh_proto_all.h"
#include "policy.h"
#include "rpcd.h"
#include "store.h"

#define RESET_EVERY 2000
#define IDS         10 /* remembered ids of each kind ("@v0".."@v9") */
#define IMAGES      256

#define GiB (1024ULL * 1024 * 1024)
#define TiB (1024 * GiB)

/* ---- the method table: rpcd's, plus the response type of each ---- */

#define CSI_M(svc, name, resp)                                                                     \
	{                                                                                          \
		"/csi.v1." #svc "/" #name, &csi__v1__##resp##__descriptor                          \
	}

static const struct {
	const char *path;
	const ProtobufCMessageDescriptor *resp;
} methods[] = {
    CSI_M(Identity, GetPluginInfo, get_plugin_info_response),
    CSI_M(Identity, GetPluginCapabilities, get_plugin_capabilities_response),
    CSI_M(Identity, Probe, probe_response),
    CSI_M(Controller, CreateVolume, create_volume_response),
    CSI_M(Controller, DeleteVolume, delete_volume_response),
    CSI_M(Controller, ControllerGetCapabilities, controller_get_capabilities_response),
    CSI_M(Controller, ControllerPublishVolume, controller_publish_volume_response),
    CSI_M(Controller, ControllerUnpublishVolume, controller_unpublish_volume_response),
    CSI_M(Controller, ValidateVolumeCapabilities, validate_volume_capabilities_response),
    CSI_M(Controller, ListVolumes, list_volumes_response),
    CSI_M(Controller, GetCapacity, get_capacity_response),
    CSI_M(Controller, CreateSnapshot, create_snapshot_response),
    CSI_M(Controller, DeleteSnapshot, delete_snapshot_response),
    CSI_M(Controller, ListSnapshots, list_snapshots_response),
    CSI_M(Controller, GetSnapshot, get_snapshot_response),
    CSI_M(Controller, ControllerExpandVolume, controller_expand_volume_response),
    CSI_M(Controller, ControllerGetVolume, controller_get_volume_response),
    CSI_M(Controller, ControllerModifyVolume, controller_modify_volume_response),
    CSI_M(GroupController, GroupControllerGetCapabilities,
          group_controller_get_capabilities_response),
    CSI_M(GroupController, CreateVolumeGroupSnapshot, create_volume_group_snapshot_response),
    CSI_M(GroupController, DeleteVolumeGroupSnapshot, delete_volume_group_snapshot_response),
    CSI_M(GroupController, GetVolumeGroupSnapshot, get_volume_group_snapshot_response),
    CSI_M(Node, NodeStageVolume, node_stage_volume_response),
    CSI_M(Node, NodeUnstageVolume, node_unstage_volume_response),
    CSI_M(Node, NodePublishVolume, node_publish_volume_response),
    CSI_M(Node, NodeUnpublishVolume, node_unpublish_volume_response),
    CSI_M(Node, NodeGetCapabilities, node_get_capabilities_response),
    CSI_M(Node, NodeGetInfo, node_get_info_response),
    CSI_M(Node, NodeGetVolumeStats, node_get_volume_stats_response),
    CSI_M(Node, NodeExpandVolume, node_expand_volume_response),
};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

/* ---- the fake helper ---- */

static struct {
	int fd;
	pthread_t thr;
	pthread_mutex_t mu;
	struct {
		char id[MH_ID_MAX + 1];
		uint64_t size;
	} images[IMAGES];
	atomic_int fail_kind; /* answer the next request with this error kind; 0: none */
	atomic_int bad_id;    /* set when a request carried an id of the wrong syntax */
} fake = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t *image(const char *id, bool create)
{
	int free_slot = -1;
	for (int i = 0; i < IMAGES; i++) {
		if (fake.images[i].id[0] && strcmp(fake.images[i].id, id) == 0)
			return &fake.images[i].size;
		if (!fake.images[i].id[0] && free_slot < 0)
			free_slot = i;
	}
	if (!create || free_slot < 0)
		return NULL;
	snprintf(fake.images[free_slot].id, sizeof(fake.images[free_slot].id), "%s", id);
	return &fake.images[free_slot].size;
}

static void image_delete(const char *id)
{
	for (int i = 0; i < IMAGES; i++)
		if (strcmp(fake.images[i].id, id) == 0)
			fake.images[i].id[0] = '\0';
}

/* The ids a request acts on, as the helper itself lists them (mh_ops_keys), are ours. */
static void check_ids(const struct mh_msg *q)
{
	const char *keys[MH_OPS_KEYS_MAX];
	size_t n = mh_ops_keys(q, keys);
	if (q->type == MH_REQ_STATS) /* read-only, so it has no keys; it names a volume */
		keys[n++] = q->u.stats.volume_id;
	for (size_t i = 0; i < n; i++)
		if (keys[i][0] != '/' && !pol_volume_id_valid(keys[i]) &&
		    !pol_snapshot_id_valid(keys[i]))
			atomic_store(&fake.bad_id, 1);
}

/* The helper's answer to q, in miniature. */
static void answer(const struct mh_msg *q, struct mh_msg *a)
{
	uint64_t *sz;
	memset(a, 0, sizeof(*a));
	a->id = q->id;
	a->type = (uint16_t)(q->type + 1);
	int kind = atomic_exchange(&fake.fail_kind, 0);
	if (kind) {
		a->type = MH_ANS_ERROR;
		a->u.error.kind = (uint32_t)kind;
		snprintf(a->u.error.reason, sizeof(a->u.error.reason), "fake failure");
		return;
	}
	pthread_mutex_lock(&fake.mu);
	switch (q->type) {
	case MH_REQ_CREATE:
		if ((sz = image(q->u.create.volume_id, true)))
			a->u.size_ans.size_bytes = *sz = q->u.create.size_bytes;
		break;
	case MH_REQ_DELETE:
		image_delete(q->u.del.volume_id);
		break;
	case MH_REQ_RESIZE:
		if ((sz = image(q->u.resize.volume_id, false)) && q->u.resize.size_bytes >= *sz)
			a->u.size_ans.size_bytes = *sz = q->u.resize.size_bytes;
		else if (sz)
			a->u.size_ans.size_bytes = *sz;
		break;
	case MH_REQ_SNAPSHOT:
		if ((sz = image(q->u.snapshot.volume_id, false))) {
			uint64_t size = *sz;
			if ((sz = image(q->u.snapshot.snapshot_id, true)))
				a->u.copy_ans.size_bytes = *sz = size;
		}
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		image_delete(q->u.del_snapshot.snapshot_id);
		break;
	case MH_REQ_CLONE:
		if ((sz = image(q->u.clone.source_id, false))) {
			uint64_t size = *sz > q->u.clone.size_bytes ? *sz : q->u.clone.size_bytes;
			if ((sz = image(q->u.clone.volume_id, true)))
				a->u.copy_ans.size_bytes = *sz = size;
		}
		break;
	case MH_REQ_CAPACITY:
		a->u.capacity_ans.available_bytes = 50 * GiB;
		a->u.capacity_ans.total_bytes = 100 * GiB;
		a->u.capacity_ans.max_volume_bytes = 16 * TiB;
		break;
	case MH_REQ_EXPAND:
		a->u.size_ans.size_bytes =
		    (sz = image(q->u.expand.volume_id, false)) ? *sz : 1 * GiB;
		break;
	case MH_REQ_STATS:
		a->u.stats_ans.bytes_total = 1 * GiB;
		a->u.stats_ans.bytes_available = GiB / 2;
		a->u.stats_ans.bytes_used = GiB / 2;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&fake.mu);
}

static void *fake_helper(void *arg)
{
	static uint8_t buf[MH_MSG_MAX + 1], out[MH_MSG_MAX];
	static struct mh_msg q, a;
	size_t len;
	for (;;) {
		ssize_t n = recv(fake.fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue; /* libFuzzer's SIGALRM */
		if (n <= 0)
			break;
		/* rpcd's own encoder made it: it must decode. */
		FUZZ_CHECK(mh_msg_decode(buf, (size_t)n, &q) == 0);
		check_ids(&q);
		answer(&q, &a);
		FUZZ_CHECK(mh_msg_encode(&a, out, sizeof(out), &len) == 0);
		ssize_t sent;
		do
			sent = send(fake.fd, out, len, MSG_NOSIGNAL);
		while (sent < 0 && errno == EINTR);
		FUZZ_CHECK(sent == (ssize_t)len);
	}
	return NULL;
}

/* ---- rpcd, the store, and the ids earlier responses returned ---- */

static struct rpcd r;
static char dir[64], db[96];
static char ids[3][IDS][64]; /* volume, snapshot, group snapshot */
static size_t nids[3], inputs;
static bool trace;

static void remove_db(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s-wal", db);
	unlink(path);
	snprintf(path, sizeof(path), "%s-shm", db);
	unlink(path);
	unlink(db);
}

static void world_open(void)
{
	remove_db();
	if (store_open(db, &r.st) != STORE_OK)
		abort();
	r.ctl = ctl_new(&r.cfg, r.st, r.mh);
	pthread_mutex_lock(&fake.mu);
	memset(fake.images, 0, sizeof(fake.images));
	pthread_mutex_unlock(&fake.mu);
	memset(nids, 0, sizeof(nids));
}

static void world_close(void)
{
	ctl_free(r.ctl);
	store_close(r.st);
}

static void cleanup(void)
{
	world_close();
	remove_db();
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int sv[2];
	log_init("fuzz", LOG_FMT_TEXT, LOG_LVL_ERROR);
	trace = getenv("FUZZ_CSI_TRACE") != NULL;
	snprintf(dir, sizeof(dir), "%s", "/dev/shm/sepcsi-fuzz-XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "%s", "/tmp/sepcsi-fuzz-XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	snprintf(db, sizeof(db), "%s/state.db", dir);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	fake.fd = sv[1];
	if (pthread_create(&fake.thr, NULL, fake_helper, NULL) != 0)
		abort();
	r.cfg = (struct ctl_config){.driver_name = "local.sepcsi.io", .node_id = "node-1"};
	r.mh = mh_client_new(sv[0]);
	world_open();
	if (atexit(cleanup) != 0)
		abort();
	return 0;
}

/* ---- walking every string of a protobuf-c message ---- */

typedef void (*str_fn)(const ProtobufCFieldDescriptor *f, char **s);

/* NOLINTNEXTLINE(misc-no-recursion): depth is the nesting of CSI message types, which is fixed */
static void walk(ProtobufCMessage *m, str_fn fn)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *base = (char *)m + f->offset;
		size_t n = 1;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
				continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(size_t *)((char *)m + f->quantifier_offset);
			base = *(char **)base;
		}
		for (size_t j = 0; j < n; j++) {
			if (f->type == PROTOBUF_C_TYPE_STRING) {
				char **s = (char **)base + j;
				if (*s)
					fn(f, s);
			} else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
				ProtobufCMessage *sub = ((ProtobufCMessage **)base)[j];
				if (sub)
					walk(sub, fn);
			}
		}
	}
}

/* "@v3" -> the id of one of the volumes earlier responses returned. */
static void substitute(const ProtobufCFieldDescriptor *f, char **s)
{
	const char *v = *s, *kinds = "vsg";
	if (v[0] != '@' || !v[1] || !strchr(kinds, v[1]) || v[2] < '0' || v[2] > '9' || v[3])
		return;
	size_t k = (size_t)(strchr(kinds, v[1]) - kinds);
	if (nids[k] == 0)
		return;
	char *id = strdup(ids[k][(size_t)(v[2] - '0') % nids[k]]);
	if (!id)
		abort();
	free(*s);
	*s = id;
}

/* Remember the ids a response returns, the latest IDS of each kind. */
static void remember(const ProtobufCFieldDescriptor *f, char **s)
{
	static const char *const names[] = {"volume_id", "snapshot_id", "group_snapshot_id"};
	for (size_t k = 0; k < 3; k++) {
		if (strcmp(f->name, names[k]) != 0 || strlen(*s) >= sizeof(ids[k][0]) || !**s)
			continue;
		for (size_t i = 0; i < nids[k]; i++)
			if (strcmp(ids[k][i], *s) == 0)
				return;
		if (nids[k] < IDS)
			nids[k]++;
		memmove(ids[k][1], ids[k][0], sizeof(ids[k][0]) * (IDS - 1));
		snprintf(ids[k][0], sizeof(ids[k][0]), "%s", *s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (++inputs % RESET_EVERY == 0) {
		world_close();
		world_open();
	}
	size_t mi = data[0] % NMETHODS;
	const struct rpcd_method *m = rpcd_method_find(methods[mi].path, strlen(methods[mi].path));
	FUZZ_CHECK(m != NULL && rpcd_method_enabled(&r, m));
	ProtobufCMessage *req = protobuf_c_message_unpack(m->req, NULL, size - 2, data + 2);
	if (!req)
		return 0; /* rpcd answers INVALID_ARGUMENT */
	walk(req, substitute);
	int fault = data[1] & 0x80 ? 1 + (data[1] & 7) % 7 : 0;
	atomic_store(&fake.fail_kind, fault);
	atomic_store(&fake.bad_id, 0);

	struct ctl_arena *a = ctl_arena_new();
	struct ctl_status st = {.code = CTL_OK};
	void *resp = NULL;
	if (m->ctl_fn)
		m->ctl_fn(r.ctl, req, &resp, a, &st);
	else
		m->rpcd_fn(&r, req, &resp, a, &st);
	atomic_store(&fake.fail_kind, 0);
	if (trace) /* FUZZ_CSI_TRACE=1: one line per call, to see how deep inputs get */
		fprintf(stderr, "%s %s %s\n", methods[mi].path + 8, ctl_code_name(st.code), st.msg);

/* A broken check about the outcome names the call and its status first. */
#define CHECK_STATUS(cond)                                                                         \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fprintf(stderr, "%s: %s: %s\n", methods[mi].path, ctl_code_name(st.code),  \
			        st.msg);                                                           \
		FUZZ_CHECK(cond);                                                                  \
	} while (0)
	CHECK_STATUS((unsigned)st.code <= 16);
	CHECK_STATUS(memchr(st.msg, '\0', sizeof(st.msg)) != NULL);
	CHECK_STATUS(!atomic_load(&fake.bad_id));
	if (st.code == CTL_ABORTED)
		CHECK_STATUS(strstr(st.msg, "starting_token") != NULL);
	/* INTERNAL is a store error, or the helper's own failure passed on. */
	CHECK_STATUS(st.code != CTL_INTERNAL || fault == MH_E_FAILED);
	if (st.code == CTL_OK) {
		FUZZ_CHECK(resp != NULL);
		ProtobufCMessage *out = resp;
		FUZZ_CHECK(out->descriptor == methods[mi].resp);
		size_t n = protobuf_c_message_get_packed_size(out);
		uint8_t *buf = malloc(n ? n : 1);
		if (!buf)
			abort();
		FUZZ_CHECK(protobuf_c_message_pack(out, buf) == n);
		ProtobufCMessage *back = protobuf_c_message_unpack(methods[mi].resp, NULL, n, buf);
		FUZZ_CHECK(back != NULL);
		walk(back, remember);
		protobuf_c_message_free_unpacked(back, NULL);
		free(buf);
	} else {
		FUZZ_CHECK(st.msg[0] != '\0');
	}
	ctl_arena_free(a);
	protobuf_c_message_free_unpacked(req, NULL);
	return 0;
}
