/*
 * Unit test of the supervisor control channel codec (common/supctl.c): valid
 * messages round-trip, received descriptors are close-on-exec, and every
 * malformed datagram a hostile peer could craft is refused with EPROTO
 * without leaking a single descriptor into the receiver.
 */
#include "supctl.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

static void pair(int sv[2], int type)
{
	if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
}

/* Send an arbitrary datagram with any number of descriptors, bypassing sup_ctl_send. */
static void raw_send(int fd, const void *data, size_t len, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(32 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

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
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)len) {
		perror("sendmsg");
		exit(1);
	}
}

/* Expect the next receive to fail with EPROTO and leave no descriptor behind. */
static void expect_eproto(int rx, int fds_before)
{
	struct sup_ctl_msg m = {.type = 99, .fd = 99};

	errno = 0;
	CHECK(sup_ctl_recv(rx, &m) == -1);
	CHECK(errno == EPROTO);
	CHECK(m.type == 0 && m.fd == -1);
	CHECK(count_fds() == fds_before);
}

static void test_roundtrip(void)
{
	int sv[2], peer[2];
	struct sup_ctl_msg m;

	pair(sv, SOCK_SEQPACKET);
	pair(peer, SOCK_SEQPACKET);

	CHECK(sup_ctl_send(sv[0], SUP_CTL_READY, -1) == 0);
	CHECK(sup_ctl_recv(sv[1], &m) == 0);
	CHECK(m.type == SUP_CTL_READY && m.fd == -1);

	CHECK(sup_ctl_send(sv[0], SUP_CTL_HELPER_FAILED, -1) == 0);
	CHECK(sup_ctl_recv(sv[1], &m) == 0);
	CHECK(m.type == SUP_CTL_HELPER_FAILED && m.fd == -1);

	CHECK(sup_ctl_send(sv[0], SUP_CTL_PEER_VIOLATION, -1) == 0);
	CHECK(sup_ctl_recv(sv[1], &m) == 0);
	CHECK(m.type == SUP_CTL_PEER_VIOLATION && m.fd == -1);

	CHECK(sup_ctl_send(sv[1], SUP_CTL_PEER_FD, peer[0]) == 0);
	CHECK(sup_ctl_recv(sv[0], &m) == 0);
	CHECK(m.type == SUP_CTL_PEER_FD && m.fd >= 0 && m.fd != peer[0]);
	if (m.fd >= 0) {
		CHECK((fcntl(m.fd, F_GETFD) & FD_CLOEXEC) != 0);
		/* The received descriptor is the same socket: data crosses it. */
		CHECK(write(m.fd, "x", 1) == 1);
		char c = 0;
		CHECK(read(peer[1], &c, 1) == 1 && c == 'x');
		close(m.fd);
	}

	/* METRICS carries one descriptor of any kind (its reader checks the seals). */
	int pipefd[2];
	CHECK(pipe(pipefd) == 0);
	CHECK(sup_ctl_send(sv[1], SUP_CTL_METRICS, pipefd[0]) == 0);
	CHECK(sup_ctl_recv(sv[0], &m) == 0);
	CHECK(m.type == SUP_CTL_METRICS && m.fd >= 0 && (fcntl(m.fd, F_GETFD) & FD_CLOEXEC));
	if (m.fd >= 0)
		close(m.fd);
	errno = 0;
	CHECK(sup_ctl_send(sv[1], SUP_CTL_METRICS, -1) == -1 && errno == EINVAL);
	close(pipefd[0]);
	close(pipefd[1]);

	/* EOF is -1 with errno 0, distinct from a protocol error. */
	close(sv[0]);
	errno = EINVAL;
	CHECK(sup_ctl_recv(sv[1], &m) == -1);
	CHECK(errno == 0);
	close(sv[1]);
	close(peer[0]);
	close(peer[1]);
}

static void test_send_refuses_bad_arguments(void)
{
	int sv[2];

	pair(sv, SOCK_SEQPACKET);
	errno = 0;
	CHECK(sup_ctl_send(sv[0], 0, -1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(sup_ctl_send(sv[0], 77, -1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(sup_ctl_send(sv[0], SUP_CTL_PEER_FD, -1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(sup_ctl_send(sv[0], SUP_CTL_READY, sv[0]) == -1 && errno == EINVAL);
	/* A dead peer is EPIPE, not a SIGPIPE that would kill the sender. */
	close(sv[1]);
	errno = 0;
	CHECK(sup_ctl_send(sv[0], SUP_CTL_READY, -1) == -1 && errno == EPIPE);
	close(sv[0]);
}

static void test_recv_refuses_malformed(void)
{
	int sv[2], p[2], q[2], pipefd[2];
	uint8_t b;
	int base;

	pair(sv, SOCK_SEQPACKET);
	pair(p, SOCK_SEQPACKET);
	pair(q, SOCK_SEQPACKET);
	if (pipe(pipefd) < 0)
		exit(1);
	base = count_fds();

	b = 0; /* type 0 */
	raw_send(sv[0], &b, 1, NULL, 0);
	expect_eproto(sv[1], base);

	b = SUP_CTL_PEER_VIOLATION + 1; /* unknown type */
	raw_send(sv[0], &b, 1, NULL, 0);
	expect_eproto(sv[1], base);

	b = 255;
	raw_send(sv[0], &b, 1, NULL, 0);
	expect_eproto(sv[1], base);

	uint8_t two[2] = {SUP_CTL_READY, 0}; /* wrong length */
	raw_send(sv[0], two, 2, NULL, 0);
	expect_eproto(sv[1], base);

	uint8_t big[64] = {SUP_CTL_READY}; /* longer than the receive buffer */
	raw_send(sv[0], big, sizeof(big), NULL, 0);
	expect_eproto(sv[1], base);

	b = SUP_CTL_READY; /* READY must not carry a descriptor */
	raw_send(sv[0], &b, 1, &p[0], 1);
	expect_eproto(sv[1], base);

	b = SUP_CTL_HELPER_FAILED;
	raw_send(sv[0], &b, 1, &p[0], 1);
	expect_eproto(sv[1], base);

	b = SUP_CTL_PEER_VIOLATION; /* nor may PEER_VIOLATION */
	raw_send(sv[0], &b, 1, &p[0], 1);
	expect_eproto(sv[1], base);

	b = SUP_CTL_PEER_FD; /* PEER_FD without its descriptor */
	raw_send(sv[0], &b, 1, NULL, 0);
	expect_eproto(sv[1], base);

	int twofds[2] = {p[0], q[0]}; /* PEER_FD with two descriptors */
	raw_send(sv[0], &b, 1, twofds, 2);
	expect_eproto(sv[1], base);

	int many[8] = {p[0], p[1], q[0], q[1], p[0], p[1], q[0], q[1]};
	raw_send(sv[0], &b, 1, many, 8);
	expect_eproto(sv[1], base);

	raw_send(sv[0], &b, 1, &pipefd[0], 1); /* not a socket */
	expect_eproto(sv[1], base);

	int stream[2];
	pair(stream, SOCK_STREAM); /* a socket, but not SOCK_SEQPACKET */
	base = count_fds();
	raw_send(sv[0], &b, 1, &stream[0], 1);
	expect_eproto(sv[1], base);
	close(stream[0]);
	close(stream[1]);
	base = count_fds();

	/* After all that the channel still works. */
	struct sup_ctl_msg m;
	CHECK(sup_ctl_send(sv[0], SUP_CTL_PEER_FD, q[1]) == 0);
	CHECK(sup_ctl_recv(sv[1], &m) == 0 && m.type == SUP_CTL_PEER_FD);
	CHECK(count_fds() == base + 1);
	close(m.fd);

	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
	close(pipefd[0]);
	close(pipefd[1]);
}

static void test_recv_refuses_other_ancillary_data(void)
{
	int sv[2], p[2], on = 1, many[24];
	uint8_t b = SUP_CTL_READY;
	int base;

	/* SO_PASSCRED makes every datagram carry SCM_CREDENTIALS: not ours to accept. */
	pair(sv, SOCK_SEQPACKET);
	if (setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0)
		exit(1);
	base = count_fds();
	raw_send(sv[0], &b, 1, NULL, 0);
	expect_eproto(sv[1], base);
	close(sv[0]);
	close(sv[1]);

	/* More descriptors than the receiver has room for (MSG_CTRUNC): none may stay. */
	pair(sv, SOCK_SEQPACKET);
	pair(p, SOCK_SEQPACKET);
	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		many[i] = p[i % 2];
	base = count_fds();
	b = SUP_CTL_PEER_FD;
	raw_send(sv[0], &b, 1, many, sizeof(many) / sizeof(many[0]));
	expect_eproto(sv[1], base);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

static void test_empty_datagram_with_fd(void)
{
	int sv[2], p[2];
	struct sup_ctl_msg m;
	int base;

	pair(sv, SOCK_SEQPACKET);
	pair(p, SOCK_SEQPACKET);
	base = count_fds();
	/* An empty datagram reads like EOF; its descriptor must still be closed. */
	raw_send(sv[0], "", 0, &p[0], 1);
	errno = EINVAL;
	CHECK(sup_ctl_recv(sv[1], &m) == -1 && errno == 0);
	CHECK(m.fd == -1);
	CHECK(count_fds() == base);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

static void test_nonblocking_empty(void)
{
	int sv[2];
	struct sup_ctl_msg m;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
		exit(1);
	errno = 0;
	CHECK(sup_ctl_recv(sv[1], &m) == -1 && errno == EAGAIN);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	test_roundtrip();
	test_send_refuses_bad_arguments();
	test_recv_refuses_malformed();
	test_recv_refuses_other_ancillary_data();
	test_empty_datagram_with_fd();
	test_nonblocking_empty();
	return tap_done("test_supctl");
}
