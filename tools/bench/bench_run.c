/*
 * sepcsi-bench's client threads. Runs as the operator (root when the driver's
 * socket and the staging/target roots need it); the bench holds no privilege
 * of its own and uses only standard CSI calls, as a CO would make them:
 *
 *   plan: GetPluginCapabilities, ControllerGetCapabilities, and (without
 *         --skip-node) NodeGetCapabilities and NodeGetInfo, to decide whether
 *         to stage, whether to ControllerPublish (PUBLISH_UNPUBLISH_VOLUME,
 *         unless --attach says otherwise), and which topology to ask for.
 *   lifecycle i: CreateVolume <prefix>-<i> [ControllerPublishVolume]
 *         [NodeStageVolume] NodePublishVolume NodeUnpublishVolume
 *         [NodeUnstageVolume] [ControllerUnpublishVolume] DeleteVolume.
 *
 * The staging directory is created by the bench (the CO's job); for the target
 * only the parent is created, the driver creates the target itself. When a step
 * fails, the steps done so far are undone in reverse, so the bench leaves no
 * volume of its own behind where the driver lets it. Each thread has its own
 * channel. Nothing is fatal here but allocation failure.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define PATH_SIZE 4096

struct rpc_info {
	const char *name, *method;
	const ProtobufCMessageDescriptor *resp;
};

static const struct rpc_info rpcs[BR_N] = {
    [BR_CREATE] = {"CreateVolume", "/csi.v1.Controller/CreateVolume",
                   &csi__v1__create_volume_response__descriptor},
    [BR_CPUBLISH] = {"ControllerPublishVolume", "/csi.v1.Controller/ControllerPublishVolume",
                     &csi__v1__controller_publish_volume_response__descriptor},
    [BR_STAGE] = {"NodeStageVolume", "/csi.v1.Node/NodeStageVolume",
                  &csi__v1__node_stage_volume_response__descriptor},
    [BR_PUBLISH] = {"NodePublishVolume", "/csi.v1.Node/NodePublishVolume",
                    &csi__v1__node_publish_volume_response__descriptor},
    [BR_UNPUBLISH] = {"NodeUnpublishVolume", "/csi.v1.Node/NodeUnpublishVolume",
                      &csi__v1__node_unpublish_volume_response__descriptor},
    [BR_UNSTAGE] = {"NodeUnstageVolume", "/csi.v1.Node/NodeUnstageVolume",
                    &csi__v1__node_unstage_volume_response__descriptor},
    [BR_CUNPUBLISH] = {"ControllerUnpublishVolume", "/csi.v1.Controller/ControllerUnpublishVolume",
                       &csi__v1__controller_unpublish_volume_response__descriptor},
    [BR_DELETE] = {"DeleteVolume", "/csi.v1.Controller/DeleteVolume",
                   &csi__v1__delete_volume_response__descriptor},
    [BR_PROBE] = {"Probe", "/csi.v1.Identity/Probe", &csi__v1__probe_response__descriptor},
};

const char *bench_rpc_name(enum bench_rpc r)
{
	return rpcs[r].name;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		abort();
	return p;
}

/*
 * One timed call; its latency and any error are the thread's figures. req is a
 * protobuf-c request, passed whole (&req, not &req.base) so that cppcheck sees
 * its fields read.
 */
static int timed_call(struct bench_thread *t, struct csic_conn *c, enum bench_rpc r,
                      const void *req, ProtobufCMessage **resp)
{
	struct csic_status st;
	ProtobufCMessage *ignored = NULL;
	int64_t t0 = csic_now_ns();
	int code = csic_call(c, rpcs[r].method, req, rpcs[r].resp, resp ? resp : &ignored,
	                     t->run->cfg->timeout_ms, &st);

	bench_lat_add(&t->lat[r], csic_now_ns() - t0);
	atomic_fetch_add(&t->run->calls, 1);
	if (ignored)
		protobuf_c_message_free_unpacked(ignored, NULL);
	if (code != CSIC_OK) {
		int col = code > 0 && code < CSIC_NCODES ? code : CSIC_NCODES;
		if (t->errors[r][col]++ == 0 && !t->first_error[r][0])
			snprintf(t->first_error[r], sizeof(t->first_error[r]), "%s: %.200s",
			         csic_code_name(code), st.message);
		atomic_fetch_add(&t->run->errors, 1);
	}
	return code;
}

/* A call for the plan, which must succeed; prints why not. */
static ProtobufCMessage *plan_call(struct csic_conn *c, const char *method,
                                   const ProtobufCMessage *req,
                                   const ProtobufCMessageDescriptor *resp_desc,
                                   const struct bench_cfg *cfg)
{
	struct csic_status st;
	ProtobufCMessage *resp = NULL;

	if (csic_call(c, method, req, resp_desc, &resp, cfg->timeout_ms, &st) != CSIC_OK) {
		fprintf(stderr, "sepcsi-bench: %s: %s: %s\n", strrchr(method, '/') + 1,
		        csic_code_name(st.code), st.message);
		return NULL;
	}
	return resp;
}

int bench_plan(struct bench_run *run)
{
	const struct bench_cfg *cfg = run->cfg;
	struct bench_plan *p = &run->plan;
	struct csic_conn *c = csic_open(cfg->endpoint);
	int rc = -1;
	bool topology_matters = false, create_delete = false;

	Csi__V1__GetPluginCapabilitiesRequest pcreq =
	    CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *pc =
	    (void *)plan_call(c, "/csi.v1.Identity/GetPluginCapabilities", &pcreq.base,
	                      &csi__v1__get_plugin_capabilities_response__descriptor, cfg);
	if (!pc)
		goto out;
	for (size_t i = 0; i < pc->n_capabilities; i++) {
		const Csi__V1__PluginCapability *cap = pc->capabilities[i];
		if (cap->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    cap->service->type ==
		        CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS)
			topology_matters = true;
	}
	protobuf_c_message_free_unpacked(&pc->base, NULL);

	Csi__V1__ControllerGetCapabilitiesRequest ccreq =
	    CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *cc =
	    (void *)plan_call(c, "/csi.v1.Controller/ControllerGetCapabilities", &ccreq.base,
	                      &csi__v1__controller_get_capabilities_response__descriptor, cfg);
	if (!cc)
		goto out;
	for (size_t i = 0; i < cc->n_capabilities; i++) {
		const Csi__V1__ControllerServiceCapability *cap = cc->capabilities[i];
		if (cap->type_case != CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC)
			continue;
		if (cap->rpc->type ==
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME)
			create_delete = true;
		if (cap->rpc->type ==
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)
			p->controller_publish = true;
	}
	/* --attach no is Kubernetes' attachRequired: false; yes attaches regardless. */
	if (cfg->attach != BENCH_ATTACH_AUTO)
		p->controller_publish = cfg->attach == BENCH_ATTACH_YES;
	if (cfg->skip_node)
		p->controller_publish = false;
	protobuf_c_message_free_unpacked(&cc->base, NULL);
	if (!create_delete)
		fprintf(stderr, "sepcsi-bench: warning: the controller does not report "
		                "CREATE_DELETE_VOLUME; trying anyway\n");
	if (cfg->skip_node) {
		rc = 0;
		goto out;
	}

	Csi__V1__NodeGetCapabilitiesRequest ncreq = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *nc =
	    (void *)plan_call(c, "/csi.v1.Node/NodeGetCapabilities", &ncreq.base,
	                      &csi__v1__node_get_capabilities_response__descriptor, cfg);
	if (!nc)
		goto out;
	for (size_t i = 0; i < nc->n_capabilities; i++) {
		const Csi__V1__NodeServiceCapability *cap = nc->capabilities[i];
		if (cap->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC &&
		    cap->rpc->type ==
		        CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME)
			p->stage = true;
	}
	protobuf_c_message_free_unpacked(&nc->base, NULL);

	Csi__V1__NodeGetInfoRequest nireq = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *ni =
	    (void *)plan_call(c, "/csi.v1.Node/NodeGetInfo", &nireq.base,
	                      &csi__v1__node_get_info_response__descriptor, cfg);
	if (!ni)
		goto out;
	p->node_info = &ni->base;
	p->node_id = ni->node_id;
	if (topology_matters && ni->accessible_topology && ni->accessible_topology->n_segments)
		p->topology = ni->accessible_topology;
	rc = 0;
out:
	csic_close(c);
	return rc;
}

void bench_plan_free(struct bench_plan *p)
{
	if (p->node_info)
		protobuf_c_message_free_unpacked(p->node_info, NULL);
	memset(p, 0, sizeof(*p));
}

/* ---- one lifecycle ---- */

/* What one lifecycle holds between its steps. */
struct life {
	char name[128];
	char staging_dir[PATH_SIZE], staging[PATH_SIZE * 2];
	char target_dir[PATH_SIZE], target[PATH_SIZE + 16];
	Csi__V1__CreateVolumeResponse *created;
	Csi__V1__ControllerPublishVolumeResponse *attached;
	bool cpublished, staged, published;
};

/* A map<string,string> entry of any message: the same layout and wire form for all of them. */
struct map_entry {
	ProtobufCMessage base;
	char *key, *value;
};

/* Entries of a response map, re-typed as entries of a request map (desc). */
static void **map_copy(size_t n, void *const *from, const ProtobufCMessageDescriptor *desc)
{
	if (n == 0)
		return NULL;
	void **out = xcalloc(n, sizeof(void *));
	struct map_entry *e = xcalloc(n, sizeof(*e));

	for (size_t i = 0; i < n; i++) {
		const struct map_entry *f = from[i];
		protobuf_c_message_init(desc, &e[i]);
		e[i].key = f->key;
		e[i].value = f->value;
		out[i] = &e[i];
	}
	return out;
}

static void map_copy_free(void **m)
{
	if (m)
		free(m[0]);
	free(m);
}

static int create_volume(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	struct bench_run *run = t->run;
	const struct bench_cfg *cfg = run->cfg;
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__TopologyRequirement tr = CSI__V1__TOPOLOGY_REQUIREMENT__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry pe[BENCH_MAX_PARAMS];
	Csi__V1__CreateVolumeRequest__ParametersEntry *pp[BENCH_MAX_PARAMS];
	char kv[BENCH_MAX_PARAMS][256];

	req.name = l->name;
	if (cfg->capacity > 0) {
		cr.required_bytes = cfg->capacity;
		req.capacity_range = &cr;
	}
	req.n_volume_capabilities = 1;
	req.volume_capabilities = &run->cap;
	for (size_t i = 0; i < cfg->nparams; i++) {
		csi__v1__create_volume_request__parameters_entry__init(&pe[i]);
		snprintf(kv[i], sizeof(kv[i]), "%s", cfg->params[i]);
		char *eq = strchr(kv[i], '=');
		*eq = '\0';
		pe[i].key = kv[i];
		pe[i].value = eq + 1;
		pp[i] = &pe[i];
	}
	req.n_parameters = cfg->nparams;
	req.parameters = pp;
	if (run->plan.topology) {
		tr.n_requisite = tr.n_preferred = 1;
		tr.requisite = tr.preferred = &run->plan.topology;
		req.accessibility_requirements = &tr;
	}
	int code = timed_call(t, c, BR_CREATE, &req, (ProtobufCMessage **)&l->created);
	if (code == CSIC_DEADLINE_EXCEEDED || code == CSIC_CANCELLED) {
		/* It may exist anyway: ask again by name, as a CO would, to be able to delete it.
		 */
		struct csic_status st;
		ProtobufCMessage *again = NULL;
		if (csic_call(c, rpcs[BR_CREATE].method, &req.base, rpcs[BR_CREATE].resp, &again,
		              cfg->timeout_ms, &st) == CSIC_OK)
			l->created = (void *)again;
	}
	return code;
}

static int controller_publish(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__ControllerPublishVolumeRequest req =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	const Csi__V1__Volume *v = l->created->volume;

	req.volume_id = v->volume_id;
	req.node_id = t->run->plan.node_id;
	req.volume_capability = t->run->cap;
	req.n_volume_context = v->n_volume_context;
	req.volume_context = (void *)map_copy(
	    v->n_volume_context, (void *const *)v->volume_context,
	    &csi__v1__controller_publish_volume_request__volume_context_entry__descriptor);
	int code = timed_call(t, c, BR_CPUBLISH, &req, (ProtobufCMessage **)&l->attached);
	map_copy_free((void **)req.volume_context);
	l->cpublished = code == CSIC_OK;
	return code;
}

static int stage(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__NodeStageVolumeRequest req = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	const Csi__V1__Volume *v = l->created->volume;

	req.volume_id = v->volume_id;
	req.staging_target_path = l->staging;
	req.volume_capability = t->run->cap;
	req.n_volume_context = v->n_volume_context;
	req.volume_context =
	    (void *)map_copy(v->n_volume_context, (void *const *)v->volume_context,
	                     &csi__v1__node_stage_volume_request__volume_context_entry__descriptor);
	if (l->attached) {
		req.n_publish_context = l->attached->n_publish_context;
		req.publish_context = (void *)map_copy(
		    l->attached->n_publish_context, (void *const *)l->attached->publish_context,
		    &csi__v1__node_stage_volume_request__publish_context_entry__descriptor);
	}
	int code = timed_call(t, c, BR_STAGE, &req, NULL);
	map_copy_free((void **)req.volume_context);
	map_copy_free((void **)req.publish_context);
	l->staged = code == CSIC_OK;
	return code;
}

static int publish(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__NodePublishVolumeRequest req = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	const Csi__V1__Volume *v = l->created->volume;

	req.volume_id = v->volume_id;
	if (t->run->plan.stage)
		req.staging_target_path = l->staging;
	req.target_path = l->target;
	req.volume_capability = t->run->cap;
	req.n_volume_context = v->n_volume_context;
	req.volume_context = (void *)map_copy(
	    v->n_volume_context, (void *const *)v->volume_context,
	    &csi__v1__node_publish_volume_request__volume_context_entry__descriptor);
	if (l->attached) {
		req.n_publish_context = l->attached->n_publish_context;
		req.publish_context = (void *)map_copy(
		    l->attached->n_publish_context, (void *const *)l->attached->publish_context,
		    &csi__v1__node_publish_volume_request__publish_context_entry__descriptor);
	}
	int code = timed_call(t, c, BR_PUBLISH, &req, NULL);
	map_copy_free((void **)req.volume_context);
	map_copy_free((void **)req.publish_context);
	l->published = code == CSIC_OK;
	return code;
}

static int unpublish(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__NodeUnpublishVolumeRequest req = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = l->created->volume->volume_id;
	req.target_path = l->target;
	int code = timed_call(t, c, BR_UNPUBLISH, &req, NULL);
	if (code == CSIC_OK)
		l->published = false;
	return code;
}

static int unstage(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

	req.volume_id = l->created->volume->volume_id;
	req.staging_target_path = l->staging;
	int code = timed_call(t, c, BR_UNSTAGE, &req, NULL);
	if (code == CSIC_OK)
		l->staged = false;
	return code;
}

static int controller_unpublish(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__ControllerUnpublishVolumeRequest req =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = l->created->volume->volume_id;
	req.node_id = t->run->plan.node_id;
	int code = timed_call(t, c, BR_CUNPUBLISH, &req, NULL);
	if (code == CSIC_OK)
		l->cpublished = false;
	return code;
}

static int delete_volume(struct bench_thread *t, struct csic_conn *c, struct life *l)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	req.volume_id = l->created->volume->volume_id;
	return timed_call(t, c, BR_DELETE, &req, NULL);
}

/* The node-side directories a CO prepares: the staging dir (with --staging-leaf, its
 * parent first, as kubelet makes <hash>/globalmount), and the target's parent. */
static int prepare_dirs(struct bench_thread *t, struct life *l, size_t i)
{
	const struct bench_cfg *cfg = t->run->cfg;
	bool stages = t->run->plan.stage; /* only a driver that stages gets a staging dir */

	snprintf(l->staging_dir, sizeof(l->staging_dir), "%s/%s-%zu", cfg->staging_root,
	         cfg->prefix, i);
	if (cfg->staging_leaf)
		snprintf(l->staging, sizeof(l->staging), "%s/%s", l->staging_dir,
		         cfg->staging_leaf);
	else
		snprintf(l->staging, sizeof(l->staging), "%s", l->staging_dir);
	snprintf(l->target_dir, sizeof(l->target_dir), "%s/%s-%zu", cfg->target_root, cfg->prefix,
	         i);
	snprintf(l->target, sizeof(l->target), "%s/target", l->target_dir);
	if ((stages && cfg->staging_leaf && mkdir(l->staging_dir, 0750) != 0 && errno != EEXIST) ||
	    (stages && mkdir(l->staging, 0750) != 0 && errno != EEXIST) ||
	    (mkdir(l->target_dir, 0750) != 0 && errno != EEXIST)) {
		fprintf(stderr,
		        "sepcsi-bench: cannot create the directories of lifecycle %zu: %s\n", i,
		        strerror(errno));
		return -1;
	}
	return 0;
}

/* What a CO removes after the driver is done: never the target itself if it still exists. */
static void remove_dirs(const struct bench_run *run, struct life *l)
{
	if (!l->published) {
		rmdir(l->target); /* only if the driver left it empty behind */
		rmdir(l->target_dir);
	}
	if (run->plan.stage && !l->staged) {
		rmdir(l->staging);
		if (run->cfg->staging_leaf)
			rmdir(l->staging_dir);
	}
}

/* The run ends when its last client does (not when the main thread next looks). */
static void thread_done(struct bench_run *run)
{
	int64_t now = csic_now_ns();

	if (atomic_fetch_sub(&run->running, 1) == 1)
		atomic_store(&run->last_done_ns, now);
}

static bool one_lifecycle(struct bench_thread *t, struct csic_conn *c, size_t i)
{
	const struct bench_run *run = t->run;
	struct life l;
	bool ok = false, dirs = false;

	memset(&l, 0, sizeof(l));
	snprintf(l.name, sizeof(l.name), "%s-%zu", run->cfg->prefix, i);
	if (create_volume(t, c, &l) != CSIC_OK)
		goto undo;
	if (run->cfg->skip_node) {
		ok = delete_volume(t, c, &l) == CSIC_OK;
		goto out;
	}
	if (prepare_dirs(t, &l, i) != 0)
		goto undo;
	dirs = true;
	if (run->plan.controller_publish && controller_publish(t, c, &l) != CSIC_OK)
		goto undo;
	if (run->plan.stage && stage(t, c, &l) != CSIC_OK)
		goto undo;
	if (publish(t, c, &l) != CSIC_OK || unpublish(t, c, &l) != CSIC_OK)
		goto undo;
	if (run->plan.stage && unstage(t, c, &l) != CSIC_OK)
		goto undo;
	if (run->plan.controller_publish && controller_unpublish(t, c, &l) != CSIC_OK)
		goto undo;
	ok = delete_volume(t, c, &l) == CSIC_OK;
	goto out;
undo:
	/* Undo what was done, newest first; each step is tried once. */
	if (l.published)
		unpublish(t, c, &l);
	if (l.staged)
		unstage(t, c, &l);
	if (l.cpublished)
		controller_unpublish(t, c, &l);
	if (l.created)
		delete_volume(t, c, &l);
out:
	if (dirs)
		remove_dirs(run, &l);
	if (l.attached)
		protobuf_c_message_free_unpacked(&l.attached->base, NULL);
	if (l.created)
		protobuf_c_message_free_unpacked(&l.created->base, NULL);
	return ok;
}

static void *lifecycle_thread(void *arg)
{
	struct bench_thread *t = arg;
	struct bench_run *run = t->run;
	struct csic_conn *c = csic_open(run->cfg->endpoint);

	for (;;) {
		size_t i = atomic_fetch_add(&run->next, 1);
		if (i >= run->cfg->lifecycles)
			break;
		atomic_fetch_add(one_lifecycle(t, c, i) ? &run->ok : &run->failed, 1);
	}
	csic_close(c);
	thread_done(run);
	return NULL;
}

static void *probe_thread(void *arg)
{
	struct bench_thread *t = arg;
	struct bench_run *run = t->run;
	struct csic_conn *c = csic_open(run->cfg->endpoint);
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;

	while (!atomic_load(&run->stop))
		timed_call(t, c, BR_PROBE, &req, NULL);
	csic_close(c);
	thread_done(run);
	return NULL;
}

void bench_execute(struct bench_run *run)
{
	const struct bench_cfg *cfg = run->cfg;
	pthread_t *tids = xcalloc((size_t)cfg->clients, sizeof(pthread_t));
	bool storm = cfg->probe_storm_s > 0;

	run->threads = xcalloc((size_t)cfg->clients, sizeof(struct bench_thread));
	atomic_store(&run->running, cfg->clients);
	run->start_ns = csic_now_ns();
	for (int i = 0; i < cfg->clients; i++) {
		run->threads[i].run = run;
		run->threads[i].index = i;
		if (pthread_create(&tids[i], NULL, storm ? probe_thread : lifecycle_thread,
		                   &run->threads[i]) != 0) {
			fprintf(stderr, "sepcsi-bench: cannot start client thread %d\n", i);
			abort();
		}
	}
	int64_t stop_at = run->start_ns + (int64_t)(cfg->probe_storm_s * 1e9);
	while (atomic_load(&run->running) > 0) {
		int64_t nap = 100000000; /* 100 ms, or up to the end of the storm */
		if (storm && !atomic_load(&run->stop)) {
			int64_t left = stop_at - csic_now_ns();
			nap = left < nap ? (left > 0 ? left : 0) : nap;
		}
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)nap};
		nanosleep(&ts, NULL);
		if (storm && csic_now_ns() >= stop_at)
			atomic_store(&run->stop, true);
		bench_progress(run, false);
	}
	for (int i = 0; i < cfg->clients; i++)
		pthread_join(tids[i], NULL);
	run->end_ns = atomic_load(&run->last_done_ns);
	bench_progress(run, true);
	free(tids);
}
