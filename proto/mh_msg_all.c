/*
 * Every message type of the helper protocol (mh_proto.h): the capable core's
 * (mh_msg.c) and the rest, which only rpcd, the helper and sepcsi-reader speak
 * (images made and copied, capacity, directory volumes, the helper's PURGE;
 * STATS and LIST, the reader's). The core
 * links mh_msg.c alone, so it decodes no payload of a type it does not serve.
 */
#include "mh_proto_all.h"

#include "mh_codec.h"

#define SRC(m, lo) U8(m, (lo), MH_SRC_VOLUME)

/* F_RANGES: the count within hi, then each pair. */
static int put_ranges(struct wbuf *w, const void *p, uint32_t hi)
{
	const struct mh_ranges *g = p;
	if (g->n > hi || codec_put_be(w, g->n, 4) < 0)
		return -1;
	for (uint32_t i = 0; i < g->n; i++)
		if (codec_put_be(w, g->v[i][0], 8) < 0 || codec_put_be(w, g->v[i][1], 8) < 0)
			return -1;
	return 0;
}

static int get_ranges(struct rbuf *r, void *p, uint32_t hi)
{
	struct mh_ranges *g = p;
	uint64_t n;
	if (codec_get_be(r, &n, 4) < 0 || n > hi)
		return -1;
	g->n = (uint32_t)n;
	for (uint32_t i = 0; i < g->n; i++)
		if (codec_get_be(r, &g->v[i][0], 8) < 0 || codec_get_be(r, &g->v[i][1], 8) < 0)
			return -1;
	return 0;
}

static const struct field f_stats[] = {STR(stats.volume_id, MH_ID_MAX),
                                       STR(stats.path, MH_PATH_MAX), FLAGS(stats.flags), END};
static const struct field f_stats_ans[] = {U64(stats_ans.bytes_total),
                                           U64(stats_ans.bytes_available),
                                           U64(stats_ans.bytes_used),
                                           U64(stats_ans.inodes_total),
                                           U64(stats_ans.inodes_free),
                                           U64(stats_ans.inodes_used),
                                           BOOL(stats_ans.abnormal),
                                           STR(stats_ans.message, MH_REASON_MAX),
                                           END};
static const struct field f_list[] = {U32(list.what, MH_LIST_IMAGES, MH_LIST_MOUNTS),
                                      STR(list.after, MH_ID_MAX), END};
static const struct field f_list_ans[] = {BOOL(list_ans.more), STR(list_ans.text, MH_LIST_TEXT_MAX),
                                          END};
static const struct field f_create[] = {STR(create.volume_id, MH_ID_MAX), U64(create.size_bytes),
                                        END};
static const struct field f_resize[] = {STR(resize.volume_id, MH_ID_MAX), U64(resize.size_bytes),
                                        END};
static const struct field f_snapshot[] = {STR(snapshot.snapshot_id, MH_ID_MAX),
                                          STR(snapshot.volume_id, MH_ID_MAX), END};
static const struct field f_snapshot_id[] = {STR(del_snapshot.snapshot_id, MH_ID_MAX), END};
static const struct field f_clone[] = {STR(clone.volume_id, MH_ID_MAX),
                                       SRC(clone.source_kind, MH_SRC_SNAPSHOT),
                                       STR(clone.source_id, MH_ID_MAX), U64(clone.size_bytes), END};
static const struct field f_copy_ans[] = {U64(copy_ans.size_bytes), BOOL(copy_ans.reflinked), END};
#define MEMBER(i) STR(group.volume_id[i], MH_ID_MAX), STR(group.snapshot_id[i], MH_ID_MAX)
static const struct field f_group[] = {U32(group.n, 2, MH_GROUP_MAX),
                                       MEMBER(0),
                                       MEMBER(1),
                                       MEMBER(2),
                                       MEMBER(3),
                                       MEMBER(4),
                                       MEMBER(5),
                                       MEMBER(6),
                                       MEMBER(7),
                                       MEMBER(8),
                                       MEMBER(9),
                                       MEMBER(10),
                                       MEMBER(11),
                                       MEMBER(12),
                                       MEMBER(13),
                                       MEMBER(14),
                                       MEMBER(15),
                                       END};
#define SIZE(i) U64(group_ans.size_bytes[i])
static const struct field f_group_ans[] = {SIZE(0),
                                           SIZE(1),
                                           SIZE(2),
                                           SIZE(3),
                                           SIZE(4),
                                           SIZE(5),
                                           SIZE(6),
                                           SIZE(7),
                                           SIZE(8),
                                           SIZE(9),
                                           SIZE(10),
                                           SIZE(11),
                                           SIZE(12),
                                           SIZE(13),
                                           SIZE(14),
                                           SIZE(15),
                                           BOOL(group_ans.reflinked),
                                           END};
_Static_assert(MH_GROUP_MAX == 16, "f_group and f_group_ans name every member");
static const struct field f_blocks[] = {U32(blocks.what, MH_BLOCKS_ALLOCATED, MH_BLOCKS_DELTA),
                                        STR(blocks.snapshot_id, MH_ID_MAX),
                                        STR(blocks.base_id, MH_ID_MAX), U64(blocks.offset), END};
static const struct field f_blocks_ans[] = {U64(blocks_ans.size_bytes), U64(blocks_ans.next),
                                            RANGES(blocks_ans.ranges), END};
static const struct field f_capacity_ans[] = {
    U64(capacity_ans.available_bytes),  U64(capacity_ans.total_bytes),
    U64(capacity_ans.max_volume_bytes), BOOL(capacity_ans.reflink),
    BOOL(capacity_ans.quota),           BOOL(capacity_ans.direct_io),
    BOOL(capacity_ans.shared),          END};
static const struct field f_dir[] = {STR(dir.volume_id, MH_ID_MAX),
                                     STR(dir.base, MH_PATH_MAX),
                                     STR(dir.name, MH_DIRNAME_MAX),
                                     STR(dir.path, MH_PATH_MAX),
                                     STR(dir.snapshot_id, MH_ID_MAX),
                                     SRC(dir.source_kind, 0),
                                     STR(dir.source_id, MH_ID_MAX),
                                     STR(dir.source_name, MH_DIRNAME_MAX),
                                     U64(dir.size_bytes),
                                     U8(dir.mode, 0, MH_DIR_ARCHIVE),
                                     FLAGS(dir.flags),
                                     U32(dir.gid, 0, UINT32_MAX),
                                     END};
static const struct field f_dir_ans[] = {U64(dir_ans.size_bytes), BOOL(dir_ans.quota),
                                         BOOL(dir_ans.reflinked), END};

static const struct codec more_codecs[] = {
    [MH_REQ_CREATE] = {"REQ_CREATE", f_create},
    [MH_ANS_CREATE] = {"ANS_CREATE", f_size_ans},
    [MH_REQ_DELETE] = {"REQ_DELETE", f_delete},
    [MH_ANS_DELETE] = {"ANS_DELETE", NULL},
    [MH_REQ_RESIZE] = {"REQ_RESIZE", f_resize},
    [MH_ANS_RESIZE] = {"ANS_RESIZE", f_size_ans},
    [MH_REQ_SNAPSHOT] = {"REQ_SNAPSHOT", f_snapshot},
    [MH_ANS_SNAPSHOT] = {"ANS_SNAPSHOT", f_copy_ans},
    [MH_REQ_DELETE_SNAPSHOT] = {"REQ_DELETE_SNAPSHOT", f_snapshot_id},
    [MH_ANS_DELETE_SNAPSHOT] = {"ANS_DELETE_SNAPSHOT", NULL},
    [MH_REQ_CLONE] = {"REQ_CLONE", f_clone},
    [MH_ANS_CLONE] = {"ANS_CLONE", f_copy_ans},
    [MH_REQ_CAPACITY] = {"REQ_CAPACITY", NULL},
    [MH_ANS_CAPACITY] = {"ANS_CAPACITY", f_capacity_ans},
    [MH_REQ_DIR_CREATE] = {"REQ_DIR_CREATE", f_dir},
    [MH_ANS_DIR_CREATE] = {"ANS_DIR_CREATE", f_dir_ans},
    [MH_REQ_DIR_DELETE] = {"REQ_DIR_DELETE", f_dir},
    [MH_ANS_DIR_DELETE] = {"ANS_DIR_DELETE", NULL},
    [MH_REQ_DIR_EXPAND] = {"REQ_DIR_EXPAND", f_dir},
    [MH_ANS_DIR_EXPAND] = {"ANS_DIR_EXPAND", f_dir_ans},
    [MH_REQ_DIR_PUBLISH] = {"REQ_DIR_PUBLISH", f_dir},
    [MH_ANS_DIR_PUBLISH] = {"ANS_DIR_PUBLISH", NULL},
    [MH_REQ_DIR_UNPUBLISH] = {"REQ_DIR_UNPUBLISH", f_dir},
    [MH_ANS_DIR_UNPUBLISH] = {"ANS_DIR_UNPUBLISH", NULL},
    [MH_REQ_STATS] = {"REQ_STATS", f_stats},
    [MH_ANS_STATS] = {"ANS_STATS", f_stats_ans},
    [MH_REQ_LIST] = {"REQ_LIST", f_list},
    [MH_ANS_LIST] = {"ANS_LIST", f_list_ans},
    [MH_REQ_DIR_STATS] = {"REQ_DIR_STATS", f_dir},
    [MH_ANS_DIR_STATS] = {"ANS_DIR_STATS", f_stats_ans},
    [MH_REQ_DIR_CAPACITY] = {"REQ_DIR_CAPACITY", f_dir},
    [MH_ANS_DIR_CAPACITY] = {"ANS_DIR_CAPACITY", f_capacity_ans},
    [MH_REQ_DIR_SNAPSHOT] = {"REQ_DIR_SNAPSHOT", f_dir},
    [MH_ANS_DIR_SNAPSHOT] = {"ANS_DIR_SNAPSHOT", f_copy_ans},
    [MH_REQ_DIR_DELETE_SNAPSHOT] = {"REQ_DIR_DELETE_SNAPSHOT", f_dir},
    [MH_ANS_DIR_DELETE_SNAPSHOT] = {"ANS_DIR_DELETE_SNAPSHOT", NULL},
    [MH_REQ_PURGE] = {"REQ_PURGE", f_dir},
    [MH_ANS_PURGE] = {"ANS_PURGE", NULL},
    [MH_REQ_GROUP_SNAPSHOT] = {"REQ_GROUP_SNAPSHOT", f_group},
    [MH_ANS_GROUP_SNAPSHOT] = {"ANS_GROUP_SNAPSHOT", f_group_ans},
    [MH_REQ_BLOCKS] = {"REQ_BLOCKS", f_blocks},
    [MH_ANS_BLOCKS] = {"ANS_BLOCKS", f_blocks_ans},
    [MH_REQ_DIR_NODE] = {"REQ_DIR_NODE", f_dir},
    [MH_ANS_DIR_NODE] = {"ANS_DIR_NODE", NULL},
    [MH_REQ_STAGE_CHECK] = {"REQ_STAGE_CHECK", f_stage},
    [MH_ANS_STAGE_CHECK] = {"ANS_STAGE_CHECK", NULL},
};

/* sepcsi-reader's types: those it serves and its answers (reader/reader_table.c). */
static const struct codec reader_codecs[] = {
    [MH_REQ_PING] = {"REQ_PING", NULL},
    [MH_ANS_PING] = {"ANS_PING", NULL},
    [MH_REQ_STATS] = {"REQ_STATS", f_stats},
    [MH_ANS_STATS] = {"ANS_STATS", f_stats_ans},
    [MH_REQ_LIST] = {"REQ_LIST", f_list},
    [MH_ANS_LIST] = {"ANS_LIST", f_list_ans},
    [MH_REQ_STAGE_CHECK] = {"REQ_STAGE_CHECK", f_stage},
    [MH_ANS_STAGE_CHECK] = {"ANS_STAGE_CHECK", NULL},
    [MH_ANS_ERROR] = {"ANS_ERROR", f_error},
};

const struct mh_codecs mh_codecs_reader = {
    reader_codecs, sizeof(reader_codecs) / sizeof(reader_codecs[0]), NULL, NULL, NULL};

const struct mh_codecs mh_codecs_all = {more_codecs, sizeof(more_codecs) / sizeof(more_codecs[0]),
                                        &mh_codecs_core, put_ranges, get_ranges};

const char *mh_type_name(uint16_t type)
{
	const struct codec *c = mh_codec_of(&mh_codecs_all, type);
	return c ? c->name : "UNKNOWN";
}

int mh_msg_encode(const struct mh_msg *m, uint8_t *out, size_t cap, size_t *len)
{
	return mh_msg_encode_in(&mh_codecs_all, m, out, cap, len);
}

int mh_msg_decode(const uint8_t *in, size_t len, struct mh_msg *m)
{
	return mh_msg_decode_in(&mh_codecs_all, in, len, m);
}
