/*
 * Unit tests for the helper protocol codec (proto/mh_msg.c): round trips of
 * every message type at typical and boundary values, refusal of each kind of
 * malformed datagram, and a deterministic mutation loop. The codec is the
 * privileged helper's first line of defence, so refusals matter as much as
 * round trips.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mh_proto_all.h"
#include "tap.h"

#define NSAMPLES_MAX 128

static struct mh_msg samples[NSAMPLES_MAX];
static size_t nsamples;

static void fill(char *dst, size_t n, char ch)
{
	memset(dst, ch, n);
	dst[n] = '\0';
}

static struct mh_msg *add(uint16_t type, uint32_t id)
{
	if (nsamples >= NSAMPLES_MAX)
		abort();
	struct mh_msg *m = &samples[nsamples++];
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->id = id;
	return m;
}

/* Every type, once with typical values and once at the bounds. */
static void build_samples(void)
{
	struct mh_msg *m;

	add(MH_REQ_PING, 1);
	add(MH_ANS_PING, UINT32_MAX);

	m = add(MH_REQ_CREATE, 2);
	strcpy(m->u.create.volume_id, "pvc-0a1b2c3d");
	m->u.create.size_bytes = 1ULL << 30;
	m = add(MH_REQ_CREATE, 3);
	fill(m->u.create.volume_id, MH_ID_MAX, 'v');
	m->u.create.size_bytes = UINT64_MAX;
	m = add(MH_REQ_CREATE, 0);
	m->u.create.size_bytes = 0; /* empty id: the helper refuses it, the codec carries it */

	m = add(MH_ANS_CREATE, 4);
	m->u.size_ans.size_bytes = 1ULL << 30;
	m = add(MH_ANS_CREATE, 5);
	m->u.size_ans.size_bytes = UINT64_MAX;

	m = add(MH_REQ_DELETE, 6);
	strcpy(m->u.del.volume_id, "pvc-1");
	m = add(MH_REQ_DELETE, 7);
	fill(m->u.del.volume_id, MH_ID_MAX, 'd');
	add(MH_ANS_DELETE, 7);

	m = add(MH_REQ_STAGE, 8);
	strcpy(m->u.stage.volume_id, "pvc-2");
	strcpy(m->u.stage.staging_path, "/var/lib/kubelet/plugins/x/globalmount");
	strcpy(m->u.stage.fs_type, "ext4");
	strcpy(m->u.stage.mount_flags, "noatime,discard");
	strcpy(m->u.stage.mkfs_options, "-m 0");
	m->u.stage.readonly = 0;
	m->u.stage.flags = MH_F_MOUNT_GROUP | MH_F_CREATE_DIR;
	m->u.stage.gid = 2000;
	m = add(MH_REQ_STAGE, 9);
	fill(m->u.stage.volume_id, MH_ID_MAX, 's');
	fill(m->u.stage.staging_path, MH_PATH_MAX, 'p');
	fill(m->u.stage.fs_type, MH_FSTYPE_MAX, 'f');
	fill(m->u.stage.mount_flags, MH_OPTS_MAX, 'o');
	fill(m->u.stage.mkfs_options, MH_OPTS_MAX, 'k'); /* everything at its bound still fits */
	m->u.stage.readonly = 1;
	m->u.stage.flags = MH_F_ALL;
	m->u.stage.gid = UINT32_MAX;
	m = add(MH_REQ_STAGE, 17);
	strcpy(m->u.stage.volume_id, "pvc-4");
	strcpy(m->u.stage.staging_path, "/s/b");
	m->u.stage.flags = MH_F_BLOCK; /* raw block: no fs type */
	m = add(MH_REQ_STAGE, 10);
	strcpy(m->u.stage.volume_id, "pvc-3");
	strcpy(m->u.stage.staging_path, "/s");
	strcpy(m->u.stage.fs_type, "xfs"); /* mount_flags empty */
	add(MH_ANS_STAGE, 10);

	m = add(MH_REQ_UNSTAGE, 11);
	strcpy(m->u.unstage.volume_id, "pvc-2");
	strcpy(m->u.unstage.staging_path, "/var/lib/kubelet/plugins/x/globalmount");
	m = add(MH_REQ_UNSTAGE, 12);
	fill(m->u.unstage.volume_id, MH_ID_MAX, 'u');
	fill(m->u.unstage.staging_path, MH_PATH_MAX, '/');
	m->u.unstage.flags = MH_F_BLOCK | MH_F_REMOVE_DIR;
	add(MH_ANS_UNSTAGE, 12);

	m = add(MH_REQ_PUBLISH, 13);
	strcpy(m->u.publish.volume_id, "pvc-2");
	strcpy(m->u.publish.staging_path, "/var/lib/kubelet/plugins/x/globalmount");
	strcpy(m->u.publish.target_path, "/var/lib/kubelet/pods/y/volumes/z/mount");
	m->u.publish.readonly = 1;
	m = add(MH_REQ_PUBLISH, 14);
	fill(m->u.publish.volume_id, MH_ID_MAX, 'q');
	fill(m->u.publish.staging_path, MH_PATH_MAX, 'a');
	fill(m->u.publish.target_path, MH_PATH_MAX, 'b');
	m->u.publish.flags = MH_F_BLOCK;
	add(MH_ANS_PUBLISH, 14);

	m = add(MH_REQ_UNPUBLISH, 15);
	strcpy(m->u.unpublish.volume_id, "pvc-2");
	strcpy(m->u.unpublish.target_path, "/var/lib/kubelet/pods/y/volumes/z/mount");
	m = add(MH_REQ_UNPUBLISH, 16);
	fill(m->u.unpublish.volume_id, MH_ID_MAX, 'x');
	fill(m->u.unpublish.target_path, MH_PATH_MAX, 'y');
	add(MH_ANS_UNPUBLISH, 16);

	m = add(MH_REQ_RESIZE, 30);
	strcpy(m->u.resize.volume_id, "sv-0123456789abcdef0123456789abcdef");
	m->u.resize.size_bytes = 2ULL << 30;
	m = add(MH_REQ_RESIZE, 31);
	fill(m->u.resize.volume_id, MH_ID_MAX, 'r');
	m->u.resize.size_bytes = UINT64_MAX;
	m = add(MH_ANS_RESIZE, 31);
	m->u.size_ans.size_bytes = 2ULL << 30;

	m = add(MH_REQ_SNAPSHOT, 32);
	strcpy(m->u.snapshot.snapshot_id, "ss-0123456789abcdef0123456789abcdef");
	strcpy(m->u.snapshot.volume_id, "sv-0123456789abcdef0123456789abcdef");
	m = add(MH_REQ_SNAPSHOT, 33);
	fill(m->u.snapshot.snapshot_id, MH_ID_MAX, 's');
	fill(m->u.snapshot.volume_id, MH_ID_MAX, 'v');
	m = add(MH_ANS_SNAPSHOT, 33);
	m->u.copy_ans.size_bytes = 1ULL << 30;
	m->u.copy_ans.reflinked = 1;
	m = add(MH_ANS_SNAPSHOT, 34);
	m->u.copy_ans.size_bytes = UINT64_MAX;

	m = add(MH_REQ_DELETE_SNAPSHOT, 35);
	strcpy(m->u.del_snapshot.snapshot_id, "ss-1");
	m = add(MH_REQ_DELETE_SNAPSHOT, 36);
	fill(m->u.del_snapshot.snapshot_id, MH_ID_MAX, 'z');
	add(MH_ANS_DELETE_SNAPSHOT, 36);

	m = add(MH_REQ_CLONE, 37);
	strcpy(m->u.clone.volume_id, "sv-2");
	m->u.clone.source_kind = MH_SRC_SNAPSHOT;
	strcpy(m->u.clone.source_id, "ss-1");
	m->u.clone.size_bytes = 1ULL << 30;
	m = add(MH_REQ_CLONE, 38);
	fill(m->u.clone.volume_id, MH_ID_MAX, 'c');
	m->u.clone.source_kind = MH_SRC_VOLUME;
	fill(m->u.clone.source_id, MH_ID_MAX, 'o');
	m->u.clone.size_bytes = UINT64_MAX;
	m = add(MH_ANS_CLONE, 38);
	m->u.copy_ans.size_bytes = 4096;

	add(MH_REQ_CAPACITY, 39);
	m = add(MH_ANS_CAPACITY, 39);
	m->u.capacity_ans.available_bytes = 1ULL << 40;
	m->u.capacity_ans.total_bytes = 2ULL << 40;
	m->u.capacity_ans.max_volume_bytes = 16ULL << 40;
	m->u.capacity_ans.reflink = 1;
	m->u.capacity_ans.direct_io = 1;
	m = add(MH_ANS_CAPACITY, 40);
	m->u.capacity_ans.available_bytes = UINT64_MAX;
	m->u.capacity_ans.total_bytes = UINT64_MAX;

	m = add(MH_REQ_EXPAND, 41);
	strcpy(m->u.expand.volume_id, "sv-3");
	strcpy(m->u.expand.staging_path, "/var/lib/kubelet/plugins/x/globalmount");
	strcpy(m->u.expand.fs_type, "xfs");
	m = add(MH_REQ_EXPAND, 42);
	fill(m->u.expand.volume_id, MH_ID_MAX, 'e');
	fill(m->u.expand.staging_path, MH_PATH_MAX, 'x');
	m->u.expand.flags = MH_F_BLOCK; /* fs_type empty */
	m = add(MH_ANS_EXPAND, 42);
	m->u.size_ans.size_bytes = 3ULL << 30;

	m = add(MH_REQ_STATS, 43);
	strcpy(m->u.stats.volume_id, "sv-4");
	strcpy(m->u.stats.path, "/var/lib/kubelet/pods/y/volumes/z/mount");
	m = add(MH_REQ_STATS, 44);
	fill(m->u.stats.volume_id, MH_ID_MAX, 't');
	fill(m->u.stats.path, MH_PATH_MAX, 'q');
	m->u.stats.flags = MH_F_BLOCK;
	m = add(MH_ANS_STATS, 44);
	m->u.stats_ans.bytes_total = 1ULL << 30;
	m->u.stats_ans.bytes_available = 1ULL << 29;
	m->u.stats_ans.bytes_used = 1ULL << 29;
	m->u.stats_ans.inodes_total = 65536;
	m->u.stats_ans.inodes_free = 65000;
	m->u.stats_ans.inodes_used = 536;
	m = add(MH_ANS_STATS, 45);
	m->u.stats_ans.bytes_total = UINT64_MAX;
	m->u.stats_ans.inodes_used = UINT64_MAX;
	m->u.stats_ans.abnormal = 1;
	fill(m->u.stats_ans.message, MH_REASON_MAX, 'm');

	/* The capable core's own. */
	m = add(MH_REQ_FREEZE, 51);
	strcpy(m->u.freeze.volume_id, "sv-6");
	m->u.freeze.seconds = 30;
	m = add(MH_REQ_FREEZE, 52);
	fill(m->u.freeze.volume_id, MH_ID_MAX, 'f');
	m->u.freeze.seconds = UINT32_MAX;
	add(MH_ANS_FREEZE, 53);
	m = add(MH_REQ_THAW, 54);
	strcpy(m->u.del.volume_id, "sv-6");
	add(MH_ANS_THAW, 55);
	m = add(MH_REQ_REFRESH, 56);
	strcpy(m->u.del.volume_id, "sv-6");
	m = add(MH_ANS_REFRESH, 57);
	m->u.size_ans.size_bytes = UINT64_MAX;
	m = add(MH_REQ_ATTACHED, 58);
	strcpy(m->u.del.volume_id, "sv-6");
	m = add(MH_ANS_ATTACHED, 59);
	m->u.attached.devices = UINT32_MAX;
	m = add(MH_REQ_STAGE_CHECK, 60);
	strcpy(m->u.stage.volume_id, "sv-7");
	strcpy(m->u.stage.staging_path, "/var/lib/kubelet/plugins/x/globalmount");
	strcpy(m->u.stage.fs_type, "xfs");
	m->u.stage.flags = MH_F_CREATE_DIR;
	add(MH_ANS_STAGE_CHECK, 61);
	m = add(MH_REQ_FLUSH, 62);
	strcpy(m->u.del.volume_id, "sv-8");
	add(MH_ANS_FLUSH, 63);
	m = add(MH_REQ_GROUP_SNAPSHOT, 64);
	m->u.group.n = 2;
	strcpy(m->u.group.volume_id[0], "sv-1");
	strcpy(m->u.group.snapshot_id[0], "ss-1");
	strcpy(m->u.group.volume_id[1], "sv-2");
	strcpy(m->u.group.snapshot_id[1], "ss-2");
	m = add(MH_ANS_GROUP_SNAPSHOT, 65);
	m->u.group_ans.size_bytes[0] = 1;
	m->u.group_ans.size_bytes[MH_GROUP_MAX - 1] = UINT64_MAX;
	m->u.group_ans.reflinked = 1;
	m = add(MH_REQ_BLOCKS, 66);
	m->u.blocks.what = MH_BLOCKS_DELTA;
	strcpy(m->u.blocks.snapshot_id, "ss-2");
	strcpy(m->u.blocks.base_id, "ss-1");
	m->u.blocks.offset = UINT64_MAX;
	m = add(MH_ANS_BLOCKS, 67);
	m->u.blocks_ans.size_bytes = 1 << 30;
	m->u.blocks_ans.next = 1 << 20;
	m->u.blocks_ans.ranges.n = 2;
	m->u.blocks_ans.ranges.v[0][0] = 4096;
	m->u.blocks_ans.ranges.v[0][1] = 8192;
	m->u.blocks_ans.ranges.v[1][0] = UINT64_MAX;
	m->u.blocks_ans.ranges.v[1][1] = 1;
	m = add(MH_ANS_BLOCKS, 68); /* every range of a page */
	m->u.blocks_ans.ranges.n = MH_BLOCKS_MAX;
	for (uint32_t i = 0; i < MH_BLOCKS_MAX; i++) {
		m->u.blocks_ans.ranges.v[i][0] = (uint64_t)i << 13;
		m->u.blocks_ans.ranges.v[i][1] = 4096;
	}

	for (int t = MH_REQ_DIR_CREATE; t <= MH_REQ_PURGE; t += 2) {
		m = add((uint16_t)t, 300u + (uint32_t)t);
		strcpy(m->u.dir.volume_id, "sv-5");
		strcpy(m->u.dir.base, "/srv/volumes");
		strcpy(m->u.dir.name, "ns/claim");
		m->u.dir.mode = MH_DIR_ARCHIVE;
		m = add((uint16_t)t, 400u + (uint32_t)t);
		fill(m->u.dir.volume_id, MH_ID_MAX, 'v');
		fill(m->u.dir.base, MH_PATH_MAX, 'b');
		fill(m->u.dir.name, MH_DIRNAME_MAX, 'n');
		fill(m->u.dir.path, MH_PATH_MAX, 'p');
		fill(m->u.dir.snapshot_id, MH_ID_MAX, 's');
		m->u.dir.source_kind = MH_SRC_VOLUME;
		fill(m->u.dir.source_id, MH_ID_MAX, 'i');
		fill(m->u.dir.source_name, MH_DIRNAME_MAX, 'o');
		m->u.dir.size_bytes = UINT64_MAX;
		m->u.dir.flags = MH_F_MOUNT_GROUP;
		m->u.dir.gid = UINT32_MAX;
	}
	m = add(MH_ANS_DIR_CREATE, 500);
	m->u.dir_ans.size_bytes = 1ULL << 30;
	m->u.dir_ans.quota = 1;
	m = add(MH_ANS_DIR_EXPAND, 501);
	m->u.dir_ans.size_bytes = UINT64_MAX;
	m->u.dir_ans.reflinked = 1;
	m = add(MH_ANS_DIR_CAPACITY, 502);
	m->u.capacity_ans.available_bytes = 1ULL << 40;
	m->u.capacity_ans.quota = 1;
	m->u.capacity_ans.shared = 1;
	m = add(MH_ANS_DIR_STATS, 503);
	m->u.stats_ans.bytes_total = 1ULL << 30;
	m = add(MH_ANS_DIR_SNAPSHOT, 504);
	m->u.copy_ans.size_bytes = 4096;
	m = add(MH_REQ_DIR_NODE, 505);
	strcpy(m->u.dir.base, "/mnt/cluster");
	strcpy(m->u.dir.name, "node-a.example");
	add(MH_ANS_DIR_NODE, 505);

	for (uint32_t k = MH_E_REFUSED; k <= MH_E_PRECONDITION; k++) {
		m = add(MH_ANS_ERROR, 100 + k);
		m->u.error.kind = k;
		m->u.error.sys_errno = k * 7;
		strcpy(m->u.error.reason, "image is busy");
	}
	m = add(MH_ANS_ERROR, 200);
	m->u.error.kind = MH_E_FAILED;
	m->u.error.sys_errno = UINT32_MAX;
	fill(m->u.error.reason, MH_REASON_MAX, 'r');
	m = add(MH_ANS_ERROR, 201);
	m->u.error.kind = MH_E_BUSY; /* empty reason */
}

static uint8_t enc[MH_MSG_MAX];
static size_t enclen;

static bool encode(const struct mh_msg *m)
{
	return mh_msg_encode(m, enc, sizeof(enc), &enclen) == 0;
}

/* Decode from an exact-size heap copy, so ASan sees any read past the end. */
static int decode_exact(const uint8_t *in, size_t len, struct mh_msg *m)
{
	uint8_t *copy = malloc(len ? len : 1);
	if (copy == NULL)
		abort();
	if (len)
		memcpy(copy, in, len);
	int rc = mh_msg_decode(copy, len, m);
	free(copy);
	return rc;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* Decode must fail and leave *m all zero. */
static bool refused(const uint8_t *in, size_t len)
{
	static struct mh_msg m;

	memset(&m, 0xa5, sizeof(m));
	return decode_exact(in, len, &m) < 0 && all_zero(&m, sizeof(m));
}

static void test_roundtrip(void)
{
	static struct mh_msg out;

	for (size_t i = 0; i < nsamples; i++) {
		CHECK(encode(&samples[i]));
		CHECK(enclen >= MH_HDR_LEN && enclen <= MH_MSG_MAX);
		CHECK(enc[0] == 0 && enc[1] == MH_PROTO_VERSION);
		CHECK(decode_exact(enc, enclen, &out) == 0);
		/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
		CHECK(memcmp(&out, &samples[i], sizeof(out)) == 0);
	}
	/* The encoder refuses a buffer too small, and never writes past cap. */
	CHECK(encode(&samples[1]));
	size_t small = 0;
	CHECK(mh_msg_encode(&samples[1], enc, MH_HDR_LEN - 1, &small) < 0 && small == 0);
}

/*
 * The capable core's set decodes and encodes exactly its own types (the
 * requests it serves, their answers, ERROR), the same as the whole set does;
 * every other type is unknown to it, whatever the payload.
 */
/* A set decodes and encodes exactly its own types, and every one of them was tried. */
static void check_set(const struct mh_codecs *set, const uint16_t *types, size_t ntypes)
{
	static struct mh_msg out;
	size_t seen = 0, len;
	uint8_t buf[MH_MSG_MAX];
	for (size_t i = 0; i < nsamples; i++) {
		bool ours = false;
		for (size_t k = 0; k < ntypes; k++)
			ours = ours || types[k] == samples[i].type;
		seen += ours;
		CHECK(encode(&samples[i]));
		int dec = mh_msg_decode_in(set, enc, enclen, &out);
		/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
		CHECK(ours ? dec == 0 && memcmp(&out, &samples[i], sizeof(out)) == 0 : dec < 0);
		CHECK((mh_msg_encode_in(set, &samples[i], buf, sizeof(buf), &len) == 0) == ours);
	}
	CHECK(seen >= ntypes);
}

/* proto/mh_codec.h's, whose struct field this file's own tables would meet. */
struct codec;
const struct codec *mh_codec_of(const struct mh_codecs *t, uint16_t type);

/* The core's: not STATS, LIST and STAGE_CHECK, which are its reader's. */
static void test_core_set(void)
{
	static const uint16_t core[] = {
	    MH_REQ_PING,    MH_ANS_PING,    MH_REQ_STAGE,   MH_ANS_STAGE,     MH_REQ_UNSTAGE,
	    MH_ANS_UNSTAGE, MH_REQ_PUBLISH, MH_ANS_PUBLISH, MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH,
	    MH_REQ_EXPAND,  MH_ANS_EXPAND,  MH_REQ_FREEZE,  MH_ANS_FREEZE,    MH_REQ_THAW,
	    MH_ANS_THAW,    MH_REQ_REFRESH, MH_ANS_REFRESH, MH_REQ_ATTACHED,  MH_ANS_ATTACHED,
	    MH_REQ_FLUSH,   MH_ANS_FLUSH,   MH_ANS_ERROR};
	static const uint16_t reader[] = {MH_REQ_PING,        MH_ANS_PING,        MH_REQ_STATS,
	                                  MH_ANS_STATS,       MH_REQ_LIST,        MH_ANS_LIST,
	                                  MH_REQ_STAGE_CHECK, MH_ANS_STAGE_CHECK, MH_ANS_ERROR};
	check_set(&mh_codecs_core, core, sizeof(core) / sizeof(core[0]));
	check_set(&mh_codecs_reader, reader, sizeof(reader) / sizeof(reader[0]));
	/*
	 * One number space: the helper decodes each of the core's types with the
	 * core's own codec, never one of mh_proto_all.h's given the same number.
	 */
	for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++)
		CHECK(mh_codec_of(&mh_codecs_all, core[i]) ==
		      mh_codec_of(&mh_codecs_core, core[i]));
}

static void test_names(void)
{
	CHECK(strcmp(mh_type_name(MH_REQ_STAGE), "REQ_STAGE") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_ERROR), "ANS_ERROR") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_UNPUBLISH), "ANS_UNPUBLISH") == 0);
	CHECK(strcmp(mh_type_name(0), "UNKNOWN") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_CLONE), "REQ_CLONE") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_STATS), "ANS_STATS") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_LIST), "REQ_LIST") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_DIR_CREATE), "REQ_DIR_CREATE") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_PURGE), "REQ_PURGE") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_FREEZE), "REQ_FREEZE") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_THAW), "ANS_THAW") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_REFRESH), "REQ_REFRESH") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_ATTACHED), "ANS_ATTACHED") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_STAGE_CHECK), "REQ_STAGE_CHECK") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_FLUSH), "ANS_FLUSH") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_GROUP_SNAPSHOT), "REQ_GROUP_SNAPSHOT") == 0);
	CHECK(strcmp(mh_type_name(MH_ANS_BLOCKS), "ANS_BLOCKS") == 0);
	CHECK(strcmp(mh_type_name(MH_REQ_DIR_NODE), "REQ_DIR_NODE") == 0);
	CHECK(strcmp(mh_type_name(69), "UNKNOWN") == 0);
	CHECK(strcmp(mh_type_name(99), "UNKNOWN") == 0);
	CHECK(strcmp(mh_type_name(101), "UNKNOWN") == 0);
	CHECK(strcmp(mh_type_name(UINT16_MAX), "UNKNOWN") == 0);
}

static void test_encoder_refuses(void)
{
	static struct mh_msg m;
	size_t len = 99;

	memset(&m, 0, sizeof(m));
	m.type = 29; /* unknown */
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0 && len == 0);
	m.type = MH_REQ_DELETE; /* id not terminated within its bound */
	memset(m.u.del.volume_id, 'a', sizeof(m.u.del.volume_id));
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_REQ_STAGE;
	strcpy(m.u.stage.volume_id, "v");
	memset(m.u.stage.fs_type, 'e', sizeof(m.u.stage.fs_type));
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	m.u.stage.fs_type[MH_FSTYPE_MAX] = '\0';
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) == 0);
	m.u.stage.readonly = 2;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	m.u.stage.readonly = 0;
	m.u.stage.flags = MH_F_ALL + 1; /* unknown flag bit */
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	m.u.stage.flags = MH_F_ALL;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) == 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_REQ_CLONE;
	uint8_t bad_src[] = {0, 3, 0xff};
	for (size_t i = 0; i < sizeof(bad_src); i++) {
		m.u.clone.source_kind = bad_src[i];
		CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	}
	m.u.clone.source_kind = MH_SRC_VOLUME;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) == 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_ANS_SNAPSHOT;
	m.u.copy_ans.reflinked = 2;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_ANS_STATS;
	m.u.stats_ans.abnormal = 2;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_ANS_BLOCKS; /* more ranges than a page holds */
	m.u.blocks_ans.ranges.n = MH_BLOCKS_MAX + 1;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	m.u.blocks_ans.ranges.n = MH_BLOCKS_MAX;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) == 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_REQ_BLOCKS; /* neither ALLOCATED nor DELTA */
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	m.u.blocks.what = MH_BLOCKS_DELTA + 1;
	CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	memset(&m, 0, sizeof(m));
	m.type = MH_ANS_ERROR;
	uint32_t bad_kinds[] = {MH_E_OK, MH_E_UNAVAILABLE, MH_E_TIMEOUT, 10, UINT32_MAX};
	for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
		m.u.error.kind = bad_kinds[i];
		CHECK(mh_msg_encode(&m, enc, sizeof(enc), &len) < 0);
	}
}

/* Header-level refusals: version, type, length field, total size, leftovers. */
static void test_header_refusals(void)
{
	static uint8_t buf[MH_MSG_MAX + 16];

	for (size_t i = 0; i < nsamples; i++) {
		CHECK(encode(&samples[i]));
		memcpy(buf, enc, enclen);
		buf[1] = MH_PROTO_VERSION + 1;
		CHECK(refused(buf, enclen));
		buf[1] = MH_PROTO_VERSION;
		buf[0] = 1; /* version 257 */
		CHECK(refused(buf, enclen));
		memcpy(buf, enc, enclen);
		put32(buf + 8, (uint32_t)(enclen - MH_HDR_LEN + 1));
		CHECK(refused(buf, enclen));
		put32(buf + 8, (uint32_t)(enclen - MH_HDR_LEN - 1));
		CHECK(refused(buf, enclen));
		put32(buf + 8, UINT32_MAX);
		CHECK(refused(buf, enclen));
		/* A trailing byte, with and without the length field agreeing. */
		memcpy(buf, enc, enclen);
		buf[enclen] = 0;
		CHECK(refused(buf, enclen + 1));
		put32(buf + 8, (uint32_t)(enclen + 1 - MH_HDR_LEN));
		CHECK(refused(buf, enclen + 1));
		/* Every truncation, raw and with the length field patched to agree. */
		for (size_t cut = 0; cut < enclen; cut++) {
			memcpy(buf, enc, enclen);
			CHECK(refused(buf, cut));
			if (cut >= MH_HDR_LEN) {
				put32(buf + 8, (uint32_t)(cut - MH_HDR_LEN));
				CHECK(refused(buf, cut));
			}
		}
	}
	uint16_t bad_types[] = {0, 55, 56, 99, 101, 0x0100, UINT16_MAX};
	CHECK(encode(&samples[0])); /* REQ_PING: header only */
	for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
		memcpy(buf, enc, enclen);
		buf[2] = (uint8_t)(bad_types[i] >> 8);
		buf[3] = (uint8_t)bad_types[i];
		CHECK(refused(buf, enclen));
	}
	/* Over MH_MSG_MAX even though the length field agrees. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, enc, MH_HDR_LEN);
	put32(buf + 8, MH_MSG_MAX + 1 - MH_HDR_LEN);
	CHECK(refused(buf, MH_MSG_MAX + 1));
}

/* Where the strings and flags of each payload sit, per mh_proto.h, independent of the codec. */
static const char *layout(uint16_t type)
{
	switch (type) {
	case MH_REQ_CREATE:
		return "s8";
	case MH_ANS_CREATE:
		return "8";
	case MH_REQ_DELETE:
	case MH_REQ_THAW:
	case MH_REQ_REFRESH:
	case MH_REQ_ATTACHED:
	case MH_REQ_FLUSH:
		return "s";
	case MH_REQ_FREEZE:
		return "s4";
	case MH_REQ_STAGE:
	case MH_REQ_STAGE_CHECK:
		return "sssssbf4";
	case MH_REQ_UNSTAGE:
		return "ssf";
	case MH_REQ_UNPUBLISH:
		return "ss";
	case MH_REQ_PUBLISH:
		return "sssbf";
	case MH_REQ_RESIZE:
		return "s8";
	case MH_ANS_RESIZE:
	case MH_ANS_EXPAND:
	case MH_ANS_REFRESH:
		return "8";
	case MH_ANS_ATTACHED:
		return "4";
	case MH_REQ_SNAPSHOT:
		return "ss";
	case MH_REQ_DELETE_SNAPSHOT:
		return "s";
	case MH_REQ_CLONE:
		return "sks8";
	case MH_ANS_SNAPSHOT:
	case MH_ANS_CLONE:
		return "8b";
	case MH_ANS_CAPACITY:
	case MH_ANS_DIR_CAPACITY:
		return "888bbbb";
	case MH_REQ_DIR_CREATE:
	case MH_REQ_DIR_DELETE:
	case MH_REQ_DIR_EXPAND:
	case MH_REQ_DIR_PUBLISH:
	case MH_REQ_DIR_UNPUBLISH:
	case MH_REQ_DIR_STATS:
	case MH_REQ_DIR_CAPACITY:
	case MH_REQ_DIR_SNAPSHOT:
	case MH_REQ_DIR_DELETE_SNAPSHOT:
	case MH_REQ_DIR_NODE:
	case MH_REQ_PURGE:
		return "sssssmss8mf4";
	case MH_ANS_DIR_CREATE:
	case MH_ANS_DIR_EXPAND:
		return "8bb";
	case MH_ANS_DIR_SNAPSHOT:
		return "8b";
	case MH_REQ_EXPAND:
		return "sssf";
	case MH_REQ_STATS:
		return "ssf";
	case MH_ANS_STATS:
	case MH_ANS_DIR_STATS:
		return "888888bs";
	case MH_REQ_GROUP_SNAPSHOT:
		return "4ssssssssssssssssssssssssssssssss";
	case MH_ANS_GROUP_SNAPSHOT:
		return "8888888888888888b";
	case MH_REQ_BLOCKS:
		return "4ss8";
	case MH_ANS_BLOCKS:
		return "88r"; /* r: a u32 count, then that many pairs of u64 */
	case MH_ANS_ERROR:
		return "44s";
	default:
		return "";
	}
}

/* A one-byte field and the values it must refuse. */
enum ftype { F_STR, F_BOOL, F_FLAGS, F_KIND, F_SMALL };

struct field {
	size_t at, len;
	enum ftype t;
};

/* Encode m into enc and list its string bytes and flag bytes; checks the layout adds up. */
static size_t walk(const struct mh_msg *m, struct field *f)
{
	size_t off = MH_HDR_LEN, nf = 0;

	CHECK(encode(m));
	for (const char *l = layout(m->type); *l; l++) {
		if (*l == 's') {
			size_t n = ((size_t)enc[off] << 8) | enc[off + 1];
			f[nf++] = (struct field){off + 2, n, F_STR};
			off += 2 + n;
		} else if (*l == 'b' || *l == 'f' || *l == 'k' || *l == 'm') {
			enum ftype t = *l == 'b'   ? F_BOOL
			               : *l == 'f' ? F_FLAGS
			               : *l == 'k' ? F_KIND
			                           : F_SMALL;
			f[nf++] = (struct field){off, 1, t};
			off += 1;
		} else if (*l == 'r') {
			size_t n = ((size_t)enc[off] << 24) | ((size_t)enc[off + 1] << 16) |
			           ((size_t)enc[off + 2] << 8) | enc[off + 3];
			off += 4 + 16 * n;
		} else {
			off += (size_t)(*l - '0');
		}
	}
	CHECK(off == enclen);
	return nf;
}

/* Build a datagram: header for type, then the payload bytes given. */
static size_t raw(uint8_t *out, uint16_t type, const uint8_t *payload, size_t plen)
{
	out[0] = 0;
	out[1] = MH_PROTO_VERSION;
	out[2] = (uint8_t)(type >> 8);
	out[3] = (uint8_t)type;
	put32(out + 4, 42);
	put32(out + 8, (uint32_t)plen);
	memcpy(out + MH_HDR_LEN, payload, plen);
	return MH_HDR_LEN + plen;
}

/* A string field: u16 length then the bytes. */
static size_t rawstr(uint8_t *out, size_t n, char ch)
{
	out[0] = (uint8_t)(n >> 8);
	out[1] = (uint8_t)n;
	memset(out + 2, ch, n);
	return 2 + n;
}

static void test_field_refusals(void)
{
	static uint8_t p[MH_MSG_MAX], buf[MH_MSG_MAX];
	static struct mh_msg m;
	size_t n, len;

	/* Volume id at its bound is fine, one over is not; likewise fs_type. */
	n = rawstr(p, MH_ID_MAX, 'a');
	len = raw(buf, MH_REQ_DELETE, p, n);
	CHECK(decode_exact(buf, len, &m) == 0 && strlen(m.u.del.volume_id) == MH_ID_MAX);
	n = rawstr(p, MH_ID_MAX + 1, 'a');
	CHECK(refused(buf, raw(buf, MH_REQ_DELETE, p, n)));
	p[0] = 0xff; /* prefix claims 65535 bytes, none follow */
	p[1] = 0xff;
	n = 2;
	CHECK(refused(buf, raw(buf, MH_REQ_DELETE, p, n)));

	n = rawstr(p, 1, 'v');
	n += rawstr(p + n, 2, '/');
	size_t fs_at = n;
	n += rawstr(p + n, MH_FSTYPE_MAX, 'e');
	n += rawstr(p + n, 0, 0);
	n += rawstr(p + n, 0, 0);
	p[n++] = 0;
	p[n++] = MH_F_BLOCK;
	put32(p + n, 7);
	n += 4;
	CHECK(decode_exact(buf, raw(buf, MH_REQ_STAGE, p, n), &m) == 0 &&
	      m.u.stage.flags == MH_F_BLOCK && m.u.stage.gid == 7);
	n = fs_at + rawstr(p + fs_at, MH_FSTYPE_MAX + 1, 'e');
	n += rawstr(p + n, 0, 0);
	n += rawstr(p + n, 0, 0);
	p[n++] = 0;
	p[n++] = 0;
	put32(p + n, 0);
	n += 4;
	CHECK(refused(buf, raw(buf, MH_REQ_STAGE, p, n)));
	/* A v1 STAGE (no mkfs_options, flags or gid) is short for v2. */
	n = rawstr(p, 1, 'v');
	n += rawstr(p + n, 2, '/');
	n += rawstr(p + n, 4, 'e');
	n += rawstr(p + n, 0, 0);
	p[n++] = 0;
	CHECK(refused(buf, raw(buf, MH_REQ_STAGE, p, n)));
	/* CAPACITY carries no payload; one byte is left over. */
	p[0] = 0;
	CHECK(refused(buf, raw(buf, MH_REQ_CAPACITY, p, 1)));
	CHECK(decode_exact(buf, raw(buf, MH_REQ_CAPACITY, p, 0), &m) == 0);

	/*
	 * A NUL at the start, middle and end of every string; a flag other than
	 * 0/1; a flag set with an unknown bit; a clone source other than 1/2.
	 */
	static const uint8_t bad[][3] = {
	    [F_STR] = {0, 0, 0},
	    [F_BOOL] = {2, 0x80, 0xff},
	    [F_FLAGS] = {MH_F_ALL + 1, 0x80, 0xff},
	    [F_KIND] = {0, 3, 0xff},
	    [F_SMALL] = {3, 0x80, 0xff}, /* a directory request's source kind or mode */
	};
	for (size_t i = 0; i < nsamples; i++) {
		struct field f[2 + 2 * MH_GROUP_MAX];
		size_t nf = walk(&samples[i], f);
		for (size_t j = 0; j < nf; j++) {
			const size_t at[3] = {f[j].at, f[j].at + f[j].len / 2,
			                      f[j].at + f[j].len - 1};
			for (size_t k = 0; k < 3 && f[j].len > 0; k++) {
				memcpy(buf, enc, enclen);
				if (f[j].t != F_STR)
					buf[f[j].at] = bad[f[j].t][k];
				else
					buf[at[k]] = '\0';
				CHECK(refused(buf, enclen));
			}
		}
	}
	/* Every known flag combination is accepted. */
	for (unsigned fl = 0; fl <= MH_F_ALL; fl++) {
		memset(&m, 0, sizeof(m));
		m.type = MH_REQ_UNSTAGE;
		m.u.unstage.flags = (uint8_t)fl;
		CHECK(encode(&m) && decode_exact(enc, enclen, &m) == 0 && m.u.unstage.flags == fl);
	}

	/* Error kinds: OK and UNAVAILABLE never cross the wire, nor anything out of the enum. */
	uint32_t kinds[] = {MH_E_OK, MH_E_UNAVAILABLE, 9, 0x100, UINT32_MAX};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		put32(p, kinds[k]);
		put32(p + 4, 0);
		n = 8 + rawstr(p + 8, 4, 'r');
		CHECK(refused(buf, raw(buf, MH_ANS_ERROR, p, n)));
	}
	put32(p, MH_E_NOTFOUND);
	CHECK(decode_exact(buf, raw(buf, MH_ANS_ERROR, p, n), &m) == 0 &&
	      m.u.error.kind == MH_E_NOTFOUND && strcmp(m.u.error.reason, "rrrr") == 0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * Mutate valid encodings (bit flips, byte sets, inserts, deletes, sometimes
 * with the length field fixed up so the payload parser is reached). Decode
 * must never crash, and whatever it accepts must re-encode to the very same
 * bytes (the encoding is canonical) and decode to the same struct.
 */
static void test_mutations(void)
{
	static uint8_t buf[MH_MSG_MAX + 64], re[MH_MSG_MAX];
	static struct mh_msg a, b;
	size_t accepted = 0, rejected = 0;
	bool ok = true;

	for (int it = 0; it < 200000; it++) {
		const struct mh_msg *s = &samples[xorshift() % nsamples];
		if (!encode(s))
			abort();
		size_t len = enclen;
		memcpy(buf, enc, len);
		int nmut = 1 + (int)(xorshift() % 4);
		for (int k = 0; k < nmut; k++) {
			size_t at = len ? xorshift() % len : 0;
			switch (xorshift() % 4) {
			case 0:
				if (len)
					buf[at] ^= (uint8_t)(1u << (xorshift() % 8));
				break;
			case 1:
				if (len)
					buf[at] = (uint8_t)xorshift();
				break;
			case 2:
				if (len < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (uint8_t)xorshift();
					len++;
				}
				break;
			default:
				if (len) {
					memmove(buf + at, buf + at + 1, len - at - 1);
					len--;
				}
				break;
			}
		}
		if (len >= MH_HDR_LEN && xorshift() % 2)
			put32(buf + 8, (uint32_t)(len - MH_HDR_LEN));
		if (decode_exact(buf, len, &a) < 0) {
			rejected++;
			continue;
		}
		accepted++;
		size_t relen = 0;
		if (mh_msg_encode(&a, re, sizeof(re), &relen) < 0 || relen != len ||
		    memcmp(re, buf, len) != 0 || decode_exact(re, relen, &b) < 0 ||
		    /* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
		    memcmp(&a, &b, sizeof(a)) != 0)
			ok = false;
	}
	CHECK(ok);
	CHECK(accepted > 0 && rejected > 0);
	printf("# mutations: %zu accepted, %zu rejected\n", accepted, rejected);
}

int main(void)
{
	build_samples();
	test_roundtrip();
	test_core_set();
	test_names();
	test_encoder_refuses();
	test_header_refusals();
	test_field_refusals();
	test_mutations();
	return tap_done("test_mh_msg");
}
