/*
 * rpcd's end of the helper channel (controller/mh_client.c): how it decodes
 * the helper's datagrams and matches them to the calls waiting for them. The
 * helper is privileged but a separate process, and rpcd must not believe an
 * answer it did not ask for. The harness plays the helper on a real
 * SOCK_SEQPACKET socketpair: one stub call runs on a thread, the harness
 * reads its request and sends back the datagrams the input describes, then
 * hangs up.
 *   byte 0: which stub to call (one per operation);
 *   byte 1: bit 0 set = write the request's id into bytes 4..7 of each
 *           datagram (so answers can match; otherwise they carry what the
 *           input says);
 *   then datagrams, each a big-endian u16 length and that many bytes.
 * The outcome is predicted from the protocol alone and compared:
 *  - the request the stub sent decodes, is of the stub's type, and its id is
 *    not 0;
 *  - walking the datagrams in order: an empty one is the end of the channel;
 *    one that does not decode, is a request, answers no pending id, or is the
 *    wrong answer type breaks the channel; the first that decodes as the
 *    expected answer (or ANS_ERROR) with the request's id completes the call;
 *  - a completed call returns 0 with the answer's fields in its outputs, or
 *    -1 with the error's kind, errno and reason; a broken or ended channel
 *    makes it return -1 with MH_E_UNAVAILABLE (and the client then says the
 *    channel is down); it never hangs; the client frees cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"
#include "mh_client.h"
#include "mh_proto_all.h"

#define VOL  "sv-0123456789abcdef0123456789abcdef"
#define SNAP "ss-0123456789abcdef0123456789abcdef"
#define PATH "/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount"

/* One call of a stub, with room for whatever it returns. */
struct call {
	struct mh_client *c;
	int op;
	int rc;
	struct mh_err err;
	uint64_t size;
	struct mh_ans_copy copy;
	struct mh_ans_capacity cap;
	struct mh_ans_stats stats;
	struct mh_ans_list list;
};

struct stub {
	uint16_t req, ans;
};

static const struct stub stubs[] = {
    {MH_REQ_PING, MH_ANS_PING},           {MH_REQ_CREATE, MH_ANS_CREATE},
    {MH_REQ_DELETE, MH_ANS_DELETE},       {MH_REQ_STAGE, MH_ANS_STAGE},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE},     {MH_REQ_PUBLISH, MH_ANS_PUBLISH},
    {MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH}, {MH_REQ_RESIZE, MH_ANS_RESIZE},
    {MH_REQ_SNAPSHOT, MH_ANS_SNAPSHOT},   {MH_REQ_DELETE_SNAPSHOT, MH_ANS_DELETE_SNAPSHOT},
    {MH_REQ_CLONE, MH_ANS_CLONE},         {MH_REQ_CAPACITY, MH_ANS_CAPACITY},
    {MH_REQ_EXPAND, MH_ANS_EXPAND},       {MH_REQ_STATS, MH_ANS_STATS},
    {MH_REQ_LIST, MH_ANS_LIST},
};
#define NSTUBS (sizeof(stubs) / sizeof(stubs[0]))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_init("fuzz", LOG_FMT_TEXT, LOG_LVL_ERROR);
	return 0;
}

static void *run_call(void *arg)
{
	struct call *k = arg;
	struct mh_client *c = k->c;
	struct mh_err *e = &k->err;
	switch (stubs[k->op].req) {
	case MH_REQ_PING:
		k->rc = mh_ping(c, e);
		break;
	case MH_REQ_CREATE:
		k->rc = mh_create(c, VOL, 1 << 20, &k->size, e);
		break;
	case MH_REQ_DELETE:
		k->rc = mh_delete(c, VOL, e);
		break;
	case MH_REQ_STAGE: {
		struct mh_req_stage q = {.volume_id = VOL, .staging_path = PATH, .fs_type = "ext4"};
		k->rc = mh_stage(c, &q, e);
		break;
	}
	case MH_REQ_UNSTAGE:
		k->rc = mh_unstage(c, VOL, PATH, e);
		break;
	case MH_REQ_PUBLISH: {
		struct mh_req_publish q = {
		    .volume_id = VOL, .staging_path = PATH, .target_path = PATH};
		k->rc = mh_publish(c, &q, e);
		break;
	}
	case MH_REQ_UNPUBLISH:
		k->rc = mh_unpublish(c, VOL, PATH, e);
		break;
	case MH_REQ_RESIZE:
		k->rc = mh_resize(c, VOL, 2 << 20, &k->size, e);
		break;
	case MH_REQ_SNAPSHOT:
		k->rc = mh_snapshot(c, SNAP, VOL, &k->copy, e);
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		k->rc = mh_delete_snapshot(c, SNAP, e);
		break;
	case MH_REQ_CLONE: {
		struct mh_req_clone q = {.volume_id = VOL,
		                         .source_kind = MH_SRC_SNAPSHOT,
		                         .source_id = SNAP,
		                         .size_bytes = 1 << 20};
		k->rc = mh_clone(c, &q, &k->copy, e);
		break;
	}
	case MH_REQ_CAPACITY:
		k->rc = mh_capacity(c, &k->cap, e);
		break;
	case MH_REQ_EXPAND: {
		struct mh_req_expand q = {
		    .volume_id = VOL, .staging_path = PATH, .fs_type = "ext4"};
		k->rc = mh_expand(c, &q, &k->size, e);
		break;
	}
	case MH_REQ_STATS: {
		struct mh_req_stats q = {.volume_id = VOL, .path = PATH};
		k->rc = mh_stats(c, &q, &k->stats, e);
		break;
	}
	case MH_REQ_LIST:
		k->rc = mh_list(c, MH_LIST_MOUNTS, "17", &k->list, e);
		break;
	}
	return NULL;
}

/* The outputs of a completed call hold the answer's fields (field by field: padding may differ). */
static void check_outputs(const struct call *k, const struct mh_msg *a)
{
	const struct mh_ans_copy *copy = &a->u.copy_ans;
	const struct mh_ans_capacity *cap = &a->u.capacity_ans;
	const struct mh_ans_stats *stats = &a->u.stats_ans;

	switch (a->type) {
	case MH_ANS_CREATE:
	case MH_ANS_RESIZE:
	case MH_ANS_EXPAND:
		FUZZ_CHECK(k->size == a->u.size_ans.size_bytes);
		break;
	case MH_ANS_SNAPSHOT:
	case MH_ANS_CLONE:
		FUZZ_CHECK(k->copy.size_bytes == copy->size_bytes &&
		           k->copy.reflinked == copy->reflinked);
		break;
	case MH_ANS_CAPACITY:
		FUZZ_CHECK(k->cap.available_bytes == cap->available_bytes &&
		           k->cap.total_bytes == cap->total_bytes &&
		           k->cap.max_volume_bytes == cap->max_volume_bytes &&
		           k->cap.reflink == cap->reflink);
		break;
	case MH_ANS_STATS:
		FUZZ_CHECK(k->stats.bytes_total == stats->bytes_total &&
		           k->stats.bytes_available == stats->bytes_available &&
		           k->stats.bytes_used == stats->bytes_used);
		FUZZ_CHECK(k->stats.inodes_total == stats->inodes_total &&
		           k->stats.inodes_free == stats->inodes_free &&
		           k->stats.inodes_used == stats->inodes_used);
		FUZZ_CHECK(k->stats.abnormal == stats->abnormal &&
		           memcmp(k->stats.message, stats->message, sizeof(stats->message)) == 0);
		break;
	case MH_ANS_LIST:
		FUZZ_CHECK(k->list.more == a->u.list_ans.more &&
		           strcmp(k->list.text, a->u.list_ans.text) == 0);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[MH_MSG_MAX + 1], dgram[65536];
	static struct mh_msg req, ans;
	static struct call k;
	int sv[2];
	if (size < 2)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	memset(&k, 0, sizeof(k));
	k.c = mh_client_new(sv[0]);
	k.op = (int)(data[0] % NSTUBS);
	bool patch_id = data[1] & 1;
	pthread_t thr;
	if (pthread_create(&thr, NULL, run_call, &k) != 0)
		abort();

	/* The request, as the helper would read it (libFuzzer's SIGALRM may interrupt). */
	ssize_t n;
	do
		n = recv(sv[1], buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	FUZZ_CHECK(n > 0 && mh_msg_decode(buf, (size_t)n, &req) == 0);
	FUZZ_CHECK(req.type == stubs[k.op].req && req.id != 0);

	/* Send the datagrams and predict what the client makes of them. */
	enum { PENDING, ANSWERED, DOWN } state = PENDING;
	for (size_t off = 2; off + 2 <= size;) {
		size_t len = (size_t)data[off] << 8 | data[off + 1];
		off += 2;
		if (len > size - off)
			len = size - off;
		memcpy(dgram, data + off, len);
		off += len;
		if (patch_id && len >= 8) {
			uint32_t id = htonl(req.id);
			memcpy(dgram + 4, &id, 4);
		}
		/* Once the client shut the channel down, sending fails: that is fine. */
		(void)!send(sv[1], dgram, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (state == DOWN)
			continue;
		/* The first datagram that decodes as the call's answer (or an error) with its
		 * id completes it; anything else before that breaks the channel: the end, one
		 * that does not decode, a request, an answer for no pending request or of the
		 * wrong type. */
		bool ok = len > 0 && len <= MH_MSG_MAX && mh_msg_decode(dgram, len, &ans) == 0;
		if (ok && ans.id == req.id &&
		    (ans.type == stubs[k.op].ans || ans.type == MH_ANS_ERROR)) {
			state = ANSWERED;
			break; /* what follows may or may not be read before the call returns */
		}
		state = DOWN;
	}
	shutdown(sv[1], SHUT_WR);
	pthread_join(thr, NULL);

	if (state == ANSWERED && ans.type == MH_ANS_ERROR) {
		FUZZ_CHECK(k.rc == -1 && k.err.kind == (enum mh_err_kind)ans.u.error.kind);
		FUZZ_CHECK(k.err.sys_errno == (int)ans.u.error.sys_errno);
		FUZZ_CHECK(strcmp(k.err.reason, ans.u.error.reason) == 0);
	} else if (state == ANSWERED) {
		FUZZ_CHECK(k.rc == 0 && k.err.kind == MH_E_OK);
		check_outputs(&k, &ans);
	} else {
		FUZZ_CHECK(k.rc == -1 && k.err.kind == MH_E_UNAVAILABLE);
		FUZZ_CHECK(!mh_client_connected(k.c));
	}
	FUZZ_CHECK(strlen(k.err.reason) <= MH_REASON_MAX);
	close(sv[1]);
	mh_client_free(k.c);
	return 0;
}
