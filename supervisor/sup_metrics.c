/*
 * The metrics file: the supervisor's own figures and rpcd's last report,
 * written in Prometheus' text exposition format (version 0.0.4) under a
 * temporary name in the file's directory and renamed over the file, so a
 * reader (node-exporter's textfile collector, `sepcsictl metrics`) sees the
 * old file or the new one, never half of one.
 *
 * Runs in the supervisor, as root. Nothing here is fatal: a file that cannot
 * be written is logged and tried again at the next report.
 *
 * rpcd's report is untrusted input. It arrives as a memfd that rpcd sealed
 * (no write, grow or shrink), so what was checked is what is copied, and a
 * read of it can neither block nor run past the size fstat gave. It is kept
 * only if every line is printable ASCII, a sepcsi_ sample or its HELP/TYPE
 * line, and names none of the supervisor's own series: rpcd can report wrong
 * figures about itself, but cannot forge restarts, add another exporter's
 * series, or break the file's format for the collector.
 */
#include "sup_metrics.h"

#include "clock.h"
#include "log.h"
#include "sup_child.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024

void sup_metrics_death(struct sup *s, int role, int wstatus, bool killed)
{
	enum sup_end how = killed                                                ? SUP_END_KILLED
	                   : WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGSYS ? SUP_END_SECCOMP
	                   : WIFSIGNALED(wstatus)                                ? SUP_END_SIGNAL
	                                                                         : SUP_END_EXIT;
	s->metrics.restarts[role][how]++;
}

/* Names the supervisor writes itself; rpcd may not report them. */
static const char *const own_prefixes[] = {"sepcsi_child_", "sepcsi_supervisor_",
                                           "sepcsi_rpcd_report_"};

static bool own_name(const char *name)
{
	for (size_t i = 0; i < sizeof(own_prefixes) / sizeof(own_prefixes[0]); i++)
		if (strncmp(name, own_prefixes[i], strlen(own_prefixes[i])) == 0)
			return true;
	return false;
}

static bool line_ok(const char *l, size_t n, const char **why)
{
	const char *name = l;

	if (n == 0 || n > LINE_MAX_BYTES) {
		*why = n ? "a line is too long" : "an empty line";
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (l[i] < 0x20 || l[i] > 0x7e) {
			*why = "a byte that is not printable ASCII";
			return false;
		}
	if (l[0] == '#') {
		if (n < 7 || (strncmp(l, "# HELP ", 7) != 0 && strncmp(l, "# TYPE ", 7) != 0)) {
			*why = "a comment other than HELP or TYPE";
			return false;
		}
		name = l + 7;
	}
	if (strncmp(name, "sepcsi_", 7) != 0) {
		*why = "a series not named sepcsi_*";
		return false;
	}
	if (own_name(name)) {
		*why = "a series the supervisor reports itself";
		return false;
	}
	return true;
}

bool sup_metrics_text_ok(const char *text, size_t len, const char **why)
{
	if (len == 0 || text[len - 1] != '\n') {
		*why = "empty, or not ending with a newline";
		return false;
	}
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		if (!line_ok(text + i, (size_t)(nl - (text + i)), why))
			return false;
		i = (size_t)(nl - text) + 1;
	}
	return true;
}

static void reject(int fd, const char *why)
{
	log_kv(LOG_LVL_WARN, "metrics_rejected", "role", "rpcd", "reason", why, NULL);
	close(fd);
}

void sup_metrics_from_rpcd(struct sup *s, int fd)
{
	const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
	int seals = fcntl(fd, F_GET_SEALS);
	struct stat st;
	const char *why = NULL;

	if (seals < 0 || (seals & want) != want)
		return reject(fd, "not a memfd sealed against write, grow and shrink");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > SUP_METRICS_RPCD_MAX)
		return reject(fd, "empty, or larger than 1 MiB");
	size_t len = (size_t)st.st_size;
	char *text = malloc(len + 1);
	if (!text)
		abort();
	ssize_t got = pread(fd, text, len, 0);
	close(fd);
	if (got != (ssize_t)len) {
		free(text);
		log_kv(LOG_LVL_WARN, "metrics_rejected", "role", "rpcd", "reason", "short read",
		       NULL);
		return;
	}
	text[len] = '\0';
	if (!sup_metrics_text_ok(text, len, &why)) {
		free(text);
		log_kv(LOG_LVL_WARN, "metrics_rejected", "role", "rpcd", "reason", why, NULL);
		return;
	}
	free(s->metrics.rpcd_text);
	s->metrics.rpcd_text = text;
	s->metrics.rpcd_at_ms = mono_ms();
	sup_metrics_write(s);
}

void sup_metrics_rpcd_gone(struct sup *s)
{
	free(s->metrics.rpcd_text);
	s->metrics.rpcd_text = NULL;
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_own(const struct sup *s, FILE *f)
{
	static const char *const ends[SUP_END_N] = {"exit", "signal", "seccomp", "killed"};

	family(f, "sepcsi_supervisor_start_time_seconds", "gauge",
	       "When the supervisor started, in seconds since the epoch.");
	fprintf(f, "sepcsi_supervisor_start_time_seconds %lld\n",
	        (long long)s->metrics.start_unix_s);
	family(f, "sepcsi_child_up", "gauge", "1 while the child runs and has reported ready.");
	for (int r = 0; r < SUP_NROLES; r++)
		fprintf(f, "sepcsi_child_up{child=\"%s\"} %d\n", s->child[r].name,
		        s->child[r].sm.state == SUP_ST_RUNNING);
	family(f, "sepcsi_child_failed", "gauge",
	       "1 once the supervisor has given up on the child (it then stops, exit 3).");
	for (int r = 0; r < SUP_NROLES; r++)
		fprintf(f, "sepcsi_child_failed{child=\"%s\"} %d\n", s->child[r].name,
		        s->child[r].sm.state == SUP_ST_FAILED);
	family(f, "sepcsi_child_restarts_total", "counter",
	       "Child processes that ended unasked, by how: exit, signal, seccomp (SIGSYS: "
	       "its filter caught a call), killed (by the supervisor: no READY in time, a bad "
	       "control message, or accused of breaking the helper protocol).");
	for (int r = 0; r < SUP_NROLES; r++)
		for (int e = 0; e < SUP_END_N; e++)
			fprintf(f, "sepcsi_child_restarts_total{child=\"%s\",reason=\"%s\"} %llu\n",
			        s->child[r].name, ends[e],
			        (unsigned long long)s->metrics.restarts[r][e]);
	if (s->metrics.rpcd_text) {
		family(f, "sepcsi_rpcd_report_age_seconds", "gauge",
		       "Seconds between rpcd's last report and this file.");
		fprintf(f, "sepcsi_rpcd_report_age_seconds %.3f\n",
		        (double)(mono_ms() - s->metrics.rpcd_at_ms) / 1000.0);
		fputs(s->metrics.rpcd_text, f);
	}
}

/* Write buf to <dir>/.<base>.<pid>.tmp and rename it over <dir>/<base>. */
static int replace_file(const char *path, const char *buf, size_t len)
{
	char d[PATH_MAX], b[PATH_MAX], tmp[PATH_MAX + 32];
	snprintf(d, sizeof(d), "%s", path);
	snprintf(b, sizeof(b), "%s", path);
	const char *base = basename(b);
	int dfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, rc = -1;

	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", base, (int)getpid());
	if (dfd < 0)
		return -1;
	unlinkat(dfd, tmp, 0); /* left by a supervisor with our pid that died mid-write */
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		goto out;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		off += (size_t)n;
	}
	/* No fsync: the file is remade at every report; a crash may lose one, not mix two. */
	if (close(fd) < 0) {
		fd = -1;
		goto out;
	}
	fd = -1;
	rc = renameat(dfd, tmp, dfd, base);
out:
	if (rc < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		unlinkat(dfd, tmp, 0);
		errno = e;
	}
	close(dfd);
	return rc;
}

void sup_metrics_write(struct sup *s)
{
	char *buf = NULL;
	size_t len = 0;

	if (!s->cfg->metrics_file[0])
		return;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	render_own(s, f);
	if (fclose(f) != 0)
		abort();
	if (replace_file(s->cfg->metrics_file, buf, len) < 0)
		log_kv(LOG_LVL_WARN, "metrics_not_written", "path", s->cfg->metrics_file, "error",
		       strerror(errno), NULL);
	free(buf);
}
