/*
 * Test aid for test_seccomp: exec'd under the helper's confinement, it copies
 * the capability, no_new_privs and seccomp lines of /proc/self/status to
 * stdout. Uses only open/read/write so it runs under the helper's filter.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	static char buf[8192];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 1; /* cppcheck-suppress resourceLeak ; the exit closes fd */
	buf[n] = '\0';
	for (char *line = buf, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
		    !strncmp(line, "Seccomp:", 8))
			if (write(1, line, (size_t)(nl - line + 1)) < 0)
				return 1;
	}
	return 0;
}
