/*
 * Test pause points. Deterministic tests of "what if this step is slow" and
 * "what if the helper dies right here" need a step that stays put until the
 * test has looked; machine speed and volume sizes are no such guarantee.
 *
 * Compiled only into a test build (-DSEPCSI_TESTS=ON, as tools/test.sh
 * builds): a shipped build has no pause point at all (mh_pause.h). There,
 * enabled only when the helper starts with SEPCSI_TEST_PAUSE=1 in its
 * environment (the supervisor passes the variable on only when it has it
 * itself, so only whoever starts the driver as root can turn it on); a
 * warning says so at start. Then a worker reaching mh_pause(c, "name", id)
 * checks for the file <data-dir>/test-pause/<name>, or <name>@<id> to hold
 * only the operation on that id (root's directory, 0711 if the helper makes
 * it, opened at start so that a helper under its own uid still looks there;
 * no symlink followed); while it exists the worker logs "test_pause
 * point=<gate> pid=N key=<id>" once (no key for a request without an id) and
 * waits, polling every 5 ms. The test removes the file to let it go on, or
 * kills the worker, the helper or rpcd meanwhile. One point is in the main
 * loop, not a worker: "dispatch", after an idle worker was picked for a
 * request and before the request is sent to it (mh_worker.c).
 *
 * Runs in a helper worker; uses only calls the helper's seccomp table already
 * allows (newfstatat, clock_nanosleep). Disabled at run time, it costs one branch.
 */
#include "mh_pause.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static bool enabled;
static int gates = -1;

void mh_pause_init(int images_fd)
{
	int data_fd;
	const char *v = getenv("SEPCSI_TEST_PAUSE");
	enabled = v && strcmp(v, "1") == 0;
	if (!enabled)
		return;
	log_warn("test pause points are enabled (SEPCSI_TEST_PAUSE=1): for tests only");
	data_fd = openat(images_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	(void)mkdirat(data_fd, "test-pause", 0711);
	gates = openat(data_fd, "test-pause", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (data_fd >= 0)
		close(data_fd);
}

static bool gate_exists(const struct mh_ctx *c, const char *gate)
{
	struct stat st;
	(void)c;
	return gates >= 0 && fstatat(gates, gate, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The gate that holds point for key, in gate; false if none is held (or pauses are off). */
static bool held_gate(const struct mh_ctx *c, const char *point, const char *key, char *gate,
                      size_t cap)
{
	if (!enabled)
		return false;
	snprintf(gate, cap, "%s@%s", point, key ? key : "");
	if (key && gate_exists(c, gate))
		return true;
	snprintf(gate, cap, "%s", point);
	return gate_exists(c, gate);
}

bool mh_pause_held(const struct mh_ctx *c, const char *point, const char *key)
{
	char gate[96];
	return held_gate(c, point, key, gate, sizeof(gate));
}

void mh_pause(const struct mh_ctx *c, const char *point, const char *key)
{
	char gate[96];
	if (!held_gate(c, point, key, gate, sizeof(gate)))
		return;
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	/* The key too: a test holding an unkeyed gate tells its request from another's. */
	log_kv(LOG_LVL_INFO, "test_pause", "point", gate, "pid", pid, "key", key, NULL);
	const struct timespec tick = {.tv_nsec = 5000000L};
	while (gate_exists(c, gate))
		nanosleep(&tick, NULL);
	log_kv(LOG_LVL_INFO, "test_resume", "point", gate, "pid", pid, NULL);
}
