/*
 * What every child of the supervisor finds at start: its descriptors, and
 * the first control message it sends. A child that speaks nothing more of
 * the control channel (sepcsi-core) includes this file alone; supctl.h has
 * the channel whole.
 *
 *   fd 3 (SEPCSI_FD_PEER)    its peer's channel (SOCK_SEQPACKET)
 *   fd 4 (SEPCSI_FD_CONTROL) the control channel to the supervisor (SOCK_SEQPACKET)
 *
 * READY is one datagram of one byte, SEPCSI_CTL_READY, sent once serving.
 */
#ifndef SEPCSI_SUP_FDS_H
#define SEPCSI_SUP_FDS_H

#define SEPCSI_FD_PEER    3
#define SEPCSI_FD_CONTROL 4
#define SEPCSI_CTL_READY  1

#endif
