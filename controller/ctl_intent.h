/* Intents of multi-step operations, and reconciliation (ctl_intent.c, ctl_reconcile.c). */
#ifndef SEPCSI_CTL_INTENT_H
#define SEPCSI_CTL_INTENT_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl_int.h"

#define CTL_INTENT_KEY_MAX 4352 /* "<op>:" + a name, an id, or an id and a path */

/* The ops, as recorded (store_intent.op) and settled by ctl_reconcile(). */
#define CTL_OP_CREATE      "create"      /* subject: the name; object: the new volume */
#define CTL_OP_DELETE      "delete"      /* subject and object: the volume */
#define CTL_OP_SNAPSHOT    "snapshot"    /* subject: the name; object: the new snapshot */
#define CTL_OP_DELETE_SNAP "delete-snap" /* subject and object: the snapshot */
#define CTL_OP_GROUP                                                                               \
	"group"                            /* subject: the name; object: the group;                \
	                                      detail: its snapshot ids, space-separated */
#define CTL_OP_DELETE_GROUP "delete-group" /* subject and object: the group */
#define CTL_OP_EXPAND       "expand"       /* subject and object: the volume; detail: bytes */
#define CTL_OP_STAGE                                                                               \
	"stage"                  /* subject and object: the volume;                                \
	                            detail: "b|f <staging path>" */
#define CTL_OP_UNSTAGE "unstage" /* as stage */
#define CTL_OP_PUBLISH                                                                             \
	"publish"                    /* subject: "<volume> <target>"; object: volume;              \
	                                detail: "b|f <target path>" */
#define CTL_OP_UNPUBLISH "unpublish" /* as publish */
#define CTL_OP_EPHEMERAL                                                                           \
	"ephemeral"                          /* subject: the CO's volume id; object: ours;         \
	                                        detail: the target path */
#define CTL_OP_EPHEMERAL_END "ephemeral-end" /* subject and object: our volume; as ephemeral */

/*
 * Record that op is about to act on object_id. CTL_OK, or INTERNAL (then the
 * request must fail without asking the helper anything).
 */
int ctl_intent_begin(struct ctl *c, struct ctl_status *st, const char *op, const char *subject,
                     const char *object_id, const char *detail);

/* The operation's result is recorded, or it is undone: forget the intent. */
void ctl_intent_end(struct ctl *c, const char *op, const char *subject);

/*
 * Records a result and forgets its intent in one commit (one sync instead of
 * two): ctl_record_begin() opens a store transaction (STORE_* code); the
 * caller writes its result rows, then ctl_record_end() gets their code rc.
 * STORE_OK: forgets the intent of op on subject (op NULL: there is none; a
 * failure to forget is only logged, as in ctl_intent_end) and commits,
 * returning the commit's code. Else it rolls back and returns rc.
 */
int ctl_record_begin(struct ctl *c);
int ctl_record_end(struct ctl *c, int rc, const char *op, const char *subject);

/*
 * A first attempt of this request that did not finish: 1 with its object id
 * in object_id if its intent has the same detail (complete it under that
 * id); 0 if there is none. An intent of another request under the same
 * subject is settled (undone) first, then 0; -1 if that fails (the request
 * must fail). The caller holds the request's keys.
 */
int ctl_intent_resume(struct ctl *c, const char *op, const char *subject, const char *detail,
                      char *object_id, size_t cap);

/*
 * Settle the intent of op on subject now (undo or complete it, as
 * reconciliation would), if there is one. The caller holds the request's
 * keys. 0, or -1 if it could not be settled (then the request must fail).
 */
int ctl_intent_settle_held(struct ctl *c, const char *op, const char *subject);

#endif
