/*
 * The looks that need no capability (the sepcsi_mh_looks library: mh_stats.c,
 * mh_list_mounts.c), which sepcsi-reader serves beside the capable core and
 * the helper without a core serves itself: STATS, and LIST of mounts. Never
 * in sepcsi-core.
 */
#ifndef SEPCSI_MH_LOOKS_H
#define SEPCSI_MH_LOOKS_H

#include "mh_ops.h"
#include "mh_proto_all.h"

mh_answer_fn mh_answer_stats;

/* STATS's row, in each table that serves it (the helper's, the reader's). */
#define MH_ROW_STATS(handler)                                                                      \
	{                                                                                          \
		MH_REQ_STATS, MH_ANS_STATS, handler, "STATS", true, MH_F_BLOCK,                    \
		    "statvfs of a mount proved to be this volume's; changes nothing"               \
	}

/* What a STATS request is about, for the audit record and the row's checks (mh_fields_more). */
void mh_stats_fields(const struct mh_msg *q, struct mh_fields *f);

#endif
