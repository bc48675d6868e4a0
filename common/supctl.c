/*
 * The control channel between the supervisor and each child (see supctl.h):
 * one SOCK_SEQPACKET datagram per message, holding exactly one byte (the
 * type) and, for SUP_CTL_PEER_FD and SUP_CTL_METRICS only, exactly one
 * descriptor passed with SCM_RIGHTS.
 *
 * Runs in the supervisor (root, trimmed capabilities) and in both children
 * (rpcd unprivileged, the helper confined). Each side treats the other as a
 * possible adversary: the receiver accepts only a well-formed message and
 * otherwise fails with EPROTO, closing every descriptor that arrived with the
 * bad datagram so a hostile peer cannot make it leak or keep descriptors.
 * Nothing here is fatal; the caller decides what a protocol violation means
 * (the supervisor kills the child, a child exits). Which types a receiver
 * accepts from which sender is the receiver's check too: this codec knows
 * every type, whoever sends it.
 */
#include "supctl.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Room for more descriptors than a valid message ever carries: whatever a
 * peer sends must land in our table so that we can close it. Descriptors
 * beyond this room are discarded by the kernel (MSG_CTRUNC), never installed.
 */
#define SUPCTL_MAX_FDS 16

/* A payload longer than one byte must be detected, not silently truncated. */
#define SUPCTL_RECV_BUF 16

static bool type_known(int type)
{
	return type == SUP_CTL_READY || type == SUP_CTL_PEER_FD || type == SUP_CTL_HELPER_FAILED ||
	       type == SUP_CTL_PEER_VIOLATION || type == SUP_CTL_METRICS;
}

/* PEER_FD and METRICS always carry exactly one descriptor; the other types never do. */
static bool type_wants_fd(int type)
{
	return type == SUP_CTL_PEER_FD || type == SUP_CTL_METRICS;
}

int sup_ctl_send(int ctlfd, int type, int fd_or_minus1)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	uint8_t byte;
	struct iovec iov;
	struct msghdr msg;
	ssize_t n;

	if (!type_known(type) || type_wants_fd(type) != (fd_or_minus1 >= 0)) {
		errno = EINVAL;
		return -1;
	}
	byte = (uint8_t)type;
	iov.iov_base = &byte;
	iov.iov_len = 1;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd_or_minus1 >= 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = sizeof(cbuf.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd_or_minus1, sizeof(int));
	}
	do {
		/* MSG_NOSIGNAL: a dead peer is an EPIPE to handle, not a SIGPIPE. */
		n = sendmsg(ctlfd, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if (n != 1) { /* cannot happen on SOCK_SEQPACKET; refuse to guess */
		errno = EPROTO;
		return -1;
	}
	return 0;
}

/*
 * Collect every descriptor carried by the message into fds[]. Returns false
 * if any ancillary data other than SCM_RIGHTS arrived or if it was truncated;
 * the descriptors already collected are still reported so they can be closed.
 */
static bool collect_fds(struct msghdr *msg, int *fds, size_t *nfds)
{
	bool ok = (msg->msg_flags & MSG_CTRUNC) == 0;

	*nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
			ok = false;
			continue;
		}
		if (cm->cmsg_len < CMSG_LEN(0)) {
			ok = false;
			continue;
		}
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n && *nfds < SUPCTL_MAX_FDS; i++) {
			memcpy(&fds[*nfds], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			(*nfds)++;
		}
	}
	return ok;
}

/* The one descriptor PEER_FD carries must be a SOCK_SEQPACKET socket. */
static bool is_seqpacket(int fd)
{
	int st = 0;
	socklen_t len = sizeof(st);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &st, &len) < 0)
		return false;
	return len == sizeof(st) && st == SOCK_SEQPACKET;
}

int sup_ctl_recv(int ctlfd, struct sup_ctl_msg *out)
{
	union {
		char buf[CMSG_SPACE(SUPCTL_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	uint8_t data[SUPCTL_RECV_BUF];
	int fds[SUPCTL_MAX_FDS];
	size_t nfds = 0;
	struct iovec iov;
	struct msghdr msg;
	ssize_t n;
	bool ok;

	out->type = 0;
	out->fd = -1;
	iov.iov_base = data;
	iov.iov_len = sizeof(data);
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	do {
		/* MSG_CMSG_CLOEXEC: a received descriptor never leaks into an exec. */
		n = recvmsg(ctlfd, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;

	ok = collect_fds(&msg, fds, &nfds);
	if (n == 0) {
		/* EOF (or an empty datagram, which no sender of ours produces). */
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		errno = 0;
		return -1;
	}
	ok = ok && n == 1 && (msg.msg_flags & MSG_TRUNC) == 0 && type_known(data[0]);
	ok = ok && nfds == (type_wants_fd(data[0]) ? 1u : 0u);
	/* METRICS' memfd is checked by its reader, sealed (supervisor/sup_metrics.c). */
	ok = ok && (nfds == 0 || data[0] != SUP_CTL_PEER_FD || is_seqpacket(fds[0]));
	if (!ok) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		errno = EPROTO;
		return -1;
	}
	out->type = data[0];
	out->fd = nfds ? fds[0] : -1;
	return 0;
}
