/*
 * Controller unit tests with a fake helper: a thread on the other end of a
 * SOCK_SEQPACKET socketpair that speaks the real helper protocol, records what
 * it was asked, and answers as the test tells it. The store is a real sqlite
 * file in a temporary directory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl.h"
#include "mh_client.h"
#include "mh_proto_all.h"
#include "store.h"
#include "tap.h"

#define MiB (1024LL * 1024)

struct fake {
	int fd;
	atomic_int requests[MH_ANS_ERROR + 1];
	atomic_int fail_kind;   /* answer every request with this error kind when non-zero */
	atomic_int fail_errno;  /* and this errno */
	atomic_int block_stage; /* hold STAGE answers while set */
	atomic_int in_stage;
	pthread_t thr;
};

static void *fake_helper(void *arg)
{
	struct fake *f = arg;
	uint8_t buf[MH_MSG_MAX + 1];
	static struct mh_msg req, ans;
	for (;;) {
		ssize_t n = recv(f->fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		if (mh_msg_decode(buf, (size_t)n, &req) != 0)
			break;
		atomic_fetch_add(&f->requests[req.type], 1);
		memset(&ans, 0, sizeof(ans));
		ans.id = req.id;
		ans.type = (uint16_t)(req.type + 1);
		if (req.type == MH_REQ_STAGE) {
			atomic_store(&f->in_stage, 1);
			while (atomic_load(&f->block_stage))
				tap_sleep_ms(1);
			atomic_store(&f->in_stage, 0);
		}
		if (atomic_load(&f->fail_kind)) {
			ans.type = MH_ANS_ERROR;
			ans.u.error.kind = (uint32_t)atomic_load(&f->fail_kind);
			ans.u.error.sys_errno = (uint32_t)atomic_load(&f->fail_errno);
			snprintf(ans.u.error.reason, sizeof(ans.u.error.reason), "fake refusal");
		} else if (req.type == MH_REQ_CREATE) {
			ans.u.size_ans.size_bytes = req.u.create.size_bytes;
		} else if (req.type == MH_REQ_CAPACITY) {
			/* CreateVolume checks the free space of the data directory first. */
			ans.u.capacity_ans.available_bytes = 1ULL << 40;
			ans.u.capacity_ans.max_volume_bytes = 1ULL << 40;
		}
		size_t len;
		if (mh_msg_encode(&ans, buf, sizeof(buf), &len) != 0)
			break;
		if (send(f->fd, buf, len, MSG_NOSIGNAL) < 0)
			break;
	}
	close(f->fd);
	return NULL;
}

static Csi__V1__VolumeCapability *mount_cap(const char *fs, int mode)
{
	static Csi__V1__VolumeCapability cap;
	static Csi__V1__VolumeCapability__MountVolume mv;
	static Csi__V1__VolumeCapability__AccessMode am;
	csi__v1__volume_capability__init(&cap);
	csi__v1__volume_capability__mount_volume__init(&mv);
	csi__v1__volume_capability__access_mode__init(&am);
	mv.fs_type = (char *)fs;
	am.mode = mode;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mv;
	cap.access_mode = &am;
	return &cap;
}

static struct ctl *ctl;
static struct fake fake;

static int create(const char *name, int64_t req_bytes, int64_t lim, char *id_out)
{
	Csi__V1__CreateVolumeRequest req;
	Csi__V1__CapacityRange cr;
	csi__v1__create_volume_request__init(&req);
	csi__v1__capacity_range__init(&cr);
	cr.required_bytes = req_bytes;
	cr.limit_bytes = lim;
	Csi__V1__VolumeCapability *caps[1] = {
	    mount_cap("ext4", CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER)};
	req.name = (char *)name;
	req.capacity_range = &cr;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	struct ctl_arena *a = ctl_arena_new();
	struct ctl_status st = {0};
	void *resp = NULL;
	int code = ctl_create_volume(ctl, &req, &resp, a, &st);
	if (code == CTL_OK && id_out)
		snprintf(id_out, 64, "%s",
		         ((Csi__V1__CreateVolumeResponse *)resp)->volume->volume_id);
	ctl_arena_free(a);
	return code;
}

struct stage_args {
	const char *id;
	int code;
};

static void *stage_thread(void *arg)
{
	struct stage_args *sa = arg;
	Csi__V1__NodeStageVolumeRequest req;
	csi__v1__node_stage_volume_request__init(&req);
	req.volume_id = (char *)sa->id;
	req.staging_target_path = "/var/lib/kubelet/x/staging";
	req.volume_capability =
	    mount_cap("", CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	struct ctl_arena *a = ctl_arena_new();
	struct ctl_status st = {0};
	void *resp = NULL;
	sa->code = ctl_node_stage_volume(ctl, &req, &resp, a, &st);
	ctl_arena_free(a);
	return NULL;
}

static int delete_volume(const char *id)
{
	Csi__V1__DeleteVolumeRequest req;
	csi__v1__delete_volume_request__init(&req);
	req.volume_id = (char *)id;
	struct ctl_arena *a = ctl_arena_new();
	struct ctl_status st = {0};
	void *resp = NULL;
	int code = ctl_delete_volume(ctl, &req, &resp, a, &st);
	ctl_arena_free(a);
	return code;
}

int main(void)
{
	char dir[] = "/tmp/sepcsi-ctl-XXXXXX", db[128];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(db, sizeof(db), "%s/t.db", dir);
	struct store *st = NULL;
	CHECK(store_open(db, &st) == STORE_OK);

	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
	fake.fd = sv[1];
	pthread_create(&fake.thr, NULL, fake_helper, &fake);
	struct mh_client *mh = mh_client_new(sv[0]);
	struct ctl_config cfg = {.driver_name = "t.sepcsi.io", .node_id = "n1"};
	ctl = ctl_new(&cfg, st, mh);

	/* Create: rounding, idempotency, incompatible repeat, range errors. */
	char id[64], id2[64];
	CHECK(create("a", 10 * MiB + 1, 0, id) == CTL_OK);
	CHECK(create("a", 10 * MiB + 1, 0, id2) == CTL_OK);
	CHECK(strcmp(id, id2) == 0);
	CHECK(atomic_load(&fake.requests[MH_REQ_CREATE]) == 1);
	CHECK(create("a", 4096 * MiB, 0, NULL) == CTL_ALREADY_EXISTS);
	CHECK(create("b", 1, 1, NULL) == CTL_OUT_OF_RANGE);
	CHECK(create("b", 20 * MiB, 10 * MiB, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(create("b", -1, 0, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(create("", 0, 0, NULL) == CTL_INVALID_ARGUMENT);
	CHECK(create("bad\x01name", 0, 0, NULL) == CTL_INVALID_ARGUMENT);

	/* A helper refusal maps to the spec's code and nothing is recorded. */
	atomic_store(&fake.fail_kind, MH_E_NOSPACE);
	CHECK(create("full", 0, 0, NULL) == CTL_RESOURCE_EXHAUSTED);
	atomic_store(&fake.fail_kind, 0);
	struct store_volume *v = NULL;
	CHECK(store_volume_get_by_name(st, "full", &v) == STORE_NOTFOUND);

	/*
	 * The helper's BUSY: in use is FAILED_PRECONDITION; another operation on
	 * the volume in flight there (EINPROGRESS) is ABORTED; every worker taken
	 * (EAGAIN) is UNAVAILABLE.
	 */
	static const struct {
		int err;
		enum ctl_code want;
	} busy[] = {{EBUSY, CTL_FAILED_PRECONDITION},
	            {EINPROGRESS, CTL_ABORTED},
	            {EAGAIN, CTL_UNAVAILABLE}};
	for (size_t i = 0; i < sizeof(busy) / sizeof(busy[0]); i++) {
		atomic_store(&fake.fail_errno, busy[i].err);
		atomic_store(&fake.fail_kind, MH_E_BUSY);
		CHECK(create("busy", 0, 0, NULL) == (int)busy[i].want);
		atomic_store(&fake.fail_kind, 0);
		atomic_store(&fake.fail_errno, 0);
	}

	/* A second operation on a volume with one in flight is ABORTED. */
	atomic_store(&fake.block_stage, 1);
	struct stage_args first = {.id = id}, second = {.id = id};
	pthread_t t1, t2;
	pthread_create(&t1, NULL, stage_thread, &first);
	while (!atomic_load(&fake.in_stage))
		tap_sleep_ms(1);
	pthread_create(&t2, NULL, stage_thread, &second);
	pthread_join(t2, NULL);
	CHECK(second.code == CTL_ABORTED);
	CHECK(delete_volume(id) == CTL_ABORTED);
	atomic_store(&fake.block_stage, 0);
	pthread_join(t1, NULL);
	CHECK(first.code == CTL_OK);

	/* Delete while staged: FAILED_PRECONDITION, the image stays. */
	CHECK(delete_volume(id) == CTL_FAILED_PRECONDITION);
	CHECK(atomic_load(&fake.requests[MH_REQ_DELETE]) == 0);
	CHECK(store_staging_delete(st, id) == STORE_OK);
	CHECK(delete_volume(id) == CTL_OK);
	CHECK(delete_volume(id) == CTL_OK);
	CHECK(delete_volume("sv-../../etc") == CTL_OK);
	CHECK(atomic_load(&fake.requests[MH_REQ_DELETE]) == 1);

	/* The helper gone: calls fail UNAVAILABLE and do not hang. */
	shutdown(sv[1], SHUT_RDWR);
	pthread_join(fake.thr, NULL);
	CHECK(create("after", 0, 0, NULL) == CTL_UNAVAILABLE);

	ctl_free(ctl);
	mh_client_free(mh);
	store_close(st);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	/* NOLINTNEXTLINE(cert-env33-c): removes the test's own mkdtemp directory */
	CHECK(system(cmd) == 0);
	return tap_done("test_controller");
}
