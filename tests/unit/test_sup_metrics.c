/*
 * Unit test of the supervisor's metrics file (supervisor/sup_metrics.c): the
 * check of rpcd's report refuses every line that could forge the
 * supervisor's own series, add another exporter's, or break the format; a
 * report arrives only as a sealed memfd (an unsealed one, a pipe or an
 * oversized one is dropped, and no descriptor leaks); the file is replaced
 * whole and holds the supervisor's figures followed by the accepted report.
 */
#include "sup_child.h"
#include "sup_metrics.h"
#include "tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool ok(const char *text)
{
	const char *why = NULL;
	bool r = sup_metrics_text_ok(text, strlen(text), &why);
	CHECK(r || why != NULL);
	return r;
}

static void test_text_check(void)
{
	CHECK(ok("# HELP sepcsi_x Help.\n# TYPE sepcsi_x counter\nsepcsi_x{a=\"b\"} 3\n"));
	CHECK(ok("sepcsi_volumes 0\n"));
	CHECK(!ok(""));
	CHECK(!ok("sepcsi_x 1"));                 /* no final newline */
	CHECK(!ok("sepcsi_x 1\n\nsepcsi_y 2\n")); /* an empty line */
	CHECK(!ok("node_cpu_seconds_total 1\n")); /* another exporter's series */
	CHECK(!ok("# HELP node_x forged\n"));
	CHECK(!ok("# EOF\n"));
	CHECK(!ok("sepcsi_child_up{child=\"mounthelper\"} 1\n")); /* the supervisor's own */
	CHECK(!ok("# TYPE sepcsi_child_restarts_total counter\n"));
	CHECK(!ok("sepcsi_supervisor_start_time_seconds 1\n"));
	CHECK(!ok("sepcsi_rpcd_report_age_seconds 0\n"));
	CHECK(!ok("sepcsi_x{a=\"\x01\"} 1\n"));     /* a control byte */
	CHECK(!ok("sepcsi_x{a=\"\xc3\xa9\"} 1\n")); /* not ASCII */
	CHECK(!ok("sepcsi_x 1\r\n"));
	char big[2048];
	memset(big, 'x', sizeof(big));
	memcpy(big, "sepcsi_", 7);
	big[sizeof(big) - 2] = '\n';
	big[sizeof(big) - 1] = '\0';
	CHECK(!ok(big)); /* a line over 1024 bytes */
}

static int memfd_with(const char *text, unsigned seals)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    (seals && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
		perror("memfd");
		exit(1);
	}
	return fd;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		(void)fclose(f); /* read only: nothing to flush */
	buf[n] = '\0';
	return buf;
}

static void test_reports(void)
{
	static struct sup_config cfg;
	static struct sup s;
	char dir[] = "/tmp/sup-metrics-XXXXXX";
	const unsigned all = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(cfg.metrics_file, sizeof(cfg.metrics_file), "%s/m.prom", dir);
	s.cfg = &cfg;
	s.child[SUP_HELPER].name = "mounthelper";
	s.child[SUP_RPCD].name = "rpcd";
	s.child[SUP_HELPER].sm.state = SUP_ST_RUNNING;
	s.child[SUP_RPCD].sm.state = SUP_ST_RUNNING;

	/* Unsealed, half-sealed, a pipe: dropped, and closed. */
	int fd = memfd_with("sepcsi_good 1\n", 0);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	fd = memfd_with("sepcsi_good 1\n", F_SEAL_GROW | F_SEAL_SHRINK);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "sepcsi_good 1\n", 14) == 14);
	sup_metrics_from_rpcd(&s, p[0]);
	CHECK(!fd_open(p[0]) && s.metrics.rpcd_text == NULL);
	close(p[1]);
	/* Sealed but forging the supervisor's series: dropped. */
	fd = memfd_with("sepcsi_child_up{child=\"rpcd\"} 1\n", all);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	CHECK(access(cfg.metrics_file, F_OK) != 0); /* nothing accepted, nothing written */

	/* A good one: kept, and the file holds both parts. */
	fd = memfd_with("# TYPE sepcsi_good gauge\nsepcsi_good 1\n", all);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text != NULL);
	const char *text = slurp(cfg.metrics_file);
	CHECK(strstr(text, "sepcsi_child_up{child=\"rpcd\"} 1\n") != NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"mounthelper\",reason=\"seccomp\"} "
	                   "0\n") != NULL);
	CHECK(strstr(text, "sepcsi_rpcd_report_age_seconds ") != NULL);
	CHECK(strstr(text, "\nsepcsi_good 1\n") != NULL);

	/* A death counts by how it ended; rpcd's part goes with rpcd. */
	sup_metrics_death(&s, SUP_HELPER, SIGSYS, false); /* a wait status: killed by SIGSYS */
	sup_metrics_death(&s, SUP_RPCD, 9, true);
	sup_metrics_death(&s, SUP_RPCD, 1 << 8, false); /* exit 1 */
	sup_metrics_rpcd_gone(&s);
	s.child[SUP_RPCD].sm.state = SUP_ST_BACKOFF;
	sup_metrics_write(&s);
	text = slurp(cfg.metrics_file);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"mounthelper\",reason=\"seccomp\"} "
	                   "1\n") != NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"rpcd\",reason=\"killed\"} 1\n") !=
	      NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"rpcd\",reason=\"exit\"} 1\n") !=
	      NULL);
	CHECK(strstr(text, "sepcsi_child_up{child=\"rpcd\"} 0\n") != NULL);
	CHECK(strstr(text, "sepcsi_good") == NULL);

	/* Only the file is left in its directory: no temporary file. */
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.m.prom.%d.tmp", dir, (int)getpid());
	CHECK(access(tmp, F_OK) != 0);
	unlink(cfg.metrics_file);
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	test_text_check();
	test_reports();
	return tap_done("test_sup_metrics");
}
