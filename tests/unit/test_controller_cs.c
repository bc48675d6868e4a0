/*
 * Unit tests of the Controller and GroupController services beyond the
 * skeleton (snapshots, clones, publish, lists, expand, modify, capacity,
 * condition, group snapshots, concurrency), with a fake helper: a thread on
 * the other end of a SOCK_SEQPACKET socketpair that speaks the real helper
 * protocol and keeps a table of the images it "has", so sizes, copies and
 * missing images behave like the real helper's; likewise a table of the
 * directories of directory volumes (DIR_*). It can hold CLONE answers
 * back while it keeps answering everything else, as the real helper runs
 * slow operations concurrently. The store is a real sqlite file.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_int.h"
#include "mh_client.h"
#include "mh_proto_all.h"
#include "store.h"
#include "tap.h"

#define MiB (1024LL * 1024)
#define GiB (1024 * MiB)
#define TiB (1024 * GiB)

/* ---- the fake helper ---- */

#define MAX_IMAGES 256

struct image {
	char id[MH_ID_MAX + 1];
	uint64_t size;
};

#define MAX_DIRS 64

/* A directory beneath a base; volume_id "" once it is nobody's (retained, or a stranger's). */
struct dir {
	char base[MH_PATH_MAX + 1], name[MH_DIRNAME_MAX + 1], volume_id[MH_ID_MAX + 1];
	uint64_t size;
};

struct fake {
	int fd;
	pthread_mutex_t mu;
	struct image images[MAX_IMAGES];
	struct dir dirs[MAX_DIRS];
	struct mh_req_dir last_dir; /* the last DIR_* request */
	atomic_int requests[MH_ANS_ERROR + 1];
	atomic_uint_least64_t avail; /* CAPACITY answer */
	atomic_int fail_type;        /* answer requests of this type with fail_kind */
	atomic_int fail_kind;
	atomic_int fail_errno;    /* and this errno */
	atomic_int fail_skip;     /* let this many of fail_type succeed first */
	atomic_int hold_clone;    /* defer CLONE answers while set */
	atomic_int clone_pending; /* a CLONE is being held */
	pthread_t thr;
};

static struct fake fake;

static struct image *img_find(const char *id)
{
	for (int i = 0; i < MAX_IMAGES; i++)
		if (fake.images[i].id[0] && strcmp(fake.images[i].id, id) == 0)
			return &fake.images[i];
	return NULL;
}

static void img_put(const char *id, uint64_t size)
{
	struct image *im = img_find(id);
	for (int i = 0; !im && i < MAX_IMAGES; i++)
		if (!fake.images[i].id[0])
			im = &fake.images[i];
	if (!im)
		abort();
	snprintf(im->id, sizeof(im->id), "%s", id);
	im->size = size;
}

static void img_del(const char *id)
{
	struct image *im = img_find(id);
	if (im)
		im->id[0] = '\0';
}

static bool img_exists(const char *id)
{
	pthread_mutex_lock(&fake.mu);
	bool r = img_find(id) != NULL;
	pthread_mutex_unlock(&fake.mu);
	return r;
}

static struct dir *dir_find(const char *base, const char *name)
{
	for (int i = 0; i < MAX_DIRS; i++)
		if (fake.dirs[i].base[0] && strcmp(fake.dirs[i].base, base) == 0 &&
		    strcmp(fake.dirs[i].name, name) == 0)
			return &fake.dirs[i];
	return NULL;
}

static struct dir *dir_put(const char *base, const char *name, const char *vid, uint64_t size)
{
	struct dir *d = dir_find(base, name);
	for (int i = 0; !d && i < MAX_DIRS; i++)
		if (!fake.dirs[i].base[0])
			d = &fake.dirs[i];
	if (!d)
		abort();
	snprintf(d->base, sizeof(d->base), "%s", base);
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->volume_id, sizeof(d->volume_id), "%s", vid);
	d->size = size;
	return d;
}

/* Is there a directory name beneath base, and whose is it ("" nobody's)? */
static bool dir_exists(const char *base, const char *name, char *owner)
{
	pthread_mutex_lock(&fake.mu);
	struct dir *d = dir_find(base, name);
	if (d && owner)
		snprintf(owner, MH_ID_MAX + 1, "%s", d->volume_id);
	pthread_mutex_unlock(&fake.mu);
	return d != NULL;
}

static struct mh_req_dir last_dir(void)
{
	pthread_mutex_lock(&fake.mu);
	struct mh_req_dir q = fake.last_dir;
	pthread_mutex_unlock(&fake.mu);
	return q;
}

static void set_error(struct mh_msg *ans, int kind, const char *why);

/*
 * Directory volumes as the helper keeps them: a base under /quota has
 * project quotas; a directory is this volume's, nobody's (retained) or
 * another's; snapshots go to the image table under their id.
 */
static void answer_dir(const struct mh_msg *req, struct mh_msg *ans)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct dir *d = dir_find(q->base, q->name);
	bool quota = strncmp(q->base, "/quota", 6) == 0;
	fake.last_dir = *q;
	switch (req->type) {
	case MH_REQ_DIR_CREATE:
		if (d && strcmp(d->volume_id, q->volume_id) != 0) {
			set_error(ans, MH_E_EXISTS, "directory exists and is not this volume's");
		} else if (q->source_kind == MH_SRC_SNAPSHOT && !img_find(q->source_id)) {
			set_error(ans, MH_E_NOTFOUND, "no such snapshot");
		} else if (q->source_kind == MH_SRC_VOLUME && !dir_find(q->base, q->source_name)) {
			set_error(ans, MH_E_NOTFOUND, "no such source directory");
		} else {
			dir_put(q->base, q->name, q->volume_id, q->size_bytes);
			ans->u.dir_ans.size_bytes = q->size_bytes;
			ans->u.dir_ans.quota = quota;
		}
		break;
	case MH_REQ_DIR_DELETE:
		if (d && q->mode == MH_DIR_DELETE)
			d->base[0] = '\0';
		else if (d && q->mode == MH_DIR_RETAIN)
			d->volume_id[0] = '\0';
		else if (d && q->mode == MH_DIR_ARCHIVE) {
			char archived[MH_DIRNAME_MAX + 16];
			snprintf(archived, sizeof(archived), "archived-%s", d->name);
			snprintf(d->name, sizeof(d->name), "%.*s", MH_DIRNAME_MAX, archived);
			d->volume_id[0] = '\0';
		}
		break;
	case MH_REQ_DIR_EXPAND:
		if (!d) {
			set_error(ans, MH_E_NOTFOUND, "no such directory");
		} else {
			d->size = q->size_bytes > d->size ? q->size_bytes : d->size;
			ans->u.dir_ans.size_bytes = d->size;
			ans->u.dir_ans.quota = quota;
		}
		break;
	case MH_REQ_DIR_STATS:
		if (!d) {
			set_error(ans, MH_E_NOTFOUND, "no such directory");
		} else {
			ans->u.stats_ans.bytes_total = d->size;
			ans->u.stats_ans.bytes_available = d->size;
		}
		break;
	case MH_REQ_DIR_CAPACITY:
		ans->u.capacity_ans.available_bytes = atomic_load(&fake.avail);
		ans->u.capacity_ans.total_bytes = 100 * GiB;
		ans->u.capacity_ans.max_volume_bytes = 16 * TiB;
		ans->u.capacity_ans.quota = quota;
		break;
	case MH_REQ_DIR_SNAPSHOT:
		if (!d)
			set_error(ans, MH_E_NOTFOUND, "no such directory");
		else
			img_put(q->snapshot_id, d->size);
		break;
	case MH_REQ_DIR_DELETE_SNAPSHOT:
		img_del(q->snapshot_id);
		break;
	default: /* DIR_PUBLISH, DIR_UNPUBLISH: counted, nothing to keep */
		break;
	}
}

static void set_error(struct mh_msg *ans, int kind, const char *why)
{
	ans->type = MH_ANS_ERROR;
	ans->u.error.kind = (uint32_t)kind;
	snprintf(ans->u.error.reason, sizeof(ans->u.error.reason), "%s", why);
}

/* The real helper's behaviour, in miniature. */
static void answer(const struct mh_msg *req, struct mh_msg *ans)
{
	struct image *src;
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = (uint16_t)(req->type + 1);
	if (req->type == atomic_load(&fake.fail_type) &&
	    atomic_fetch_sub(&fake.fail_skip, 1) <= 0) {
		set_error(ans, atomic_load(&fake.fail_kind), "fake failure");
		ans->u.error.sys_errno = (uint32_t)atomic_load(&fake.fail_errno);
		return;
	}
	pthread_mutex_lock(&fake.mu);
	switch (req->type) {
	case MH_REQ_CREATE:
		img_put(req->u.create.volume_id, req->u.create.size_bytes);
		ans->u.size_ans.size_bytes = req->u.create.size_bytes;
		break;
	case MH_REQ_DELETE:
		img_del(req->u.del.volume_id);
		break;
	case MH_REQ_RESIZE:
		if (!(src = img_find(req->u.resize.volume_id)))
			set_error(ans, MH_E_NOTFOUND, "no such image");
		else if (req->u.resize.size_bytes < src->size)
			set_error(ans, MH_E_REFUSED, "images never shrink");
		else
			ans->u.size_ans.size_bytes = src->size = req->u.resize.size_bytes;
		break;
	case MH_REQ_SNAPSHOT:
		if (!(src = img_find(req->u.snapshot.volume_id))) {
			set_error(ans, MH_E_NOTFOUND, "no such image");
		} else {
			uint64_t size = src->size;
			img_put(req->u.snapshot.snapshot_id, size);
			ans->u.copy_ans.size_bytes = size;
		}
		break;
	case MH_REQ_GROUP_SNAPSHOT:
		for (uint32_t i = 0; i < req->u.group.n; i++)
			if (!img_find(req->u.group.volume_id[i]))
				set_error(ans, MH_E_NOTFOUND, "no such image");
		for (uint32_t i = 0; ans->type != MH_ANS_ERROR && i < req->u.group.n; i++) {
			uint64_t size = img_find(req->u.group.volume_id[i])->size;
			img_put(req->u.group.snapshot_id[i], size);
			ans->u.group_ans.size_bytes[i] = size;
		}
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		img_del(req->u.del_snapshot.snapshot_id);
		break;
	case MH_REQ_CLONE:
		if (!(src = img_find(req->u.clone.source_id))) {
			set_error(ans, MH_E_NOTFOUND, "no such source");
		} else {
			uint64_t size = req->u.clone.size_bytes > src->size
			                    ? req->u.clone.size_bytes
			                    : src->size;
			img_put(req->u.clone.volume_id, size);
			ans->u.copy_ans.size_bytes = size;
		}
		break;
	case MH_REQ_CAPACITY:
		ans->u.capacity_ans.available_bytes = atomic_load(&fake.avail);
		ans->u.capacity_ans.total_bytes = 100 * GiB;
		ans->u.capacity_ans.max_volume_bytes = 16 * TiB;
		break;
	default:
		if (req->type >= MH_REQ_DIR_CREATE && req->type <= MH_REQ_DIR_DELETE_SNAPSHOT)
			answer_dir(req, ans);
		break;
	}
	pthread_mutex_unlock(&fake.mu);
}

static int send_msg(const struct mh_msg *m)
{
	uint8_t buf[MH_MSG_MAX];
	size_t len;
	if (mh_msg_encode(m, buf, sizeof(buf), &len) != 0)
		return -1;
	return send(fake.fd, buf, len, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static void *fake_helper(void *arg)
{
	static uint8_t buf[MH_MSG_MAX + 1];
	static struct mh_msg req, ans, held;
	bool holding = false;
	(void)arg;
	for (;;) {
		if (holding && !atomic_load(&fake.hold_clone)) {
			answer(&held, &ans);
			holding = false;
			atomic_store(&fake.clone_pending, 0);
			if (send_msg(&ans) != 0)
				break;
		}
		struct pollfd p = {.fd = fake.fd, .events = POLLIN};
		if (poll(&p, 1, 5) <= 0)
			continue;
		ssize_t n = recv(fake.fd, buf, sizeof(buf), 0);
		if (n <= 0 || mh_msg_decode(buf, (size_t)n, &req) != 0)
			break;
		atomic_fetch_add(&fake.requests[req.type], 1);
		if (req.type == MH_REQ_CLONE && atomic_load(&fake.hold_clone) && !holding) {
			held = req;
			holding = true;
			atomic_store(&fake.clone_pending, 1);
			continue;
		}
		answer(&req, &ans);
		if (send_msg(&ans) != 0)
			break;
	}
	close(fake.fd);
	return NULL;
}

static int nreq(int type)
{
	return atomic_load(&fake.requests[type]);
}

static void fail_next(int type, int kind, int skip)
{
	atomic_store(&fake.fail_skip, skip);
	atomic_store(&fake.fail_kind, kind);
	atomic_store(&fake.fail_type, type);
}

static void fail_none(void)
{
	atomic_store(&fake.fail_type, 0);
	atomic_store(&fake.fail_errno, 0);
}

/* ---- request builders ---- */

static struct ctl *ctl;
static struct store *st;

struct cap_buf {
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mv;
	Csi__V1__VolumeCapability__BlockVolume bv;
	Csi__V1__VolumeCapability__AccessMode am;
};

static Csi__V1__VolumeCapability *mount_cap(struct cap_buf *b, const char *fs, int mode)
{
	csi__v1__volume_capability__init(&b->cap);
	csi__v1__volume_capability__mount_volume__init(&b->mv);
	csi__v1__volume_capability__access_mode__init(&b->am);
	b->mv.fs_type = (char *)fs;
	b->am.mode = mode;
	b->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	b->cap.mount = &b->mv;
	b->cap.access_mode = &b->am;
	return &b->cap;
}

static Csi__V1__VolumeCapability *block_cap(struct cap_buf *b, int mode)
{
	csi__v1__volume_capability__init(&b->cap);
	csi__v1__volume_capability__block_volume__init(&b->bv);
	csi__v1__volume_capability__access_mode__init(&b->am);
	b->am.mode = mode;
	b->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	b->cap.block = &b->bv;
	b->cap.access_mode = &b->am;
	return &b->cap;
}

#define SNW   CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define SNMW  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
#define MNMW  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER
#define SNRO  CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY
#define MAXKV 8

/* One call of a handler: the response (if OK) lives in the arena until call_done(). */
struct call {
	struct ctl_arena *a;
	struct ctl_status st;
	void *resp;
	int code;
};

static struct call *call_new(void)
{
	struct call *c = calloc(1, sizeof(*c));
	c->a = ctl_arena_new();
	return c;
}

static char last_msg[CTL_MSG_MAX]; /* the message of the last call that failed */

static int call_run(struct call *c, ctl_handler fn, const void *req)
{
	c->code = fn(ctl, req, &c->resp, c->a, &c->st);
	if (c->code)
		snprintf(last_msg, sizeof(last_msg), "%s", c->st.msg);
	if (getenv("TEST_VERBOSE") && c->code)
		fprintf(stderr, "  -> %d %s\n", c->code, c->st.msg);
	return c->code;
}

static void call_done(struct call *c)
{
	ctl_arena_free(c->a);
	free(c);
}

/* Run fn once and return only the code. */
static int code_of(ctl_handler fn, const void *req)
{
	struct call *c = call_new();
	int code = call_run(c, fn, req);
	call_done(c);
	return code;
}

struct create_opts {
	const char *name;
	int64_t req, lim;
	int ncaps;
	Csi__V1__VolumeCapability *caps[2];
	const char *keys[MAXKV], *vals[MAXKV];
	const char *mkeys[MAXKV], *mvals[MAXKV];
	const char *snapshot, *volume; /* content source */
	const char *topo_node;         /* requisite topology */
};

/* CreateVolume; on OK, id_out gets the id and *cap_out the capacity. */
static int create(const struct create_opts *o, char *id_out, int64_t *cap_out)
{
	Csi__V1__CreateVolumeRequest req;
	Csi__V1__CapacityRange cr;
	Csi__V1__CreateVolumeRequest__ParametersEntry pe[MAXKV], *pp[MAXKV];
	Csi__V1__CreateVolumeRequest__MutableParametersEntry me[MAXKV], *mp[MAXKV];
	Csi__V1__VolumeContentSource cs;
	Csi__V1__VolumeContentSource__SnapshotSource ss;
	Csi__V1__VolumeContentSource__VolumeSource vs;
	Csi__V1__TopologyRequirement tr;
	Csi__V1__Topology topo, *topos[1] = {&topo};
	Csi__V1__Topology__SegmentsEntry seg, *segs[1] = {&seg};
	struct cap_buf cb;
	Csi__V1__VolumeCapability *one[1]; /* lives as long as cb, which it points into */

	csi__v1__create_volume_request__init(&req);
	csi__v1__capacity_range__init(&cr);
	cr.required_bytes = o->req;
	cr.limit_bytes = o->lim;
	req.name = (char *)o->name;
	req.capacity_range = &cr;
	if (o->ncaps) {
		req.n_volume_capabilities = (size_t)o->ncaps;
		req.volume_capabilities = (Csi__V1__VolumeCapability **)o->caps;
	} else {
		one[0] = mount_cap(&cb, "", SNW);
		req.n_volume_capabilities = 1;
		req.volume_capabilities = one;
	}
	for (int i = 0; i < MAXKV && o->keys[i]; i++) {
		csi__v1__create_volume_request__parameters_entry__init(&pe[i]);
		pe[i].key = (char *)o->keys[i];
		pe[i].value = (char *)o->vals[i];
		pp[i] = &pe[i];
		req.n_parameters++;
	}
	req.parameters = pp;
	for (int i = 0; i < MAXKV && o->mkeys[i]; i++) {
		csi__v1__create_volume_request__mutable_parameters_entry__init(&me[i]);
		me[i].key = (char *)o->mkeys[i];
		me[i].value = (char *)o->mvals[i];
		mp[i] = &me[i];
		req.n_mutable_parameters++;
	}
	req.mutable_parameters = mp;
	if (o->snapshot || o->volume) {
		csi__v1__volume_content_source__init(&cs);
		if (o->snapshot) {
			csi__v1__volume_content_source__snapshot_source__init(&ss);
			ss.snapshot_id = (char *)o->snapshot;
			cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs.snapshot = &ss;
		} else {
			csi__v1__volume_content_source__volume_source__init(&vs);
			vs.volume_id = (char *)o->volume;
			cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs.volume = &vs;
		}
		req.volume_content_source = &cs;
	}
	if (o->topo_node) {
		csi__v1__topology_requirement__init(&tr);
		csi__v1__topology__init(&topo);
		csi__v1__topology__segments_entry__init(&seg);
		seg.key = "topology.sepcsi.io/node";
		seg.value = (char *)o->topo_node;
		topo.n_segments = 1;
		topo.segments = segs;
		tr.n_requisite = 1;
		tr.requisite = topos;
		req.accessibility_requirements = &tr;
	}
	struct call *c = call_new();
	int code = call_run(c, ctl_create_volume, &req);
	if (code == CTL_OK) {
		Csi__V1__CreateVolumeResponse *r = c->resp;
		if (id_out)
			snprintf(id_out, 64, "%s", r->volume->volume_id);
		if (cap_out)
			*cap_out = r->volume->capacity_bytes;
		/* The response names its source exactly as asked. */
		if (o->snapshot)
			CHECK(r->volume->content_source &&
			      strcmp(r->volume->content_source->snapshot->snapshot_id,
			             o->snapshot) == 0);
		if (o->volume)
			CHECK(r->volume->content_source &&
			      strcmp(r->volume->content_source->volume->volume_id, o->volume) == 0);
	}
	call_done(c);
	return code;
}

static int delete_volume(const char *id)
{
	Csi__V1__DeleteVolumeRequest req;
	csi__v1__delete_volume_request__init(&req);
	req.volume_id = (char *)id;
	return code_of(ctl_delete_volume, &req);
}

static int snapshot(const char *name, const char *vid, char *id_out, int64_t *size_out)
{
	Csi__V1__CreateSnapshotRequest req;
	csi__v1__create_snapshot_request__init(&req);
	req.name = (char *)name;
	req.source_volume_id = (char *)vid;
	struct call *c = call_new();
	int code = call_run(c, ctl_create_snapshot, &req);
	if (code == CTL_OK) {
		Csi__V1__CreateSnapshotResponse *r = c->resp;
		CHECK(r->snapshot->ready_to_use && r->snapshot->creation_time &&
		      r->snapshot->creation_time->seconds > 1700000000 &&
		      strcmp(r->snapshot->source_volume_id, vid) == 0);
		if (id_out)
			snprintf(id_out, 64, "%s", r->snapshot->snapshot_id);
		if (size_out)
			*size_out = r->snapshot->size_bytes;
	}
	call_done(c);
	return code;
}

static int delete_snapshot(const char *id)
{
	Csi__V1__DeleteSnapshotRequest req;
	csi__v1__delete_snapshot_request__init(&req);
	req.snapshot_id = (char *)id;
	return code_of(ctl_delete_snapshot, &req);
}

static int publish(const char *vid, const char *node, Csi__V1__VolumeCapability *cap, bool ro)
{
	Csi__V1__ControllerPublishVolumeRequest req;
	csi__v1__controller_publish_volume_request__init(&req);
	req.volume_id = (char *)vid;
	req.node_id = (char *)node;
	req.volume_capability = cap;
	req.readonly = ro;
	return code_of(ctl_controller_publish_volume, &req);
}

static int unpublish(const char *vid, const char *node)
{
	Csi__V1__ControllerUnpublishVolumeRequest req;
	csi__v1__controller_unpublish_volume_request__init(&req);
	req.volume_id = (char *)vid;
	req.node_id = (char *)node;
	return code_of(ctl_controller_unpublish_volume, &req);
}

static int expand(const char *vid, int64_t req_bytes, int64_t lim, Csi__V1__VolumeCapability *cap,
                  int64_t *cap_out, bool *node_exp)
{
	Csi__V1__ControllerExpandVolumeRequest req;
	Csi__V1__CapacityRange cr;
	csi__v1__controller_expand_volume_request__init(&req);
	csi__v1__capacity_range__init(&cr);
	cr.required_bytes = req_bytes;
	cr.limit_bytes = lim;
	req.volume_id = (char *)vid;
	req.capacity_range = &cr;
	req.volume_capability = cap;
	struct call *c = call_new();
	int code = call_run(c, ctl_controller_expand_volume, &req);
	if (code == CTL_OK) {
		Csi__V1__ControllerExpandVolumeResponse *r = c->resp;
		if (cap_out)
			*cap_out = r->capacity_bytes;
		if (node_exp)
			*node_exp = r->node_expansion_required;
	}
	call_done(c);
	return code;
}

static int modify(const char *vid, const char *key, const char *value)
{
	Csi__V1__ControllerModifyVolumeRequest req;
	Csi__V1__ControllerModifyVolumeRequest__MutableParametersEntry e, *ep[1] = {&e};
	csi__v1__controller_modify_volume_request__init(&req);
	csi__v1__controller_modify_volume_request__mutable_parameters_entry__init(&e);
	req.volume_id = (char *)vid;
	if (key) {
		e.key = (char *)key;
		e.value = (char *)value;
		req.n_mutable_parameters = 1;
		req.mutable_parameters = ep;
	}
	return code_of(ctl_controller_modify_volume, &req);
}

/* ControllerGetVolume: the condition's abnormal flag, and how many nodes it is published to. */
static int get_volume(const char *vid, bool *abnormal, size_t *nodes)
{
	Csi__V1__ControllerGetVolumeRequest req;
	csi__v1__controller_get_volume_request__init(&req);
	req.volume_id = (char *)vid;
	struct call *c = call_new();
	int code = call_run(c, ctl_controller_get_volume, &req);
	if (code == CTL_OK) {
		Csi__V1__ControllerGetVolumeResponse *r = c->resp;
		CHECK(r->status && r->status->volume_condition && r->volume &&
		      strcmp(r->volume->volume_id, vid) == 0);
		if (abnormal)
			*abnormal = r->status->volume_condition->abnormal;
		if (nodes)
			*nodes = r->status->n_published_node_ids;
	}
	call_done(c);
	return code;
}

/* ---- the tests ---- */

static void test_create_params(void)
{
	struct cap_buf b1, b2;
	char id[64], id2[64];
	int64_t cap = 0;
	struct store_volume *v = NULL;

	/* Raw block: no file system; 1 MiB is enough. */
	struct create_opts o = {.name = "blk", .req = 1, .ncaps = 1, .caps = {block_cap(&b1, SNW)}};
	CHECK(create(&o, id, &cap) == CTL_OK && cap == 1 * MiB);
	CHECK(store_volume_get(st, id, &v) == STORE_OK && strcmp(v->fs_type, "") == 0);
	store_volume_free(v);
	/* fsType is about mounts: ignored for block, so one StorageClass serves both. */
	o = (struct create_opts){.name = "blk2",
	                         .ncaps = 1,
	                         .caps = {block_cap(&b1, SNMW)},
	                         .keys = {"fsType"},
	                         .vals = {"xfs"}};
	CHECK(create(&o, id, &cap) == CTL_OK && cap == 1 * GiB);
	/* Block and mount together: no volume is both. */
	o = (struct create_opts){
	    .name = "mixed", .ncaps = 2, .caps = {block_cap(&b1, SNW), mount_cap(&b2, "", SNW)}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* Multi-node modes cannot be honoured by a node-local image. */
	o = (struct create_opts){.name = "multi", .ncaps = 1, .caps = {mount_cap(&b1, "", MNMW)}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* xfs: from the parameter or the capability, with its 300 MiB minimum. */
	o = (struct create_opts){
	    .name = "x1", .req = 10 * MiB, .keys = {"fsType"}, .vals = {"xfs"}};
	CHECK(create(&o, id, &cap) == CTL_OK && cap == 300 * MiB);
	CHECK(store_volume_get(st, id, &v) == STORE_OK && strcmp(v->fs_type, "xfs") == 0 &&
	      !v->nouuid);
	store_volume_free(v);
	o = (struct create_opts){
	    .name = "x2", .lim = 200 * MiB, .keys = {"fsType"}, .vals = {"xfs"}};
	CHECK(create(&o, NULL, NULL) == CTL_OUT_OF_RANGE);
	o = (struct create_opts){
	    .name = "x3", .lim = 200 * MiB, .ncaps = 1, .caps = {mount_cap(&b1, "xfs", SNW)}};
	CHECK(create(&o, NULL, NULL) == CTL_OUT_OF_RANGE);
	o = (struct create_opts){
	    .name = "b1", .req = 100 * MiB, .keys = {"fsType"}, .vals = {"btrfs"}};
	CHECK(create(&o, NULL, &cap) == CTL_OK && cap == 109 * MiB);
	/* fsType must agree with the capabilities. */
	o = (struct create_opts){.name = "x4",
	                         .ncaps = 1,
	                         .caps = {mount_cap(&b1, "ext4", SNW)},
	                         .keys = {"fsType"},
	                         .vals = {"xfs"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "x5", .keys = {"fsType"}, .vals = {"ntfs"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* Unknown keys are refused; the sidecars' keys are ignored; mkfsOptions are kept. */
	o = (struct create_opts){.name = "u1", .keys = {"fstype"}, .vals = {"xfs"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "m1",
	                         .req = 32 * MiB,
	                         .keys = {"csi.storage.k8s.io/pvc/name", "mkfsOptions"},
	                         .vals = {"claim", "-E lazy_itable_init=1"}};
	CHECK(create(&o, id, NULL) == CTL_OK);
	CHECK(store_volume_get(st, id, &v) == STORE_OK &&
	      strcmp(v->mkfs_options, "-E lazy_itable_init=1") == 0 &&
	      strcmp(v->parameters, "mkfsOptions=-E lazy_itable_init=1\n") == 0);
	store_volume_free(v);
	/* Same request, other sidecar metadata: the same volume. */
	o.vals[0] = "another-claim";
	CHECK(create(&o, id2, NULL) == CTL_OK && strcmp(id, id2) == 0);
	o.vals[1] = "-E lazy_itable_init=0";
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS);
	o = (struct create_opts){.name = "m2", .keys = {"mkfsOptions"}, .vals = {"-L \"x\""}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* Mutable parameters: known ones only, checked like ControllerModifyVolume does. */
	o = (struct create_opts){
	    .name = "mu1", .req = 64 * MiB, .mkeys = {"expandLimitBytes"}, .mvals = {"1Gi"}};
	CHECK(create(&o, id, NULL) == CTL_OK);
	CHECK(create(&o, id2, NULL) == CTL_OK && strcmp(id, id2) == 0);
	o.mvals[0] = "2Gi";
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS);
	o = (struct create_opts){
	    .name = "mu2", .req = 64 * MiB, .mkeys = {"expandLimitBytes"}, .mvals = {"32Mi"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "mu3", .mkeys = {"iops"}, .mvals = {"100"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "mu4", .mkeys = {"expandLimitBytes"}, .mvals = {"lots"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* Topology elsewhere, or more than the data directory holds: RESOURCE_EXHAUSTED. */
	o = (struct create_opts){.name = "t1", .topo_node = "other-node"};
	CHECK(create(&o, NULL, NULL) == CTL_RESOURCE_EXHAUSTED);
	o = (struct create_opts){.name = "t2", .topo_node = "n1"};
	CHECK(create(&o, NULL, NULL) == CTL_OK);
	o = (struct create_opts){.name = "t2", .topo_node = "other-node"};
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS); /* it exists, not there */
	int creates = nreq(MH_REQ_CREATE);
	o = (struct create_opts){.name = "big", .req = 51 * GiB};
	CHECK(create(&o, NULL, NULL) == CTL_RESOURCE_EXHAUSTED);
	CHECK(nreq(MH_REQ_CREATE) == creates);
	/* An existing volume is still returned when the disk has filled since. */
	atomic_store(&fake.avail, 0);
	o = (struct create_opts){.name = "t2", .topo_node = "n1"};
	CHECK(create(&o, NULL, NULL) == CTL_OK);
	o = (struct create_opts){.name = "t2", .topo_node = "other-node"};
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS); /* it exists, not there */
	atomic_store(&fake.avail, 50 * GiB);
}

static void test_snapshots_and_copies(void)
{
	struct cap_buf b1;
	char vid[64], sid[64], sid2[64], rid[64], rid2[64], cid[64];
	int64_t cap = 0, size = 0;
	struct store_volume *v = NULL;

	struct create_opts o = {
	    .name = "src", .req = 400 * MiB, .keys = {"fsType"}, .vals = {"xfs"}};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	CHECK(snapshot("snap-1", vid, sid, &size) == CTL_OK && size == 400 * MiB);
	CHECK(strncmp(sid, "ss-", 3) == 0 && strlen(sid) == 35);
	CHECK(snapshot("snap-1", vid, sid2, NULL) == CTL_OK && strcmp(sid, sid2) == 0);
	CHECK(nreq(MH_REQ_SNAPSHOT) == 1);
	CHECK(snapshot("snap-1", "sv-00000000000000000000000000000000", NULL, NULL) ==
	      CTL_ALREADY_EXISTS);
	CHECK(snapshot("snap-2", "sv-00000000000000000000000000000000", NULL, NULL) ==
	      CTL_NOT_FOUND);
	CHECK(snapshot("snap-2", "../../etc", NULL, NULL) == CTL_NOT_FOUND);
	CHECK(snapshot("", vid, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(snapshot("snap-3", "", NULL, NULL) == CTL_INVALID_ARGUMENT);
	fail_next(MH_REQ_SNAPSHOT, MH_E_NOSPACE, 0);
	CHECK(snapshot("snap-full", vid, NULL, NULL) == CTL_RESOURCE_EXHAUSTED);
	fail_none();

	/* GetSnapshot. */
	Csi__V1__GetSnapshotRequest gs;
	csi__v1__get_snapshot_request__init(&gs);
	gs.snapshot_id = sid;
	struct call *c = call_new();
	CHECK(call_run(c, ctl_get_snapshot, &gs) == CTL_OK);
	CHECK(c->code == CTL_OK &&
	      strcmp(((Csi__V1__GetSnapshotResponse *)c->resp)->snapshot->snapshot_id, sid) == 0);
	call_done(c);
	gs.snapshot_id = "ss-00000000000000000000000000000000";
	CHECK(code_of(ctl_get_snapshot, &gs) == CTL_NOT_FOUND);
	gs.snapshot_id = "x";
	CHECK(code_of(ctl_get_snapshot, &gs) == CTL_NOT_FOUND);
	gs.snapshot_id = "";
	CHECK(code_of(ctl_get_snapshot, &gs) == CTL_INVALID_ARGUMENT);

	/* Restore: the snapshot's file system, at least its size, mounted with nouuid. */
	o = (struct create_opts){.name = "restored", .snapshot = sid};
	CHECK(create(&o, rid, &cap) == CTL_OK && cap == 400 * MiB);
	CHECK(nreq(MH_REQ_CLONE) == 1);
	CHECK(store_volume_get(st, rid, &v) == STORE_OK && strcmp(v->fs_type, "xfs") == 0 &&
	      v->nouuid && strncmp(v->content_source, "snapshot:ss-", 12) == 0);
	store_volume_free(v);
	CHECK(create(&o, rid2, NULL) == CTL_OK && strcmp(rid, rid2) == 0);
	CHECK(nreq(MH_REQ_CLONE) == 1);
	/* Larger than the source: grown by the helper. */
	o = (struct create_opts){.name = "restored-big", .req = 1 * GiB, .snapshot = sid};
	CHECK(create(&o, NULL, &cap) == CTL_OK && cap == 1 * GiB);
	/* Smaller than the source: impossible. */
	o = (struct create_opts){.name = "restored-small", .lim = 300 * MiB, .snapshot = sid};
	CHECK(create(&o, NULL, NULL) == CTL_OUT_OF_RANGE);
	/* Another file system, or raw block, than the source: incompatible. */
	o = (struct create_opts){
	    .name = "r-ext4", .snapshot = sid, .keys = {"fsType"}, .vals = {"ext4"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){
	    .name = "r-blk", .snapshot = sid, .ncaps = 1, .caps = {block_cap(&b1, SNW)}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* A missing source: NOT_FOUND; the same name with another source: ALREADY_EXISTS. */
	o = (struct create_opts){.name = "r-none",
	                         .snapshot = "ss-11111111111111111111111111111111"};
	CHECK(create(&o, NULL, NULL) == CTL_NOT_FOUND);
	o = (struct create_opts){.name = "r-none2", .snapshot = "/etc/passwd"};
	CHECK(create(&o, NULL, NULL) == CTL_NOT_FOUND);
	o = (struct create_opts){.name = "r-none3",
	                         .volume = "sv-11111111111111111111111111111111"};
	CHECK(create(&o, NULL, NULL) == CTL_NOT_FOUND);
	o = (struct create_opts){.name = "restored", .volume = vid};
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS);
	o = (struct create_opts){.name = "restored"};
	CHECK(create(&o, NULL, NULL) == CTL_ALREADY_EXISTS);

	/* Clone of a volume. */
	o = (struct create_opts){.name = "clone", .volume = vid};
	CHECK(create(&o, cid, &cap) == CTL_OK && cap == 400 * MiB);
	CHECK(store_volume_get(st, cid, &v) == STORE_OK && v->nouuid &&
	      strcmp(v->content_source, "volume:") > 0);
	store_volume_free(v);

	/* Snapshots outlive their volume and still restore; the restore repeats idempotently. */
	CHECK(delete_volume(vid) == CTL_OK);
	CHECK(!img_exists(vid) && img_exists(sid));
	o = (struct create_opts){.name = "after-delete", .snapshot = sid};
	CHECK(create(&o, NULL, NULL) == CTL_OK);
	o = (struct create_opts){.name = "clone", .volume = vid};
	CHECK(create(&o, rid2, NULL) == CTL_OK && strcmp(rid2, cid) == 0);
	CHECK(snapshot("snap-1", vid, sid2, NULL) == CTL_OK && strcmp(sid, sid2) == 0);

	/* DeleteSnapshot: gone for good; again OK; nonsense ids OK. */
	CHECK(delete_snapshot(sid) == CTL_OK && !img_exists(sid));
	CHECK(delete_snapshot(sid) == CTL_OK);
	CHECK(delete_snapshot("ss-../../x") == CTL_OK);
	CHECK(delete_snapshot("") == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "after-snap-delete", .snapshot = sid};
	CHECK(create(&o, NULL, NULL) == CTL_NOT_FOUND);
}

static void test_publish(void)
{
	struct cap_buf b1, b2;
	char vid[64], bid[64];
	struct create_opts o = {.name = "pub", .req = 32 * MiB};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	o = (struct create_opts){.name = "pub-blk", .ncaps = 1, .caps = {block_cap(&b1, SNW)}};
	CHECK(create(&o, bid, NULL) == CTL_OK);

	Csi__V1__VolumeCapability *mc = mount_cap(&b1, "", SNW);
	CHECK(publish(vid, "n1", mc, false) == CTL_OK);
	CHECK(publish(vid, "n1", mc, false) == CTL_OK);
	CHECK(publish(vid, "n1", mc, true) == CTL_ALREADY_EXISTS);
	CHECK(publish(vid, "n1", mount_cap(&b2, "", SNRO), false) == CTL_ALREADY_EXISTS);
	CHECK(publish(vid, "n2", mc, false) == CTL_NOT_FOUND);
	CHECK(publish("sv-22222222222222222222222222222222", "n1", mc, false) == CTL_NOT_FOUND);
	CHECK(publish("nope", "n1", mc, false) == CTL_NOT_FOUND);
	CHECK(publish(vid, "", mc, false) == CTL_INVALID_ARGUMENT);
	CHECK(publish("", "n1", mc, false) == CTL_INVALID_ARGUMENT);
	CHECK(publish(vid, "n1", NULL, false) == CTL_INVALID_ARGUMENT);
	/* The capability must fit the volume: no block access to a file system. */
	CHECK(publish(vid, "n1", block_cap(&b2, SNW), false) == CTL_INVALID_ARGUMENT);
	CHECK(publish(bid, "n1", mount_cap(&b2, "", SNW), false) == CTL_INVALID_ARGUMENT);
	CHECK(publish(bid, "n1", block_cap(&b2, SNW), true) == CTL_OK);

	size_t nodes = 0;
	CHECK(get_volume(vid, NULL, &nodes) == CTL_OK && nodes == 1);
	/* Attached: DeleteVolume refuses. */
	CHECK(delete_volume(vid) == CTL_FAILED_PRECONDITION && img_exists(vid));
	CHECK(unpublish(vid, "n1") == CTL_OK);
	CHECK(unpublish(vid, "n1") == CTL_OK);
	CHECK(unpublish(vid, "other-node") == CTL_OK);
	CHECK(unpublish("sv-33333333333333333333333333333333", "n1") == CTL_OK);
	CHECK(unpublish("", "n1") == CTL_INVALID_ARGUMENT);
	CHECK(get_volume(vid, NULL, &nodes) == CTL_OK && nodes == 0);
	CHECK(unpublish(bid, "") == CTL_OK); /* no node: from every node */
	CHECK(get_volume(bid, NULL, &nodes) == CTL_OK && nodes == 0);
	CHECK(delete_volume(vid) == CTL_OK);
	CHECK(delete_volume(bid) == CTL_OK);
}

static void test_publish_limit(struct mh_client *mh)
{
	struct cap_buf b1;
	char a[64], b[64];
	struct ctl_config cfg = {
	    .driver_name = "t.sepcsi.io", .node_id = "n1", .max_volumes_per_node = 1};
	struct ctl *saved = ctl;
	ctl = ctl_new(&cfg, st, mh);
	struct create_opts o = {.name = "lim-a", .req = 16 * MiB};
	CHECK(create(&o, a, NULL) == CTL_OK);
	o.name = "lim-b";
	CHECK(create(&o, b, NULL) == CTL_OK);
	Csi__V1__VolumeCapability *mc = mount_cap(&b1, "", SNW);
	CHECK(publish(a, "n1", mc, false) == CTL_OK);
	CHECK(publish(b, "n1", mc, false) == CTL_RESOURCE_EXHAUSTED);
	CHECK(publish(a, "n1", mc, false) == CTL_OK); /* already there: not counted twice */
	CHECK(unpublish(a, "n1") == CTL_OK);
	CHECK(publish(b, "n1", mc, false) == CTL_OK);
	CHECK(unpublish(b, NULL) == CTL_OK);
	CHECK(delete_volume(a) == CTL_OK && delete_volume(b) == CTL_OK);
	ctl_free(ctl);
	ctl = saved;
}

/* Pages through ListVolumes with page size max; returns the entries seen. */
static size_t list_all_volumes(int max, bool *ok)
{
	char token[64] = "";
	size_t total = 0;
	*ok = true;
	for (int pages = 0; pages < 1000; pages++) {
		Csi__V1__ListVolumesRequest req;
		csi__v1__list_volumes_request__init(&req);
		req.max_entries = max;
		req.starting_token = token;
		struct call *c = call_new();
		if (call_run(c, ctl_list_volumes, &req) != CTL_OK) {
			*ok = false;
			call_done(c);
			break;
		}
		Csi__V1__ListVolumesResponse *r = c->resp;
		if (max && r->n_entries > (size_t)max)
			*ok = false;
		for (size_t i = 0; i < r->n_entries; i++) {
			if (!r->entries[i]->status || !r->entries[i]->status->volume_condition)
				*ok = false;
		}
		total += r->n_entries;
		bool more = r->next_token && *r->next_token;
		if (more)
			snprintf(token, sizeof(token), "%s", r->next_token);
		call_done(c);
		if (!more)
			break;
	}
	return total;
}

static void test_lists(void)
{
	char vid[64], sid[64], name[32];
	bool ok;
	size_t before = list_all_volumes(0, &ok);
	CHECK(ok);
	for (int i = 0; i < 7; i++) {
		snprintf(name, sizeof(name), "list-%d", i);
		struct create_opts o = {.name = name, .req = 16 * MiB};
		CHECK(create(&o, vid, NULL) == CTL_OK);
	}
	CHECK(list_all_volumes(0, &ok) == before + 7 && ok);
	CHECK(list_all_volumes(3, &ok) == before + 7 && ok);
	CHECK(list_all_volumes(1, &ok) == before + 7 && ok);

	Csi__V1__ListVolumesRequest lv;
	csi__v1__list_volumes_request__init(&lv);
	lv.starting_token = "not-a-token";
	CHECK(code_of(ctl_list_volumes, &lv) == CTL_ABORTED);
	lv.starting_token = "";
	lv.max_entries = -1;
	CHECK(code_of(ctl_list_volumes, &lv) == CTL_INVALID_ARGUMENT);
	/* A token stays valid when the volume it names is deleted. */
	lv.max_entries = 2;
	struct call *c = call_new();
	CHECK(call_run(c, ctl_list_volumes, &lv) == CTL_OK);
	char token[64] = "";
	if (c->code == CTL_OK)
		snprintf(token, sizeof(token), "%s",
		         ((Csi__V1__ListVolumesResponse *)c->resp)->next_token);
	call_done(c);
	CHECK(strncmp(token, "sv-", 3) == 0);
	CHECK(delete_volume(token) == CTL_OK);
	lv.starting_token = token;
	CHECK(code_of(ctl_list_volumes, &lv) == CTL_OK);

	/* Snapshots: by id, by source, paginated. */
	struct create_opts so = {.name = "list-snap-src", .req = 16 * MiB};
	CHECK(create(&so, vid, NULL) == CTL_OK);
	CHECK(snapshot("ls-1", vid, sid, NULL) == CTL_OK);
	CHECK(snapshot("ls-2", vid, NULL, NULL) == CTL_OK);
	CHECK(snapshot("ls-3", vid, NULL, NULL) == CTL_OK);
	Csi__V1__ListSnapshotsRequest ls;
	csi__v1__list_snapshots_request__init(&ls);
	ls.snapshot_id = sid;
	c = call_new();
	CHECK(call_run(c, ctl_list_snapshots, &ls) == CTL_OK &&
	      ((Csi__V1__ListSnapshotsResponse *)c->resp)->n_entries == 1);
	call_done(c);
	ls.snapshot_id = "ss-44444444444444444444444444444444";
	c = call_new();
	CHECK(call_run(c, ctl_list_snapshots, &ls) == CTL_OK &&
	      ((Csi__V1__ListSnapshotsResponse *)c->resp)->n_entries == 0);
	call_done(c);
	ls.snapshot_id = "";
	ls.source_volume_id = vid;
	ls.max_entries = 2;
	c = call_new();
	CHECK(call_run(c, ctl_list_snapshots, &ls) == CTL_OK);
	Csi__V1__ListSnapshotsResponse *lr = c->resp;
	CHECK(lr && lr->n_entries == 2 && lr->next_token && *lr->next_token);
	snprintf(token, sizeof(token), "%s", lr && lr->next_token ? lr->next_token : "");
	call_done(c);
	ls.starting_token = token;
	c = call_new();
	CHECK(call_run(c, ctl_list_snapshots, &ls) == CTL_OK);
	lr = c->resp;
	CHECK(lr && lr->n_entries == 1 && (!lr->next_token || !*lr->next_token));
	call_done(c);
	ls.starting_token = "sv-bogus";
	CHECK(code_of(ctl_list_snapshots, &ls) == CTL_ABORTED);
	ls.starting_token = "";
	ls.source_volume_id = "sv-55555555555555555555555555555555";
	c = call_new();
	CHECK(call_run(c, ctl_list_snapshots, &ls) == CTL_OK &&
	      ((Csi__V1__ListSnapshotsResponse *)c->resp)->n_entries == 0);
	call_done(c);
}

static void test_expand_modify(void)
{
	struct cap_buf b1;
	char vid[64], bid[64];
	int64_t cap = 0;
	bool nexp = false;
	struct create_opts o = {.name = "exp", .req = 64 * MiB};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	o = (struct create_opts){
	    .name = "exp-blk", .req = 8 * MiB, .ncaps = 1, .caps = {block_cap(&b1, SNW)}};
	CHECK(create(&o, bid, NULL) == CTL_OK);

	CHECK(expand(vid, 100 * MiB + 1, 0, NULL, &cap, &nexp) == CTL_OK && cap == 101 * MiB &&
	      nexp);
	int resizes = nreq(MH_REQ_RESIZE);
	CHECK(expand(vid, 100 * MiB + 1, 0, NULL, &cap, &nexp) == CTL_OK && cap == 101 * MiB);
	CHECK(expand(vid, 10 * MiB, 0, NULL, &cap, NULL) == CTL_OK && cap == 101 * MiB);
	CHECK(nreq(MH_REQ_RESIZE) == resizes);
	CHECK(expand(vid, 10 * MiB, 50 * MiB, NULL, NULL, NULL) == CTL_OUT_OF_RANGE);
	CHECK(expand(vid, 0, 0, NULL, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(expand(vid, -1, 0, NULL, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(expand("", 1, 0, NULL, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(expand("sv-66666666666666666666666666666666", GiB, 0, NULL, NULL, NULL) ==
	      CTL_NOT_FOUND);
	CHECK(expand(vid, 200 * MiB, 0, block_cap(&b1, SNW), NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(expand(vid, 200 * MiB, 0, mount_cap(&b1, "ext4", SNW), &cap, NULL) == CTL_OK &&
	      cap == 200 * MiB);
	CHECK(expand(vid, 60 * GiB, 0, NULL, NULL, NULL) == CTL_RESOURCE_EXHAUSTED);
	/* Raw block: the resize refreshed the loop device; nothing for the node to do. */
	CHECK(expand(bid, 16 * MiB, 0, NULL, &cap, &nexp) == CTL_OK && cap == 16 * MiB && !nexp);
	struct store_volume *v = NULL;
	CHECK(store_volume_get(st, bid, &v) == STORE_OK && v->capacity_bytes == 16 * MiB);
	store_volume_free(v);

	/* NodeExpandVolume past what the node grows (an xfs past its most groups, EFBIG): the
	 * capacity range is not allowed, OUT_OF_RANGE; another refusal stays INVALID_ARGUMENT. */
	Csi__V1__NodeStageVolumeRequest sr;
	csi__v1__node_stage_volume_request__init(&sr);
	sr.volume_id = vid;
	sr.staging_target_path = "/var/lib/kubelet/plugins/kubernetes.io/csi/x/exp";
	sr.volume_capability = mount_cap(&b1, "ext4", SNW);
	CHECK(code_of(ctl_node_stage_volume, &sr) == CTL_OK);
	Csi__V1__NodeExpandVolumeRequest ne;
	csi__v1__node_expand_volume_request__init(&ne);
	ne.volume_id = vid;
	ne.volume_path = sr.staging_target_path;
	atomic_store(&fake.fail_errno, EFBIG);
	fail_next(MH_REQ_EXPAND, MH_E_REFUSED, 0);
	CHECK(code_of(ctl_node_expand_volume, &ne) == CTL_OUT_OF_RANGE);
	atomic_store(&fake.fail_errno, EINVAL);
	CHECK(code_of(ctl_node_expand_volume, &ne) == CTL_INVALID_ARGUMENT);
	fail_none();
	CHECK(code_of(ctl_node_expand_volume, &ne) == CTL_OK);
	Csi__V1__NodeUnstageVolumeRequest ur;
	csi__v1__node_unstage_volume_request__init(&ur);
	ur.volume_id = vid;
	ur.staging_target_path = sr.staging_target_path;
	CHECK(code_of(ctl_node_unstage_volume, &ur) == CTL_OK);

	/* expandLimitBytes: a ceiling that expansion honours. */
	CHECK(modify(vid, "expandLimitBytes", "300Mi") == CTL_OK);
	CHECK(modify(vid, "expandLimitBytes", "300Mi") == CTL_OK);
	CHECK(expand(vid, 400 * MiB, 0, NULL, NULL, NULL) == CTL_OUT_OF_RANGE);
	CHECK(expand(vid, 300 * MiB, 0, NULL, &cap, NULL) == CTL_OK && cap == 300 * MiB);
	CHECK(modify(vid, "expandLimitBytes", "100Mi") == CTL_INVALID_ARGUMENT);
	CHECK(modify(vid, "expandLimitBytes", "0") == CTL_OK);
	CHECK(expand(vid, 400 * MiB, 0, NULL, &cap, NULL) == CTL_OK && cap == 400 * MiB);
	CHECK(modify(vid, "iops", "100") == CTL_INVALID_ARGUMENT);
	CHECK(modify(vid, "expandLimitBytes", "much") == CTL_INVALID_ARGUMENT);
	CHECK(modify(vid, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(modify("", "expandLimitBytes", "0") == CTL_INVALID_ARGUMENT);
	CHECK(modify("sv-77777777777777777777777777777777", "expandLimitBytes", "0") ==
	      CTL_NOT_FOUND);
	CHECK(store_volume_get(st, vid, &v) == STORE_OK &&
	      strcmp(v->mutable_parameters, "expandLimitBytes=0\n") == 0);
	store_volume_free(v);
}

static void test_condition_and_validate(void)
{
	struct cap_buf b1, b2;
	char vid[64];
	bool abnormal = true;
	struct create_opts o = {
	    .name = "cond", .req = 32 * MiB, .keys = {"fsType"}, .vals = {"xfs"}};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	CHECK(get_volume(vid, &abnormal, NULL) == CTL_OK && !abnormal);
	CHECK(get_volume("sv-88888888888888888888888888888888", NULL, NULL) == CTL_NOT_FOUND);
	CHECK(get_volume("bad", NULL, NULL) == CTL_NOT_FOUND);
	CHECK(get_volume("", NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* The image disappears behind our back: abnormal, here and in ListVolumes. */
	pthread_mutex_lock(&fake.mu);
	img_del(vid);
	pthread_mutex_unlock(&fake.mu);
	CHECK(get_volume(vid, &abnormal, NULL) == CTL_OK && abnormal);
	struct store_volume *v = NULL;
	CHECK(store_volume_get(st, vid, &v) == STORE_OK && strstr(v->condition, "missing"));
	store_volume_free(v);
	/* The helper unreachable for a moment: the last finding stands. */
	fail_next(MH_REQ_RESIZE, MH_E_FAILED, 0);
	CHECK(get_volume(vid, &abnormal, NULL) == CTL_OK && abnormal);
	fail_none();

	/* ValidateVolumeCapabilities. */
	Csi__V1__ValidateVolumeCapabilitiesRequest vr;
	Csi__V1__VolumeCapability *caps[2];
	Csi__V1__ValidateVolumeCapabilitiesRequest__ParametersEntry pe, *pp[1] = {&pe};
	csi__v1__validate_volume_capabilities_request__init(&vr);
	csi__v1__validate_volume_capabilities_request__parameters_entry__init(&pe);
	vr.volume_id = vid;
	caps[0] = mount_cap(&b1, "xfs", SNW);
	caps[1] = mount_cap(&b2, "", SNMW);
	vr.n_volume_capabilities = 2;
	vr.volume_capabilities = caps;
	struct call *c = call_new();
	CHECK(call_run(c, ctl_validate_volume_capabilities, &vr) == CTL_OK &&
	      ((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->confirmed &&
	      ((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)
	              ->confirmed->n_volume_capabilities == 2);
	call_done(c);
	pe.key = "fsType";
	pe.value = "xfs";
	vr.n_parameters = 1;
	vr.parameters = pp;
	c = call_new();
	CHECK(call_run(c, ctl_validate_volume_capabilities, &vr) == CTL_OK &&
	      ((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->confirmed);
	call_done(c);
	/* cppcheck-suppress redundantAssignment ; the first value was read through vr.parameters */
	pe.value = "ext4";
	c = call_new();
	CHECK(call_run(c, ctl_validate_volume_capabilities, &vr) == CTL_OK &&
	      !((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->confirmed &&
	      *((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->message);
	call_done(c);
	vr.n_parameters = 0;
	caps[1] = block_cap(&b2, SNW);
	c = call_new();
	CHECK(call_run(c, ctl_validate_volume_capabilities, &vr) == CTL_OK &&
	      !((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->confirmed);
	call_done(c);
	caps[1] = mount_cap(&b2, "", MNMW);
	c = call_new();
	CHECK(call_run(c, ctl_validate_volume_capabilities, &vr) == CTL_OK &&
	      !((Csi__V1__ValidateVolumeCapabilitiesResponse *)c->resp)->confirmed);
	call_done(c);
	b2.cap.access_mode = NULL;
	CHECK(code_of(ctl_validate_volume_capabilities, &vr) == CTL_INVALID_ARGUMENT);
	vr.n_volume_capabilities = 0;
	CHECK(code_of(ctl_validate_volume_capabilities, &vr) == CTL_INVALID_ARGUMENT);
	vr.n_volume_capabilities = 1;
	vr.volume_id = "sv-99999999999999999999999999999999";
	CHECK(code_of(ctl_validate_volume_capabilities, &vr) == CTL_NOT_FOUND);
}

static int64_t capacity(Csi__V1__VolumeCapability *cap, const char *pk, const char *pv,
                        const char *node, int *code, int64_t *min, int64_t *max)
{
	Csi__V1__GetCapacityRequest req;
	Csi__V1__VolumeCapability *caps[1] = {cap};
	Csi__V1__GetCapacityRequest__ParametersEntry pe, *pp[1] = {&pe};
	Csi__V1__Topology topo;
	Csi__V1__Topology__SegmentsEntry seg, *segs[1] = {&seg};
	csi__v1__get_capacity_request__init(&req);
	csi__v1__get_capacity_request__parameters_entry__init(&pe);
	csi__v1__topology__init(&topo);
	csi__v1__topology__segments_entry__init(&seg);
	if (cap) {
		req.n_volume_capabilities = 1;
		req.volume_capabilities = caps;
	}
	if (pk) {
		pe.key = (char *)pk;
		pe.value = (char *)pv;
		req.n_parameters = 1;
		req.parameters = pp;
	}
	if (node) {
		seg.key = "topology.sepcsi.io/node";
		seg.value = (char *)node;
		topo.n_segments = 1;
		topo.segments = segs;
		req.accessible_topology = &topo;
	}
	int64_t avail = -1;
	struct call *c = call_new();
	*code = call_run(c, ctl_get_capacity, &req);
	if (*code == CTL_OK) {
		Csi__V1__GetCapacityResponse *r = c->resp;
		avail = r->available_capacity;
		if (min)
			*min = r->minimum_volume_size ? r->minimum_volume_size->value : -1;
		if (max)
			*max = r->maximum_volume_size ? r->maximum_volume_size->value : -1;
	}
	call_done(c);
	return avail;
}

static void test_capacity(void)
{
	struct cap_buf b1;
	int code;
	int64_t min = 0, max = 0;
	atomic_store(&fake.avail, 5 * GiB + 123);
	CHECK(capacity(NULL, NULL, NULL, NULL, &code, &min, &max) == 5 * GiB + 123 &&
	      min == 16 * MiB && max == 5 * GiB);
	CHECK(capacity(NULL, NULL, NULL, "n1", &code, NULL, NULL) == 5 * GiB + 123);
	CHECK(capacity(NULL, NULL, NULL, "n2", &code, NULL, &max) == 0 && code == CTL_OK &&
	      max == -1);
	CHECK(capacity(mount_cap(&b1, "xfs", SNW), NULL, NULL, NULL, &code, &min, NULL) ==
	          5 * GiB + 123 &&
	      min == 300 * MiB);
	CHECK(capacity(NULL, "fsType", "btrfs", NULL, &code, &min, NULL) == 5 * GiB + 123 &&
	      min == 109 * MiB);
	CHECK(capacity(block_cap(&b1, SNW), NULL, NULL, NULL, &code, &min, NULL) == 5 * GiB + 123 &&
	      min == 1 * MiB);
	CHECK(capacity(mount_cap(&b1, "", MNMW), NULL, NULL, NULL, &code, NULL, NULL) == 0 &&
	      code == CTL_OK);
	CHECK(capacity(mount_cap(&b1, "vfat", SNW), NULL, NULL, NULL, &code, NULL, NULL) == 0 &&
	      code == CTL_OK);
	capacity(NULL, "color", "blue", NULL, &code, NULL, NULL);
	CHECK(code == CTL_INVALID_ARGUMENT);
	b1.cap.access_mode = NULL;
	capacity(&b1.cap, NULL, NULL, NULL, &code, NULL, NULL);
	CHECK(code == CTL_INVALID_ARGUMENT);
	atomic_store(&fake.avail, 50 * GiB);
}

static int group_create(const char *name, char **ids, size_t n, char *gid_out, size_t *members)
{
	Csi__V1__CreateVolumeGroupSnapshotRequest req;
	csi__v1__create_volume_group_snapshot_request__init(&req);
	req.name = (char *)name;
	req.n_source_volume_ids = n;
	req.source_volume_ids = ids;
	struct call *c = call_new();
	int code = call_run(c, ctl_create_volume_group_snapshot, &req);
	if (code == CTL_OK) {
		Csi__V1__VolumeGroupSnapshot *g =
		    ((Csi__V1__CreateVolumeGroupSnapshotResponse *)c->resp)->group_snapshot;
		CHECK(g->ready_to_use && g->creation_time);
		for (size_t i = 0; i < g->n_snapshots; i++)
			CHECK(strcmp(g->snapshots[i]->group_snapshot_id, g->group_snapshot_id) ==
			      0);
		if (gid_out)
			snprintf(gid_out, 64, "%s", g->group_snapshot_id);
		if (members)
			*members = g->n_snapshots;
	}
	call_done(c);
	return code;
}

static void test_groups(void)
{
	char v1[64], v2[64], v3[64], gid[64], gid2[64];
	size_t members = 0;
	struct create_opts o = {.name = "g1", .req = 16 * MiB};
	CHECK(create(&o, v1, NULL) == CTL_OK);
	o.name = "g2";
	CHECK(create(&o, v2, NULL) == CTL_OK);
	o.name = "g3";
	CHECK(create(&o, v3, NULL) == CTL_OK);
	char *ids[3] = {v1, v2, v3};

	/* GroupControllerGetCapabilities. */
	Csi__V1__GroupControllerGetCapabilitiesRequest gc;
	csi__v1__group_controller_get_capabilities_request__init(&gc);
	struct call *c = call_new();
	CHECK(call_run(c, ctl_group_controller_get_capabilities, &gc) == CTL_OK &&
	      ((Csi__V1__GroupControllerGetCapabilitiesResponse *)c->resp)->n_capabilities == 1);
	call_done(c);

	int snaps = nreq(MH_REQ_SNAPSHOT);
	CHECK(group_create("grp", ids, 2, gid, &members) == CTL_OK && members == 2);
	CHECK(strncmp(gid, "gs-", 3) == 0 && strlen(gid) == 35);
	CHECK(nreq(MH_REQ_SNAPSHOT) == snaps + 2);
	char *rev[2] = {v2, v1};
	CHECK(group_create("grp", rev, 2, gid2, &members) == CTL_OK && strcmp(gid, gid2) == 0);
	CHECK(nreq(MH_REQ_SNAPSHOT) == snaps + 2);
	CHECK(group_create("grp", ids, 3, NULL, NULL) == CTL_ALREADY_EXISTS);
	char *missing[2] = {v1, "sv-abababababababababababababababab"};
	CHECK(group_create("grp-x", missing, 2, NULL, NULL) == CTL_NOT_FOUND);
	char *dup[2] = {v1, v1};
	CHECK(group_create("grp-d", dup, 2, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(group_create("grp-e", ids, 0, NULL, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(group_create("", ids, 1, NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* The members are snapshots that only the group may delete. */
	struct store_snapshot **m = NULL;
	size_t n = 0;
	CHECK(store_snapshot_list_group(st, gid, &m, &n) == STORE_OK && n == 2);
	char m0[64] = "", m1[64] = "";
	if (n == 2) {
		snprintf(m0, sizeof(m0), "%s", m[0]->id);
		snprintf(m1, sizeof(m1), "%s", m[1]->id);
	}
	store_snapshot_list_free(m, n);
	CHECK(delete_snapshot(m0) == CTL_INVALID_ARGUMENT && img_exists(m0));
	/* ... but any of them restores. */
	o = (struct create_opts){.name = "from-member", .snapshot = m0};
	CHECK(create(&o, NULL, NULL) == CTL_OK);

	/* Get, with the member list checked. */
	Csi__V1__GetVolumeGroupSnapshotRequest gg;
	csi__v1__get_volume_group_snapshot_request__init(&gg);
	char *both[2] = {m1, m0}, *one[1] = {m0};
	gg.group_snapshot_id = gid;
	gg.n_snapshot_ids = 2;
	gg.snapshot_ids = both;
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_OK);
	gg.n_snapshot_ids = 1;
	gg.snapshot_ids = one;
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_INVALID_ARGUMENT);
	gg.group_snapshot_id = "gs-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_NOT_FOUND);
	/* An unknown group is NOT_FOUND whatever the list; a known one needs the list. */
	gg.n_snapshot_ids = 0;
	gg.snapshot_ids = NULL;
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_NOT_FOUND);
	gg.group_snapshot_id = "gs-bogus";
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_NOT_FOUND);
	gg.group_snapshot_id = gid;
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_INVALID_ARGUMENT);

	/* Two volumes in use are cut together, in one GROUP_SNAPSHOT. */
	struct store_staging s1 = {.volume_id = v1,
	                           .staging_path = "/var/lib/kubelet/a",
	                           .fs_type = "ext4",
	                           .mount_flags = "",
	                           .access_type = 2,
	                           .access_mode = 1};
	struct store_staging s2 = s1;
	s2.volume_id = v3;
	CHECK(store_staging_put(st, &s1) == STORE_OK);
	char *pair[2] = {v1, v3};
	CHECK(group_create("grp-one-busy", ids, 2, NULL, NULL) == CTL_OK);
	CHECK(store_staging_put(st, &s2) == STORE_OK);
	int groups = nreq(MH_REQ_GROUP_SNAPSHOT), singles = nreq(MH_REQ_SNAPSHOT);
	CHECK(group_create("grp-busy", pair, 2, NULL, NULL) == CTL_OK);
	CHECK(nreq(MH_REQ_GROUP_SNAPSHOT) == groups + 1 && nreq(MH_REQ_SNAPSHOT) == singles);
	/* A failed group leaves none of its snapshots: each is removed again. */
	int gdels = nreq(MH_REQ_DELETE_SNAPSHOT);
	fail_next(MH_REQ_GROUP_SNAPSHOT, MH_E_PRECONDITION, 0);
	CHECK(group_create("grp-busy-fail", pair, 2, NULL, NULL) == CTL_FAILED_PRECONDITION);
	fail_none();
	CHECK(nreq(MH_REQ_DELETE_SNAPSHOT) == gdels + 2);
	CHECK(store_staging_delete(st, v1) == STORE_OK && store_staging_delete(st, v3) == STORE_OK);

	/* A failure half way: the snapshots already cut are removed, nothing is recorded. */
	int dels = nreq(MH_REQ_DELETE_SNAPSHOT);
	fail_next(MH_REQ_SNAPSHOT, MH_E_NOSPACE, 1);
	CHECK(group_create("grp-fail", ids, 3, NULL, NULL) == CTL_RESOURCE_EXHAUSTED);
	fail_none();
	CHECK(nreq(MH_REQ_DELETE_SNAPSHOT) == dels + 1);
	struct store_group_snapshot *g = NULL;
	CHECK(store_group_snapshot_get_by_name(st, "grp-fail", &g) == STORE_NOTFOUND);

	/* Delete: the list must match; then all goes; again OK. */
	Csi__V1__DeleteVolumeGroupSnapshotRequest dg;
	csi__v1__delete_volume_group_snapshot_request__init(&dg);
	dg.group_snapshot_id = gid;
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_INVALID_ARGUMENT);
	dg.n_snapshot_ids = 1;
	dg.snapshot_ids = one;
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_INVALID_ARGUMENT);
	dg.n_snapshot_ids = 2;
	dg.snapshot_ids = both;
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_OK);
	CHECK(!img_exists(m0) && !img_exists(m1));
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_OK);
	dg.group_snapshot_id = "";
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_INVALID_ARGUMENT);
	dg.group_snapshot_id = "gs-bogus";
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_OK);
	dg.group_snapshot_id = "gs-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
	dg.n_snapshot_ids = 0;
	dg.snapshot_ids = NULL;
	CHECK(code_of(ctl_delete_volume_group_snapshot, &dg) == CTL_OK);
	dg.snapshot_ids = both;
	dg.n_snapshot_ids = 2;
	gg.group_snapshot_id = gid;
	gg.n_snapshot_ids = 2;
	gg.snapshot_ids = both;
	CHECK(code_of(ctl_get_volume_group_snapshot, &gg) == CTL_NOT_FOUND);
}

struct bg_create {
	struct create_opts o;
	int code;
};

static void *create_thread(void *arg)
{
	struct bg_create *b = arg;
	b->code = create(&b->o, NULL, NULL);
	return NULL;
}

/* A slow clone holds its name and its source, and nothing else. */
static void test_concurrency(struct mh_client *mh)
{
	char vid[64], other[64], sid[64];
	struct create_opts o = {.name = "busy-src", .req = 16 * MiB};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	o.name = "busy-other";
	CHECK(create(&o, other, NULL) == CTL_OK);
	CHECK(snapshot("busy-snap", vid, sid, NULL) == CTL_OK);

	atomic_store(&fake.hold_clone, 1);
	struct bg_create bg = {.o = {.name = "slow-clone", .volume = vid}};
	pthread_t t;
	pthread_create(&t, NULL, create_thread, &bg);
	while (!atomic_load(&fake.clone_pending))
		tap_sleep_ms(1);
	CHECK(create(&bg.o, NULL, NULL) == CTL_ABORTED); /* same name */
	CHECK(delete_volume(vid) == CTL_ABORTED);        /* its source */
	CHECK(snapshot("busy-snap-2", vid, NULL, NULL) == CTL_ABORTED);
	CHECK(expand(vid, 32 * MiB, 0, NULL, NULL, NULL) == CTL_ABORTED);
	/* Other volumes, snapshots and the helper itself carry on. */
	struct mh_err e;
	CHECK(mh_ping(mh, &e) == 0);
	CHECK(expand(other, 32 * MiB, 0, NULL, NULL, NULL) == CTL_OK);
	CHECK(snapshot("busy-snap-3", other, NULL, NULL) == CTL_OK);
	CHECK(delete_snapshot(sid) == CTL_OK); /* not the busy clone's source */
	atomic_store(&fake.hold_clone, 0);
	pthread_join(t, NULL);
	CHECK(bg.code == CTL_OK);
	CHECK(delete_volume(vid) == CTL_OK);
}

struct bg_delete {
	const char *id;
	atomic_int code; /* -1 until the request has answered */
};

static void *delete_thread(void *arg)
{
	struct bg_delete *b = arg;
	atomic_store(&b->code, delete_volume(b->id));
	return NULL;
}

/*
 * Reconciliation holds a volume's key only for a store read or one helper
 * operation: a request that finds it there waits for it (a second at most)
 * rather than answer ABORTED (a CO would retry, but a request just after
 * start need not fail).
 * Reconciliation itself never waits: a key any request holds is skipped.
 */
static void test_reconcile_keys(void)
{
	char vid[64];
	struct create_opts o = {.name = "reconciled", .req = 16 * MiB};
	CHECK(create(&o, vid, NULL) == CTL_OK);
	CHECK(ctl_lock_background(ctl, vid));
	CHECK(!ctl_lock_background(ctl, vid));
	struct bg_delete bg = {.id = vid, .code = -1};
	pthread_t t;
	pthread_create(&t, NULL, delete_thread, &bg);
	tap_sleep_ms(200);
	CHECK(atomic_load(&bg.code) == -1); /* waiting, not ABORTED */
	ctl_unlock(ctl, vid);
	pthread_join(t, NULL);
	CHECK(atomic_load(&bg.code) == CTL_OK);
	/* But only a while: a key reconciliation keeps (a long restage) answers ABORTED. */
	CHECK(ctl_lock_background(ctl, "restaging"));
	CHECK(!ctl_lock(ctl, "restaging"));
	ctl_unlock(ctl, "restaging");

	CHECK(ctl_lock(ctl, "held-by-a-request"));
	CHECK(!ctl_lock(ctl, "held-by-a-request"));
	CHECK(!ctl_lock_background(ctl, "held-by-a-request"));
	const char *keys[2] = {"free-key", "held-by-a-request"};
	CHECK(!ctl_lock_keys_background(ctl, keys, 2));
	CHECK(ctl_lock(ctl, "free-key")); /* none of the keys kept */
	ctl_unlock(ctl, "free-key");
	ctl_unlock(ctl, "held-by-a-request");
}

/* ---- directory volumes ---- */

#define PVC_NS  "csi.storage.k8s.io/pvc/namespace"
#define PVC_NM  "csi.storage.k8s.io/pvc/name"
#define PV_NM   "csi.storage.k8s.io/pv/name"
#define DIRBASE "/srv/vols"

/* CreateVolume of a directory volume in DIRBASE, with up to six more parameters. */
static int create_dir(const char *name, const char *const *kv, char *id_out)
{
	struct create_opts o = {.name = name,
	                        .req = 10 * MiB,
	                        .keys = {"type", "baseDir"},
	                        .vals = {"directory", DIRBASE}};
	for (size_t i = 0; kv && kv[2 * i] && i < MAXKV - 2; i++) {
		o.keys[2 + i] = kv[2 * i];
		o.vals[2 + i] = kv[2 * i + 1];
	}
	return create(&o, id_out, NULL);
}

static void test_dir_params(void)
{
	struct cap_buf b1;
	int creates = nreq(MH_REQ_DIR_CREATE);
	struct create_opts o = {.name = "d-bad", .keys = {"type"}, .vals = {"folder"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* baseDir is required, and a canonical absolute path. */
	o = (struct create_opts){.name = "d-bad", .keys = {"type"}, .vals = {"directory"}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT && strstr(last_msg, "baseDir"));
	const char *const rel[] = {"baseDir", "srv/vols", NULL};
	o = (struct create_opts){
	    .name = "d-bad", .keys = {"type", rel[0]}, .vals = {"directory", rel[1]}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o.vals[1] = "/srv/../etc";
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* Directory keys with an image volume, image keys with a directory volume. */
	const char *const image_keys[][2] = {{"baseDir", DIRBASE},
	                                     {"pathPattern", "x"},
	                                     {"onDelete", "retain"},
	                                     {"archiveOnDelete", "true"}};
	for (size_t i = 0; i < 4; i++) {
		o = (struct create_opts){
		    .name = "d-bad", .keys = {image_keys[i][0]}, .vals = {image_keys[i][1]}};
		CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT &&
		      strstr(last_msg, "directory volumes only"));
		o.keys[1] = "type";
		o.vals[1] = "image";
		CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	}
	const char *const bad[][4] = {
	    {"fsType", "xfs"},
	    {"mkfsOptions", "-m0"},
	    {"onDelete", "shred"},
	    {"archiveOnDelete", "yes"},
	    {"onDelete", "retain", "archiveOnDelete", "true"},
	    {"onDelete", "archive", "archiveOnDelete", "false"},
	    {"pathPattern", "${.PVC.namespace}/x"}, /* no metadata given */
	    {"pathPattern", "${.PVC.uid}"},
	    {"pathPattern", "a b"},
	    {"pathPattern", "archived-x"},
	    {"pathPattern", "../x"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *const kv[] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL};
		CHECK(create_dir("d-bad", kv, NULL) == CTL_INVALID_ARGUMENT);
	}
	CHECK(create_dir("d-bad", (const char *const[]){"pathPattern", "${.PV.name}", NULL},
	                 NULL) == CTL_INVALID_ARGUMENT &&
	      strstr(last_msg, PV_NM) && strstr(last_msg, "--extra-create-metadata"));
	/* Capabilities: mount only, no fs type, no flags, one writer on one node. */
	const char *const kvd[] = {"type", "directory", "baseDir", DIRBASE};
	Csi__V1__VolumeCapability *caps[] = {block_cap(&b1, SNW)};
	o = (struct create_opts){.name = "d-bad", .ncaps = 1, .caps = {caps[0]}};
	for (size_t i = 0; i < 2; i++) {
		o.keys[i] = kvd[2 * i];
		o.vals[i] = kvd[2 * i + 1];
	}
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT &&
	      strstr(last_msg, "directory volumes are mount volumes"));
	o.caps[0] = mount_cap(&b1, "ext4", SNW);
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* A node-local base: every single-node mode, no multi-node one. */
	o.caps[0] = mount_cap(&b1, "", MNMW);
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT && strstr(last_msg, "node-local"));
	char *flags[] = {"noatime"};
	o.caps[0] = mount_cap(&b1, "", SNW);
	b1.mv.n_mount_flags = 1;
	b1.mv.mount_flags = flags;
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT && strstr(last_msg, "mount_flags"));
	CHECK(nreq(MH_REQ_DIR_CREATE) == creates);
}

static void test_dir_create_delete(void)
{
	char id[64], id2[64], owner[MH_ID_MAX + 1];
	struct store_volume *v = NULL;

	/* No metadata, default pattern: the request's name, sanitised. */
	CHECK(create_dir("sanity vol", NULL, id) == CTL_OK);
	CHECK(dir_exists(DIRBASE, "sanity-vol", owner) && strcmp(owner, id) == 0);
	CHECK(store_volume_get(st, id, &v) == STORE_OK && strcmp(v->kind, "directory") == 0 &&
	      strcmp(v->dir_name, "sanity-vol") == 0 && strcmp(v->on_delete, "delete") == 0 &&
	      !v->quota && v->capacity_bytes == 10 * MiB && strcmp(v->fs_type, "") == 0);
	store_volume_free(v);
	int creates = nreq(MH_REQ_DIR_CREATE);
	CHECK(create_dir("sanity vol", NULL, id2) == CTL_OK && strcmp(id, id2) == 0);
	CHECK(nreq(MH_REQ_DIR_CREATE) == creates);
	/* The volume_context says where it is and that the capacity is advisory here. */
	Csi__V1__ControllerGetVolumeRequest gv;
	csi__v1__controller_get_volume_request__init(&gv);
	gv.volume_id = id;
	struct call *c = call_new();
	CHECK(call_run(c, ctl_controller_get_volume, &gv) == CTL_OK);
	Csi__V1__Volume *vol = ((Csi__V1__ControllerGetVolumeResponse *)c->resp)->volume;
	bool where = false, advisory = false;
	for (size_t i = 0; vol && i < vol->n_volume_context; i++) {
		where = where || strcmp(vol->volume_context[i]->value, DIRBASE "/sanity-vol") == 0;
		advisory = advisory || strcmp(vol->volume_context[i]->value, "advisory") == 0;
	}
	CHECK(where && advisory);
	call_done(c);

	/* Metadata: namespace-claim-pv; a pattern of its own. */
	const char *const meta[] = {PVC_NS, "team", PVC_NM, "data", PV_NM, "pvc-1", NULL};
	CHECK(create_dir("pvc-1", meta, id) == CTL_OK &&
	      dir_exists(DIRBASE, "team-data-pvc-1", NULL));
	const char *const pat[] = {
	    "pathPattern", "${.PVC.namespace}/${pvc.metadata.name}", PVC_NS, "team", PVC_NM, "logs",
	    NULL};
	CHECK(create_dir("pvc-2", pat, id2) == CTL_OK && dir_exists(DIRBASE, "team/logs", NULL));

	/* Another claim for the same directory: ALREADY_EXISTS naming it and its volume. */
	const char *const same[] = {"pathPattern", "${.PVC.namespace}/${pvc.metadata.name}",
	                            PVC_NS,        "team",
	                            PVC_NM,        "logs",
	                            "onDelete",    "retain",
	                            NULL};
	creates = nreq(MH_REQ_DIR_CREATE);
	CHECK(create_dir("pvc-3", same, NULL) == CTL_ALREADY_EXISTS &&
	      strstr(last_msg, DIRBASE "/team/logs") && strstr(last_msg, id2));
	CHECK(nreq(MH_REQ_DIR_CREATE) == creates);
	/* The same name with other parameters: ALREADY_EXISTS too (idempotency). */
	CHECK(create_dir("pvc-2", same, NULL) == CTL_ALREADY_EXISTS);

	/* DeleteVolume passes the recorded mode: delete (default), retain, archive. */
	CHECK(delete_volume(id) == CTL_OK && last_dir().mode == MH_DIR_DELETE &&
	      !dir_exists(DIRBASE, "team-data-pvc-1", NULL));
	const char *const keep[] = {"onDelete", "retain", NULL};
	CHECK(create_dir("keep-me", keep, id) == CTL_OK);
	CHECK(delete_volume(id) == CTL_OK && last_dir().mode == MH_DIR_RETAIN &&
	      strcmp(last_dir().name, "keep-me") == 0 && strcmp(last_dir().base, DIRBASE) == 0);
	CHECK(dir_exists(DIRBASE, "keep-me", owner) && owner[0] == '\0');
	CHECK(store_volume_get(st, id, &v) == STORE_NOTFOUND);
	/* A retained directory is nobody's: a new volume there is refused by the helper. */
	CHECK(create_dir("keep-me", NULL, NULL) == CTL_ALREADY_EXISTS);
	const char *const arch[] = {"archiveOnDelete", "true", NULL};
	CHECK(create_dir("old-data", arch, id) == CTL_OK);
	CHECK(delete_volume(id) == CTL_OK && last_dir().mode == MH_DIR_ARCHIVE &&
	      dir_exists(DIRBASE, "archived-old-data", NULL));
	const char *const both[] = {"onDelete", "archive", "archiveOnDelete", "true", NULL};
	CHECK(create_dir("old-data-2", both, id) == CTL_OK);
	CHECK(delete_volume(id) == CTL_OK && last_dir().mode == MH_DIR_ARCHIVE);
	CHECK(delete_volume(id2) == CTL_OK && !dir_exists(DIRBASE, "team/logs", NULL));
	/* The helper refuses a base that is not in its policy: INVALID_ARGUMENT. */
	fail_next(MH_REQ_DIR_CAPACITY, MH_E_REFUSED, 0);
	CHECK(create_dir("not-a-base", NULL, NULL) == CTL_INVALID_ARGUMENT);
	fail_none();
}

static void test_dir_intent_reconcile(void)
{
	/* An rpcd that died after the helper made the directory, before the row. */
	const char *vid = "sv-0123456789abcdef0123456789abcdef";
	pthread_mutex_lock(&fake.mu);
	dir_put(DIRBASE, "left-behind", vid, 10 * MiB);
	pthread_mutex_unlock(&fake.mu);
	struct store_intent in = {.key = "create:left-behind",
	                          .op = "create",
	                          .object_id = (char *)vid,
	                          .detail = "base=" DIRBASE "\nkind=directory\nname=left-behind\n"};
	CHECK(store_intent_put(st, &in) == STORE_OK);
	CHECK(ctl_reconcile(ctl) == 0);
	struct mh_req_dir q = last_dir();
	CHECK(!dir_exists(DIRBASE, "left-behind", NULL) && q.mode == MH_DIR_DELETE &&
	      strcmp(q.volume_id, vid) == 0 && strcmp(q.name, "left-behind") == 0);
	struct store_intent *left = NULL;
	CHECK(store_intent_get(st, "create:left-behind", &left) == STORE_NOTFOUND);
	store_intent_free(left);
	/* A delete cut short is finished with the mode it recorded. */
	char id[64];
	const char *const keep[] = {"onDelete", "retain", NULL};
	CHECK(create_dir("half-deleted", keep, id) == CTL_OK);
	in = (struct store_intent){.key = "delete:x",
	                           .op = "delete",
	                           .object_id = id,
	                           .detail = "base=" DIRBASE
	                                     "\nkind=directory\nmode=retain\nname=half-deleted\n"};
	char key[80];
	snprintf(key, sizeof(key), "delete:%s", id);
	in.key = key;
	CHECK(store_intent_put(st, &in) == STORE_OK);
	CHECK(ctl_reconcile(ctl) == 0);
	CHECK(last_dir().mode == MH_DIR_RETAIN && dir_exists(DIRBASE, "half-deleted", NULL));
	struct store_volume *v = NULL;
	CHECK(store_volume_get(st, id, &v) == STORE_NOTFOUND);
}

static int64_t dir_capacity(const char *base, Csi__V1__VolumeCapability *cap, int *code)
{
	Csi__V1__GetCapacityRequest req;
	Csi__V1__VolumeCapability *caps[1] = {cap};
	Csi__V1__GetCapacityRequest__ParametersEntry pe[2], *pp[2] = {&pe[0], &pe[1]};
	csi__v1__get_capacity_request__init(&req);
	csi__v1__get_capacity_request__parameters_entry__init(&pe[0]);
	csi__v1__get_capacity_request__parameters_entry__init(&pe[1]);
	pe[0].key = "type";
	pe[0].value = "directory";
	pe[1].key = "baseDir";
	pe[1].value = (char *)base;
	req.parameters = pp;
	req.n_parameters = base ? 2 : 1;
	if (cap) {
		req.n_volume_capabilities = 1;
		req.volume_capabilities = caps;
	}
	int64_t avail = -1;
	struct call *c = call_new();
	*code = call_run(c, ctl_get_capacity, &req);
	if (*code == CTL_OK) {
		Csi__V1__GetCapacityResponse *r = c->resp;
		avail = r->available_capacity;
		CHECK(r->minimum_volume_size && r->minimum_volume_size->value == 1 * MiB);
	}
	call_done(c);
	return avail;
}

static void test_dir_expand_capacity(void)
{
	struct cap_buf b1;
	char id[64];
	int64_t cap = 0;
	bool node_exp = true;
	int code;

	const char *const lim[] = {"expandLimitBytes", "64Mi", NULL};
	struct create_opts o = {.name = "grow",
	                        .req = 10 * MiB,
	                        .keys = {"type", "baseDir", lim[0]},
	                        .vals = {"directory", "/quota/vols", lim[1]}};
	CHECK(create(&o, id, NULL) == CTL_OK);
	struct store_volume *v = NULL;
	CHECK(store_volume_get(st, id, &v) == STORE_OK && v->quota);
	store_volume_free(v);
	int expands = nreq(MH_REQ_DIR_EXPAND), resizes = nreq(MH_REQ_RESIZE);
	CHECK(expand(id, 33 * MiB, 0, NULL, &cap, &node_exp) == CTL_OK && cap == 33 * MiB &&
	      !node_exp);
	CHECK(nreq(MH_REQ_DIR_EXPAND) == expands + 1 && nreq(MH_REQ_RESIZE) == resizes);
	CHECK(last_dir().size_bytes == 33 * MiB && strcmp(last_dir().base, "/quota/vols") == 0);
	CHECK(expand(id, 65 * MiB, 0, NULL, NULL, NULL) == CTL_OUT_OF_RANGE);
	CHECK(expand(id, 40 * MiB, 0, block_cap(&b1, SNW), NULL, NULL) == CTL_INVALID_ARGUMENT);

	/* NodeExpandVolume has nothing to grow: the capacity, no helper call. */
	Csi__V1__NodeStageVolumeRequest sr;
	csi__v1__node_stage_volume_request__init(&sr);
	sr.volume_id = id;
	sr.staging_target_path = "/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount";
	sr.volume_capability = mount_cap(&b1, "", SNW);
	int stages = nreq(MH_REQ_STAGE);
	CHECK(code_of(ctl_node_stage_volume, &sr) == CTL_OK && nreq(MH_REQ_STAGE) == stages);
	Csi__V1__NodeExpandVolumeRequest ne;
	csi__v1__node_expand_volume_request__init(&ne);
	ne.volume_id = id;
	ne.volume_path = sr.staging_target_path;
	struct call *c = call_new();
	int node_expands = nreq(MH_REQ_EXPAND);
	CHECK(call_run(c, ctl_node_expand_volume, &ne) == CTL_OK &&
	      ((Csi__V1__NodeExpandVolumeResponse *)c->resp)->capacity_bytes == 33 * MiB &&
	      nreq(MH_REQ_EXPAND) == node_expands);
	call_done(c);
	/* NodeGetVolumeStats at the staging path measures the directory itself (path ""). */
	Csi__V1__NodeGetVolumeStatsRequest sq;
	csi__v1__node_get_volume_stats_request__init(&sq);
	sq.volume_id = id;
	sq.volume_path = sr.staging_target_path;
	c = call_new();
	CHECK(call_run(c, ctl_node_get_volume_stats, &sq) == CTL_OK && last_dir().path[0] == '\0' &&
	      ((Csi__V1__NodeGetVolumeStatsResponse *)c->resp)->usage[0]->total == 33 * MiB);
	call_done(c);
	/* NodePublishVolume binds the directory (DIR_PUBLISH), with the mount group. */
	Csi__V1__NodePublishVolumeRequest pr;
	csi__v1__node_publish_volume_request__init(&pr);
	pr.volume_id = id;
	pr.staging_target_path = sr.staging_target_path;
	pr.target_path = "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv/mount";
	pr.volume_capability = mount_cap(&b1, "", SNW);
	pr.readonly = true;
	b1.mv.volume_mount_group = "2000";
	int pubs = nreq(MH_REQ_DIR_PUBLISH);
	CHECK(code_of(ctl_node_publish_volume, &pr) == CTL_OK &&
	      nreq(MH_REQ_DIR_PUBLISH) == pubs + 1 && nreq(MH_REQ_PUBLISH) == 0);
	struct mh_req_dir pq = last_dir();
	CHECK(strcmp(pq.path, pr.target_path) == 0 && pq.mode == 1 &&
	      pq.flags == MH_F_MOUNT_GROUP && pq.gid == 2000 && strcmp(pq.name, "grow") == 0);
	Csi__V1__NodeUnpublishVolumeRequest upr;
	csi__v1__node_unpublish_volume_request__init(&upr);
	upr.volume_id = id;
	upr.target_path = pr.target_path;
	CHECK(code_of(ctl_node_unpublish_volume, &upr) == CTL_OK &&
	      nreq(MH_REQ_DIR_UNPUBLISH) == 1 && strcmp(last_dir().path, pr.target_path) == 0);
	Csi__V1__NodeUnstageVolumeRequest ur;
	csi__v1__node_unstage_volume_request__init(&ur);
	ur.volume_id = id;
	ur.staging_target_path = sr.staging_target_path;
	int unstages = nreq(MH_REQ_UNSTAGE);
	CHECK(code_of(ctl_node_unstage_volume, &ur) == CTL_OK && nreq(MH_REQ_UNSTAGE) == unstages);

	/* GetCapacity of a base: DIR_CAPACITY. */
	atomic_store(&fake.avail, 7 * GiB);
	int caps = nreq(MH_REQ_DIR_CAPACITY), datas = nreq(MH_REQ_CAPACITY);
	CHECK(dir_capacity("/quota/vols", NULL, &code) == 7 * GiB && code == CTL_OK);
	CHECK(nreq(MH_REQ_DIR_CAPACITY) == caps + 1 && nreq(MH_REQ_CAPACITY) == datas);
	CHECK(strcmp(last_dir().base, "/quota/vols") == 0);
	CHECK(dir_capacity("/quota/vols", block_cap(&b1, SNW), &code) == 0 && code == CTL_OK);
	CHECK(dir_capacity(NULL, NULL, &code) == -1 && code == CTL_INVALID_ARGUMENT);
	atomic_store(&fake.avail, 50 * GiB);

	/* Its condition: the directory, measured; gone is abnormal. */
	bool abnormal = true;
	CHECK(get_volume(id, &abnormal, NULL) == CTL_OK && !abnormal);
	pthread_mutex_lock(&fake.mu);
	dir_find("/quota/vols", "grow")->base[0] = '\0';
	pthread_mutex_unlock(&fake.mu);
	CHECK(get_volume(id, &abnormal, NULL) == CTL_OK && abnormal);
	CHECK(delete_volume(id) == CTL_OK);
}

static void test_dir_snapshots(void)
{
	char vid[64], iid[64], sid[64], isid[64], rid[64], cid[64];
	int64_t size = 0, cap = 0;
	CHECK(create_dir("snap-src", NULL, vid) == CTL_OK);
	CHECK(snapshot("dir-snap", vid, sid, &size) == CTL_OK && size == 10 * MiB);
	CHECK(strcmp(last_dir().snapshot_id, sid) == 0 && strcmp(last_dir().name, "snap-src") == 0);
	struct store_snapshot *s = NULL;
	CHECK(store_snapshot_get(st, sid, &s) == STORE_OK && strcmp(s->kind, "directory") == 0 &&
	      strcmp(s->dir_base, DIRBASE) == 0);
	store_snapshot_free(s);
	/* Restore and clone within the base. */
	struct create_opts o = {.name = "dir-restored",
	                        .snapshot = sid,
	                        .keys = {"type", "baseDir"},
	                        .vals = {"directory", DIRBASE}};
	CHECK(create(&o, rid, &cap) == CTL_OK && cap == 10 * MiB);
	CHECK(last_dir().source_kind == MH_SRC_SNAPSHOT && strcmp(last_dir().source_id, sid) == 0);
	o = (struct create_opts){.name = "dir-clone",
	                         .volume = vid,
	                         .keys = {"type", "baseDir"},
	                         .vals = {"directory", DIRBASE}};
	CHECK(create(&o, cid, NULL) == CTL_OK && last_dir().source_kind == MH_SRC_VOLUME &&
	      strcmp(last_dir().source_name, "snap-src") == 0);
	/* Another base, or the other kind of volume: INVALID_ARGUMENT. */
	o.name = "dir-clone-elsewhere";
	o.vals[1] = "/srv/other";
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "image-from-dir", .snapshot = sid};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o = (struct create_opts){.name = "img-src", .req = 16 * MiB};
	CHECK(create(&o, iid, NULL) == CTL_OK);
	CHECK(snapshot("img-snap", iid, isid, NULL) == CTL_OK);
	o = (struct create_opts){.name = "dir-from-image",
	                         .snapshot = isid,
	                         .keys = {"type", "baseDir"},
	                         .vals = {"directory", DIRBASE}};
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	o.snapshot = NULL;
	o.volume = iid;
	CHECK(create(&o, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* Group snapshots of directory volumes are not supported (yet). */
	char *ids[2] = {vid, iid};
	CHECK(group_create("dir-group", ids, 2, NULL, NULL) == CTL_INVALID_ARGUMENT);
	/* DeleteSnapshot: DIR_DELETE_SNAPSHOT in its base. */
	int dels = nreq(MH_REQ_DIR_DELETE_SNAPSHOT);
	CHECK(delete_snapshot(sid) == CTL_OK && nreq(MH_REQ_DIR_DELETE_SNAPSHOT) == dels + 1 &&
	      strcmp(last_dir().base, DIRBASE) == 0 && !img_exists(sid));
	CHECK(delete_snapshot(isid) == CTL_OK && delete_volume(iid) == CTL_OK);
	CHECK(delete_volume(rid) == CTL_OK && delete_volume(cid) == CTL_OK &&
	      delete_volume(vid) == CTL_OK);
}

int main(void)
{
	char dir[] = "/tmp/sepcsi-ctlcs-XXXXXX", db[128];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(db, sizeof(db), "%s/t.db", dir);
	CHECK(store_open(db, &st) == STORE_OK);

	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
	pthread_mutex_init(&fake.mu, NULL);
	fake.fd = sv[1];
	atomic_store(&fake.avail, 50 * GiB);
	pthread_create(&fake.thr, NULL, fake_helper, NULL);
	struct mh_client *mh = mh_client_new(sv[0]);
	struct ctl_config cfg = {.driver_name = "t.sepcsi.io", .node_id = "n1"};
	ctl = ctl_new(&cfg, st, mh);

	test_create_params();
	test_snapshots_and_copies();
	test_publish();
	test_publish_limit(mh);
	test_lists();
	test_expand_modify();
	test_condition_and_validate();
	test_capacity();
	test_groups();
	test_concurrency(mh);
	test_reconcile_keys();
	test_dir_params();
	test_dir_create_delete();
	test_dir_intent_reconcile();
	test_dir_expand_capacity();
	test_dir_snapshots();

	/* Capabilities: exactly the fifteen implemented. */
	Csi__V1__ControllerGetCapabilitiesRequest cg;
	csi__v1__controller_get_capabilities_request__init(&cg);
	struct call *c = call_new();
	CHECK(call_run(c, ctl_controller_get_capabilities, &cg) == CTL_OK &&
	      ((Csi__V1__ControllerGetCapabilitiesResponse *)c->resp)->n_capabilities == 15);
	call_done(c);

	shutdown(sv[1], SHUT_RDWR);
	pthread_join(fake.thr, NULL);
	ctl_free(ctl);
	mh_client_free(mh);
	store_close(st);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	/* NOLINTNEXTLINE(cert-env33-c): removes the test's own mkdtemp directory */
	CHECK(system(cmd) == 0);
	return tap_done("test_controller_cs");
}
