/*
 * The supervisor control channel receiver (sup_ctl_recv in common/supctl.c),
 * which each child and the supervisor run on datagrams from the other side.
 * What a peer controls is the datagram's bytes and the descriptors it passes
 * (how many, of what kind) and whether credentials ride along, so the input
 * describes a sequence of such datagrams, which the harness really sends over
 * a SOCK_SEQPACKET socketpair:
 *   byte 0: bit 0 set = the receiver has SO_PASSCRED (every datagram then
 *           carries SCM_CREDENTIALS, which no valid message has);
 *   then per datagram: a length byte (payload = low 5 bits, up to 31 bytes),
 *   a descriptor byte (count = low 5 bits, up to 31, more than the receiver
 *   has room for; kind = high 3 bits: SOCK_SEQPACKET socket, stream socket,
 *   pipe, /dev/null), then the payload.
 * Checks, per datagram, against what the wire format (supctl.h) allows:
 *  - accepted iff it is exactly one byte naming a known type, carries exactly
 *    one descriptor for PEER_FD (a SOCK_SEQPACKET socket) and for METRICS (of
 *    any kind: its reader checks the seals), none otherwise, and nothing
 *    else; then the type is returned and the descriptor is close-on-exec and
 *    the receiver's;
 *  - an empty datagram reads as end of channel (errno 0), anything else
 *    refused is EPROTO, with the output cleared (type 0, fd -1);
 *  - the receiver's descriptor table is exactly what it was before, once the
 *    descriptor of an accepted message is closed: a hostile peer can neither
 *    leak descriptors into a child nor make it keep any.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "supctl.h"

#define MAX_SEND 31

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	if (!d)
		abort();
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* One descriptor of the given kind; the second end of a pair is closed at once. */
static int make_fd(int kind)
{
	int sv[2], fd;
	switch (kind) {
	case 0:
	case 1:
		if (socketpair(AF_UNIX, (kind ? SOCK_STREAM : SOCK_SEQPACKET) | SOCK_CLOEXEC, 0,
		               sv) < 0)
			abort();
		close(sv[1]);
		return sv[0];
	case 2:
		if (pipe2(sv, O_CLOEXEC) < 0)
			abort();
		close(sv[1]);
		return sv[0];
	default:
		if ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
			abort();
		return fd;
	}
}

/* Send one datagram; our copies of the descriptors are closed right after. */
static void send_raw(int fd, const uint8_t *buf, size_t len, int nfds, int kind)
{
	union {
		char buf[CMSG_SPACE(MAX_SEND * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	int fds[MAX_SEND];
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	for (int i = 0; i < nfds; i++)
		fds[i] = make_fd(kind);
	if (nfds) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)len)
		abort();
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2], one = 1;
	if (size < 1)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	bool passcred = data[0] & 1;
	if (passcred && setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
		abort();
	int before = count_fds();
	size_t off = 1;
	while (off + 2 <= size) {
		size_t len = data[off] & 31;
		int nfds = data[off + 1] & 31, kind = data[off + 1] >> 5 & 3;
		off += 2;
		if (len > size - off)
			len = size - off;
		const uint8_t *payload = data + off;
		off += len;

		send_raw(sv[0], payload, len, nfds, kind);
		struct sup_ctl_msg m = {.type = 99, .fd = 99};
		errno = 1234;
		int rc = sup_ctl_recv(sv[1], &m);

		int type = len ? payload[0] : 0;
		bool known = type == SUP_CTL_READY || type == SUP_CTL_PEER_FD ||
		             type == SUP_CTL_HELPER_FAILED || type == SUP_CTL_PEER_VIOLATION ||
		             type == SUP_CTL_METRICS;
		bool with_fd = type == SUP_CTL_PEER_FD || type == SUP_CTL_METRICS;
		bool valid = !passcred && len == 1 && known && nfds == (with_fd ? 1 : 0) &&
		             (nfds == 0 || kind == 0 || type == SUP_CTL_METRICS);
		if (valid) {
			FUZZ_CHECK(rc == 0 && m.type == type);
			FUZZ_CHECK((m.fd >= 0) == with_fd);
			if (m.fd >= 0) {
				int st = 0;
				socklen_t sl = sizeof(st);
				FUZZ_CHECK(fcntl(m.fd, F_GETFD) == FD_CLOEXEC);
				FUZZ_CHECK(type == SUP_CTL_METRICS ||
				           (getsockopt(m.fd, SOL_SOCKET, SO_TYPE, &st, &sl) == 0 &&
				            st == SOCK_SEQPACKET));
				close(m.fd);
			}
		} else {
			FUZZ_CHECK(rc == -1 && m.type == 0 && m.fd == -1);
			FUZZ_CHECK(errno == (len == 0 ? 0 : EPROTO));
		}
		FUZZ_CHECK(count_fds() == before);
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
