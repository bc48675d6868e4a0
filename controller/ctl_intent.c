/*
 * Intents: every operation that asks the helper to change something, and
 * then records the result in the store, first records what it is about to
 * do (store_intent_put) and forgets that once the result is recorded, or
 * once it is undone. Then whatever dies in between (rpcd, the helper, a
 * worker, the node), the store says what may be half done:
 *
 *  - a retry of the same request finds the intent and completes the first
 *    attempt instead of starting a second one (CreateVolume reuses the
 *    volume id the intent names, so no image is made twice);
 *  - reconciliation (ctl_reconcile.c) settles every intent that no request
 *    in flight holds: completes it where the store shows the CO's wish was
 *    carried out or must be (deletes, unstages, unpublishes, expansions),
 *    undoes it otherwise (an image, a copy or a mount nobody recorded).
 *
 * The key is "<op>:<subject>", the subject being what the request names: the
 * CO's name for CreateVolume, CreateSnapshot and group snapshots, our id for
 * the rest (plus the target path for publications). object_id is what the
 * helper acts on; detail is op-specific text (see each op in ctl_reconcile.c).
 *
 * Durability: an intent is on disk before the helper acts, so that a power
 * loss cannot take it while what it is about survives: an image, a copy,
 * an expansion, a deletion. Staging and publishing (and their undoing)
 * mount, unmount, attach and detach, which a power loss undoes too: their
 * intents are committed without waiting for the disk
 * (store_intent_put_until_reboot). A crash of rpcd or the helper still finds
 * them (the WAL is in the page cache); after a power loss there is no mount
 * or loop device left for them to settle, and the request was never
 * answered, so the CO asks again. What such a request leaves on disk is
 * found again by that retry: the file system a first stage made (mounted,
 * never made twice, by the next stage) and a raw block target's empty file
 * (which a retried publish binds onto, as onto one kubelet made).
 * The result each of these records (a staging, a publication, or its
 * removal) is durable before the answer, as every result is: the rows
 * decide what comes back after a reboot.
 *
 * Runs in rpcd, unprivileged. A store failure to record an intent fails the
 * request (INTERNAL) before the helper is asked; a failure to forget one is
 * only logged: reconciliation finds the intent settled and drops it.
 */
#include "ctl_intent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static void key_of(char *key, size_t cap, const char *op, const char *subject)
{
	snprintf(key, cap, "%s:%s", op, subject);
}

/* Does op only change what a reboot undoes (see Durability above)? */
static bool until_reboot(const char *op)
{
	static const char *const ops[] = {CTL_OP_STAGE, CTL_OP_UNSTAGE, CTL_OP_PUBLISH,
	                                  CTL_OP_UNPUBLISH};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i]) == 0)
			return true;
	return false;
}

int ctl_intent_begin(struct ctl *c, struct ctl_status *st, const char *op, const char *subject,
                     const char *object_id, const char *detail)
{
	char key[CTL_INTENT_KEY_MAX];
	key_of(key, sizeof(key), op, subject);
	struct store_intent in = {.key = key,
	                          .op = (char *)op,
	                          .object_id = (char *)object_id,
	                          .detail = (char *)(detail ? detail : "")};
	int rc = until_reboot(op) ? store_intent_put_until_reboot(c->st, &in)
	                          : store_intent_put(c->st, &in);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "record intent", rc);
	return CTL_OK;
}

void ctl_intent_end(struct ctl *c, const char *op, const char *subject)
{
	char key[CTL_INTENT_KEY_MAX];
	key_of(key, sizeof(key), op, subject);
	int rc = store_intent_delete(c->st, key);
	if (rc != STORE_OK)
		log_warn("cannot forget intent %s (store error %d: %s); reconciliation will", key,
		         rc, store_last_error());
}

int ctl_record_begin(struct ctl *c)
{
	return store_begin(c->st);
}

int ctl_record_end(struct ctl *c, int rc, const char *op, const char *subject)
{
	if (rc != STORE_OK) {
		store_rollback(c->st);
		return rc;
	}
	if (op)
		ctl_intent_end(c, op, subject);
	return store_commit(c->st);
}

int ctl_intent_resume(struct ctl *c, const char *op, const char *subject, const char *detail,
                      char *object_id, size_t cap)
{
	char key[CTL_INTENT_KEY_MAX];
	struct store_intent *in = NULL;
	key_of(key, sizeof(key), op, subject);
	if (store_intent_get(c->st, key, &in) != STORE_OK)
		return 0;
	bool same = strcmp(in->detail, detail) == 0 &&
	            snprintf(object_id, cap, "%s", in->object_id) < (int)cap;
	store_intent_free(in);
	if (same)
		return 1;
	/* Another request under the same name: the first attempt is undone, not reused. */
	return ctl_intent_settle_held(c, op, subject) == 0 ? 0 : -1;
}
