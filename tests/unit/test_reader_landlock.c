/*
 * sepcsi-reader's Landlock ruleset (mounthelper/reader/reader_landlock.c),
 * applied in a child: listing directories and reading files under /proc,
 * /sys and the images directory works, a device opens to be asked (access
 * mode 3) but not to be read, and O_PATH opens work anywhere;
 * nothing is written, created, truncated, removed or renamed anywhere, the
 * images included, and no other file is read nor directory listed (a pod's
 * secret, its name, /etc/passwd). Skipped (77) on a kernel
 * without Landlock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reader.h"
#include "tap.h"

static char top[] = "/tmp/sepcsi-landlock-XXXXXX";
static char images[64], secret[64], image[96];

/* open(path, flags) fails with EACCES (Landlock's answer). */
static bool denied(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EACCES;
}

static bool opens(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* In the child, once confined: each failed check is one exit bit. */
static int confined_checks(void)
{
	char made[96], moved[128];
	int bad = 0, n = 0;
	snprintf(made, sizeof(made), "%s/new", top);
	snprintf(moved, sizeof(moved), "%s/moved.img", images);
#define EXPECT(c) (bad |= (c) ? 0 : 1 << n, n++)
	EXPECT(opens("/proc/self/status", O_RDONLY));
	EXPECT(opens("/sys/kernel", O_RDONLY | O_DIRECTORY));
	EXPECT(denied("/dev/null", O_RDONLY)); /* no device's bytes */
	EXPECT(opens("/dev/null", O_ACCMODE)); /* a device to be asked: mode 3 */
	EXPECT(opens(image, O_RDONLY));
	EXPECT(opens(images, O_RDONLY | O_DIRECTORY));
	EXPECT(denied("/etc", O_RDONLY | O_DIRECTORY)); /* not even a name elsewhere */
	EXPECT(opens("/etc", O_PATH | O_DIRECTORY));    /* a walk's step: O_PATH */
	EXPECT(denied(secret, O_RDONLY));               /* a file elsewhere: never read */
	EXPECT(denied("/etc/passwd", O_RDONLY));
	EXPECT(denied(image, O_RDWR));
	EXPECT(denied(secret, O_WRONLY | O_TRUNC));
	EXPECT(denied(made, O_WRONLY | O_CREAT));
	EXPECT(denied("/dev/null", O_WRONLY));
	EXPECT(mkdir(made, 0700) < 0 && errno == EACCES);
	EXPECT(unlink(secret) < 0 && errno == EACCES);
	EXPECT(rename(image, moved) < 0 && (errno == EACCES || errno == EXDEV));
	EXPECT(truncate(image, 0) < 0 && errno == EACCES);
	EXPECT(symlink("/etc", made) < 0 && errno == EACCES);
	return bad;
}

int main(void)
{
	if (!mkdtemp(top))
		return 1;
	snprintf(images, sizeof(images), "%s/images", top);
	snprintf(secret, sizeof(secret), "%s/secret", top);
	snprintf(image, sizeof(image), "%s/sv-1.img", images);
	CHECK(mkdir(images, 0700) == 0);
	FILE *f = fopen(secret, "w"), *g = fopen(image, "w");
	CHECK(f && g);
	if (f)
		(void)fclose(f);
	if (g)
		(void)fclose(g);
	int dir = open(images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(120);
		int ll = reader_landlock(dir);
		_exit(ll == 0 ? 77 : ll < 0 ? 121 : confined_checks());
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	int code = WEXITSTATUS(st);
	if (code == 77) {
		printf("test_reader_landlock: no Landlock in this kernel; skipped\n");
		return 77;
	}
	if (code)
		fprintf(stderr, "failed checks (bit i is check i): %#x\n", code);
	CHECK(code == 0);
	/* Untouched from outside, too. */
	struct stat s;
	CHECK(stat(image, &s) == 0 && stat(secret, &s) == 0);
	unlink(image);
	unlink(secret);
	rmdir(images);
	rmdir(top);
	return tap_done("test_reader_landlock");
}
