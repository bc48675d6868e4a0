/*
 * The control channel between the supervisor and each child it spawns, and
 * the fixed file descriptors every child finds at start:
 *
 *   fd 3 (SEPCSI_FD_PEER)    rpcd <-> helper channel (SOCK_SEQPACKET), in both children
 *   fd 4 (SEPCSI_FD_CONTROL) child <-> supervisor control channel (SOCK_SEQPACKET)
 *
 * Every other descriptor but 0, 1 and 2 is closed before exec.
 * Control messages are one datagram each: a u8 type, optionally one fd passed
 * with SCM_RIGHTS. Children send READY once serving. When one child is
 * restarted the supervisor makes a fresh rpcd<->helper socketpair, gives one end
 * to the new child as its fd 3 and sends the other end to the surviving child
 * as PEER_FD, which then drops its old channel and uses the new one. The
 * supervisor sends rpcd HELPER_FAILED when it gives up on the helper. The
 * helper sends PEER_VIOLATION when rpcd broke the helper protocol on fd 3:
 * the helper has dropped that channel and keeps running, and the supervisor
 * kills rpcd, whose restart brings the helper a new channel as PEER_FD.
 * A ready rpcd sends METRICS every --metrics-interval: its figures as
 * Prometheus text in a sealed memfd, which the supervisor checks and writes
 * into the metrics file (supervisor/sup_metrics.c).
 */
#ifndef SEPCSI_SUPCTL_H
#define SEPCSI_SUPCTL_H

#include "sup_fds.h" /* the descriptors, and READY's byte */

enum sup_ctl_type {
	SUP_CTL_READY = SEPCSI_CTL_READY, /* child -> supervisor */
	SUP_CTL_PEER_FD = 2,        /* supervisor -> child: new rpcd<->helper channel, one fd */
	SUP_CTL_HELPER_FAILED = 3,  /* supervisor -> rpcd: helper in failed state */
	SUP_CTL_PEER_VIOLATION = 4, /* helper -> supervisor: rpcd broke the protocol on fd 3 */
	SUP_CTL_METRICS = 5,        /* rpcd -> supervisor: its metrics, one sealed memfd */
};

struct sup_ctl_msg {
	int type; /* enum sup_ctl_type */
	int fd;   /* received descriptor, or -1; the receiver owns it */
};

/* 0 on success, -1 with errno set. */
int sup_ctl_send(int ctlfd, int type, int fd_or_minus1);
/* Blocking receive of one message; 0 on success, -1 on EOF (errno 0) or error. */
int sup_ctl_recv(int ctlfd, struct sup_ctl_msg *out);

#endif
