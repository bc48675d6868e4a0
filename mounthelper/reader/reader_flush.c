/*
 * sepcsi-reader --flusher: the slow half of an unmount or a freeze, out of the
 * core's one thread. Unmounting or freezing a file system first writes back
 * what it holds dirty, which can take seconds (tests/bench/core_serial.py);
 * done by the core itself, every other volume's request would wait behind it.
 * So the orchestrating side asks FLUSH of a volume before its UNSTAGE or
 * FREEZE: the core hands the volume's file system to the flusher
 * (core/core_flush.c) and goes on serving requests in order; when the
 * flusher says it is done, FLUSH is answered, and the UNSTAGE or FREEZE that
 * follows finds little left to write. One flusher, in order: a volume with
 * much to write back delays the others' FLUSH, never another request.
 *
 * Started by the core's starter beside the reader (mh_relay.c), the core's
 * child: root WITHOUT any capability (its starter's pol_caps_confine_tools,
 * checked by reader_main.c), killed with the core, its socket to the core
 * on fd 6 (POL_SC_FLUSH_FD) and, once its filter is in, no other
 * descriptor; the filter (pol_sc_flusher, from the compiled policy):
 * receive a descriptor, syncfs, close, answer, exit. It ends when its
 * socket does.
 *
 * Safety argument. syncfs writes back what a file system already holds; it
 * changes nothing a user would see. The core hands over only a detached
 * clone of the file system mounted from the loop device it attached to that
 * volume's own image, never a frozen one (core_flush.c); a flusher taken over
 * holds that descriptor, which it could read through, until it closes it:
 * the volume's files, which the images' owner has as ciphertext or plaintext
 * already, except what a pod unlocked with fscrypt. Its filter has no open of
 * any kind: the descriptor is all it can reach.
 */
#include "reader.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pol_sc_load.h"

void __attribute__((noreturn)) reader_flush_serve(void)
{
	for (;;) {
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		uint32_t tag;
		struct iovec iov = {.iov_base = &tag, .iov_len = sizeof(tag)};
		struct msghdr m = {.msg_iov = &iov,
		                   .msg_iovlen = 1,
		                   .msg_control = ctl.buf,
		                   .msg_controllen = sizeof(ctl.buf)};
		ssize_t n = recvmsg(POL_SC_FLUSH_FD, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (n != sizeof(tag) || !c || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len != CMSG_LEN(sizeof(int)))
			_exit(3); /* only the core writes here */
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		int32_t err = syncfs(fd) < 0 ? errno : 0;
		close(fd); /* before the answer: the request finds the file system as it left it */
		uint8_t out[8];
		memcpy(out, &tag, 4);
		memcpy(out + 4, &err, 4);
		if (send(POL_SC_FLUSH_FD, out, sizeof(out), MSG_NOSIGNAL) != sizeof(out))
			_exit(0);
	}
}
