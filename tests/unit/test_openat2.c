/*
 * openat2_retry's way without openat2 (mounthelper/reader/reader_openat2.c),
 * as sepcsi-reader takes it (its filter answers openat2 ENOSYS): in a child under such a
 * filter, one name beneath a directory opens as openat2 would open it, a
 * symlink is ELOOP however it is asked for, and whatever it cannot promise
 * ("..", ".", an empty name, a path, RESOLVE_NO_XDEV) stays ENOSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include "openat2.h"
#include "reader.h"
#include "tap.h"

#define SAFE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static char top[] = "/tmp/sepcsi-openat2-XXXXXX";

static bool gives(int dir, const char *rel, int flags, uint64_t resolve, int err)
{
	int fd = openat2_retry(dir, rel, flags, 0, resolve);
	if (fd >= 0)
		close(fd);
	return err ? fd < 0 && errno == err : fd >= 0;
}

static int checks(int dir)
{
	int bad = 0, n = 0;
#define EXPECT(c) (bad |= (c) ? 0 : 1 << n, n++)
	EXPECT(gives(dir, "d", O_PATH | O_DIRECTORY, SAFE, 0));
	EXPECT(gives(dir, "f", O_RDONLY, SAFE, 0));
	EXPECT(gives(dir, "f", O_PATH, SAFE, 0));
	EXPECT(gives(dir, "link", O_PATH | O_DIRECTORY, SAFE, ELOOP)); /* not ENOTDIR */
	EXPECT(gives(dir, "link", O_PATH, SAFE, ELOOP));
	EXPECT(gives(dir, "link", O_RDONLY, SAFE, ELOOP));
	EXPECT(gives(dir, "f", O_PATH | O_DIRECTORY, SAFE, ENOTDIR));
	EXPECT(gives(dir, "missing", O_PATH, SAFE, ENOENT));
	EXPECT(gives(dir, "..", O_PATH | O_DIRECTORY, SAFE, ENOSYS));
	EXPECT(gives(dir, ".", O_PATH | O_DIRECTORY, SAFE, ENOSYS));
	EXPECT(gives(dir, "", O_PATH, SAFE, ENOSYS));
	EXPECT(gives(dir, "d/e", O_PATH, SAFE, ENOSYS));
	EXPECT(gives(dir, "/etc", O_PATH, SAFE, ENOSYS));
	EXPECT(gives(dir, "d", O_PATH | O_DIRECTORY, RESOLVE_IN_TREE, ENOSYS)); /* NO_XDEV */
	return bad;
}

int main(void)
{
	char p[96];
	CHECK(mkdtemp(top) != NULL);
	snprintf(p, sizeof(p), "%s/d", top);
	CHECK(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/d/e", top);
	CHECK(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/f", top);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f)
		(void)fclose(f);
	snprintf(p, sizeof(p), "%s/link", top);
	CHECK(symlink("d", p) == 0);
	int dir = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(dir >= 0);
	pid_t pid = fork();
	if (pid == 0) {
		openat2_no_syscall = reader_openat2_one_name; /* as sepcsi-reader sets it */
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
		if (!ctx ||
		    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 ||
		    seccomp_load(ctx) < 0)
			_exit(120);
		int bad = checks(dir);
		if (bad)
			fprintf(stderr, "failed checks (bit i is check i): %#x\n", bad);
		_exit(bad ? 1 : 0);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	CHECK(WEXITSTATUS(st) == 0);
	/* With openat2 itself, those it cannot promise open or fail otherwise: the checks see it.
	 */
	CHECK(checks(dir) == (1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12 | 1 << 13));
	static const char *const made[] = {"link", "f", "d/e", "d"};
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		CHECK(unlinkat(dir, made[i], i >= 2 ? AT_REMOVEDIR : 0) == 0);
	close(dir);
	CHECK(rmdir(top) == 0);
	return tap_done("test_openat2");
}
