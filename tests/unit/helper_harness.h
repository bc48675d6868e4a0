/*
 * The harness shared by the helper's process tests (helper_harness.c).
 * Needs root; the caller runs in its own private mount namespace.
 */
#ifndef SEPCSI_HELPER_HARNESS_H
#define SEPCSI_HELPER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mh_proto.h"

#define MiB (1024ULL * 1024)

struct helper {
	pid_t pid;
	int fd;
};

extern const char *helper_bin;
/* The next helper_start*() gives the helper a kernel without statmount(2) and listmount(2). */
extern bool helper_before_statmount;
/* The temp dir, the allowed root beneath it, the data dir, the policy file, the helper's log. */
extern char tmp[64], root[128], data[128], policy[128], logfile[128];

int run(const char *const argv[]);
void write_policy(const char *path, const char *extra);
void helper_start_ctl(struct helper *h, const char *policy_file, int ctl_fd);
void helper_start_with(struct helper *h, const char *policy_file);
void helper_start(struct helper *h);
int helper_stop(struct helper *h);
int call(struct helper *h, struct mh_msg *req, struct mh_msg *ans);
int kind_of(int type, uint16_t want, const struct mh_msg *ans);
int do_ping(struct helper *h);
int do_create(struct helper *h, const char *id, uint64_t size, uint64_t *real);
int do_delete(struct helper *h, const char *id);
int do_stage(struct helper *h, const char *id, const char *path, const char *fs, const char *opts,
             int ro, struct mh_msg *out);
int do_unstage(struct helper *h, const char *id, const char *path);
int do_publish(struct helper *h, const char *id, const char *staging, const char *target, int ro);
int do_unpublish(struct helper *h, const char *id, const char *target);
int mountinfo_lines(void);
void mount_opts_at(const char *path, char *out, size_t len);
bool has_opt(const char *opts, const char *o);
int our_loops(bool detach);
bool file_has(const char *path, const char *want);
int write_file(const char *path, const char *text);
bool exists(const char *path);
void cleanup(void);

/* Protocol v2. Each returns the answer kind (MH_E_OK or the error kind), or -1. */
uint32_t send_req(struct helper *h, struct mh_msg *req); /* no wait; the id, 0 if not sent */
int recv_ans(struct helper *h, struct mh_msg *ans, int timeout_ms); /* its type, or -1 */
int do_stage2(struct helper *h, const struct mh_req_stage *q, struct mh_msg *out);
int do_unstage2(struct helper *h, const char *id, const char *path, uint8_t flags);
int do_publish2(struct helper *h, const char *id, const char *staging, const char *target, int ro,
                uint8_t flags);
int do_resize(struct helper *h, const char *id, uint64_t size, uint64_t *real);
int do_snapshot(struct helper *h, const char *ssid, const char *vid, struct mh_ans_copy *out);
int do_delete_snapshot(struct helper *h, const char *ssid);
void clone_req(struct mh_msg *q, const char *id, int kind, const char *src, uint64_t size);
int do_clone(struct helper *h, const char *id, int kind, const char *src, uint64_t size,
             struct mh_ans_copy *out);
int do_capacity(struct helper *h, struct mh_ans_capacity *out);
/* One page of LIST (MH_LIST_*) after the cursor; out may be NULL. */
int do_list(struct helper *h, uint32_t what, const char *after, struct mh_ans_list *out);
int do_expand(struct helper *h, const char *id, const char *staging, const char *fs, uint8_t flags,
              uint64_t *size, struct mh_msg *out);
int do_stats(struct helper *h, const char *id, const char *path, uint8_t flags,
             struct mh_ans_stats *out);
void stage_req(struct mh_req_stage *q, const char *id, const char *path, const char *fs,
               const char *opts, int ro, uint8_t flags);
bool loop_dev_of(const char *id, char *out, size_t len);     /* "/dev/loopN" backed by <id>.img */
int fill_file(const char *path, uint64_t off, uint64_t len); /* pattern + fsync; 0 or -1 */
/*
 * Test pause points (the helper runs with SEPCSI_TEST_PAUSE=1): hold a gate
 * ("copy", or "copy@<id>"), wait until a worker logs that it waits there (its
 * pid, from what the helper logged since pause_hold; 0 after timeout_ms),
 * release it.
 */
void pause_hold(const char *gate);
pid_t pause_wait(const char *gate, int timeout_ms);
void pause_release(const char *gate);
int harness_setup(const char *name); /* private mount ns, temp dir, dirs, policy; atexit cleanup */
void dump_log(void);

#endif
