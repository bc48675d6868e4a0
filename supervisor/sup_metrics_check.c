/*
 * sepcsi-metrics-check: whether one metrics report of rpcd's may go into the
 * metrics file. The supervisor starts one for each report it reads
 * (sup_metrics.c, through sup_spawn.c: ids of its own, --metrics-user, every
 * capability set empty, no_new_privs, a session of its own, killed with the
 * supervisor), with the report, a memfd rpcd sealed, as fd 3, a pipe as fd 4
 * and /dev/null for the rest. So the one parser of text rpcd wrote holds
 * nothing but that report and its answer. Not rpcd's ids: a process may
 * write into the memory of another of its own uid and gid (/proc/PID/mem),
 * and rpcd could then answer for the check, or run code outside rpcd's filter.
 *
 * Built and installed execute-only (0711), it runs not dumpable from its exec
 * on; it says so again itself (a copy someone made readable), and installs
 * its filter (policy/seccomp_metrics.c: no open, no socket, no exec; writes
 * only to fd 4) before it reads a byte, reads the report whole and checks it
 * (sup_metrics_text.c).
 *
 * Exit 0: accepted. 1: refused, with the line it is about (a native u32, 0
 * for the report as a whole) and the reason written to fd 4 in one write.
 * 2: the descriptors were not what they should be, or the filter would not
 * load. It ends with _exit, so no exit handler runs under its filter (a
 * sanitizer build's leak check would need calls the filter has not). The
 * supervisor refuses the report on anything but 0, and kills a check still
 * running after SUP_METRICS_CHECK_MS, with its process group.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pol_seccomp.h"
#include "sup_metrics_text.h"

#define REPORT_FD 3

static int refuse(const char *why, unsigned line)
{
	char buf[sizeof(uint32_t) + SUP_METRICS_WHY_MAX];
	const uint32_t l = line;
	size_t n = strnlen(why, SUP_METRICS_WHY_MAX);
	memcpy(buf, &l, sizeof(l));
	memcpy(buf + sizeof(l), why, n);
	return write(POL_SC_METRICS_WHY_FD, buf, sizeof(l) + n) == (ssize_t)(sizeof(l) + n) ? 1 : 2;
}

/* The verdict, once its filter is on: 0 accepted, 1 refused (the reason sent), 2 cannot tell. */
static int check(void)
{
	struct stat st;
	if (fstat(REPORT_FD, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > SUP_METRICS_RPCD_MAX)
		return 2;
	size_t len = (size_t)st.st_size;
	char *text = malloc(len + 1);
	if (!text || pread(REPORT_FD, text, len, 0) != (ssize_t)len)
		return 2;
	text[len] = '\0';
	const char *why = NULL;
	unsigned line = 0;
	return sup_metrics_text_ok(text, len, &why, &line) ? 0 : refuse(why, line);
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr,
		        "usage: sepcsi-metrics-check (started by sepcsi-supervisor only)\n");
		return 2;
	}
	/* Nobody of its uid may reach into it; the filter before a byte of the report. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    pol_seccomp_install(&pol_sc_metrics, false) < 0)
		return 2;
	/* _exit: nothing to flush (write(2) only), and no exit handler runs under the filter. */
	_exit(check());
}
