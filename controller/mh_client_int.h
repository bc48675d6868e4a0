/* Inside rpcd's helper client: what the typed calls (mh_client_ops.c) use of the transport. */
#ifndef SEPCSI_MH_CLIENT_INT_H
#define SEPCSI_MH_CLIENT_INT_H

#include "mh_client.h"

/*
 * Send m (its id is set here) and wait for its answer, of type want, into m;
 * within the request type's deadline. 0, or -1 with err (an MH_ANS_ERROR's
 * kind and reason; MH_E_UNAVAILABLE without a channel; MH_E_TIMEOUT).
 */
int mh_client_call(struct mh_client *c, struct mh_msg *m, uint16_t want, struct mh_err *err);

/* Fill err (if not NULL). */
void mh_client_set_err(struct mh_err *err, enum mh_err_kind kind, int sys_errno,
                       const char *reason);

#endif
