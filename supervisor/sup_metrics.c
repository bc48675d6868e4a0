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
 * rpcd's report is untrusted input, and the supervisor holds capabilities:
 * so it parses none of it. The report arrives as a memfd that rpcd sealed (no
 * write, grow or shrink), so what was checked is what is copied, and a read
 * of it can neither block nor run past the size fstat gave. The supervisor
 * looks only at the seals and the size, then starts sepcsi-metrics-check on
 * it (sup_metrics_check.c: ids of its own, no capability, a filter of its own),
 * the one process that parses it (sup_metrics_text.c); when that exits 0 the
 * report is kept whole, else not at all (then the last accepted one stays).
 * A check that took itself over could accept anything rpcd wrote: so the
 * supervisor copies only printable lines about sepcsi_ names that name none
 * of its own families anywhere (a look for bytes and fixed strings, no
 * parser), and rpcd cannot forge the supervisor's figures, or add another
 * exporter's, whatever the check says.
 */
#include "sup_metrics.h"

#include "clock.h"
#include "log.h"
#include "sup_child.h"
#include "sup_metrics_text.h"
#include "sup_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void sup_metrics_death(struct sup *s, int role, int wstatus, bool killed)
{
	enum sup_end how = killed                                                ? SUP_END_KILLED
	                   : WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGSYS ? SUP_END_SECCOMP
	                   : WIFSIGNALED(wstatus)                                ? SUP_END_SIGNAL
	                                                                         : SUP_END_EXIT;
	s->metrics.restarts[role][how]++;
}

static void reject(int fd, const char *why, unsigned line)
{
	char at[16];
	snprintf(at, sizeof(at), "%u", line);
	log_kv(LOG_LVL_WARN, "metrics_rejected", "role", "rpcd", "reason", why, "line",
	       line ? at : NULL, NULL);
	close(fd);
}

void sup_metrics_from_rpcd(struct sup *s, int fd)
{
	const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
	int seals = fcntl(fd, F_GET_SEALS), p[2];
	struct stat st;

	if (seals < 0 || (seals & want) != want)
		return reject(fd, "not a memfd sealed against write, grow and shrink", 0);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > SUP_METRICS_RPCD_MAX)
		return reject(fd, "empty, or larger than 1 MiB", 0);
	if (!s->cfg->metrics_file[0]) {
		close(fd); /* nothing to write it to */
		return;
	}
	if (s->metrics.check.pid > 0) {
		if (s->metrics.queued)
			close(s->metrics.queued - 1); /* one at a time; the newest waits */
		s->metrics.queued = fd + 1;
		return;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return reject(fd, "no pipe for the check", 0);
	char *const argv[] = {"sepcsi-metrics-check", NULL};
	const struct sup_spawn sp = {.role = "metrics-check",
	                             .path = s->metrics.check_path,
	                             .argv = argv,
	                             .peer_fd = fd,
	                             .ctl_fd = p[1],
	                             .drop_privilege = true,
	                             .quiet = true,
	                             .uid = s->cfg->metrics_uid,
	                             .gid = s->cfg->metrics_gid};
	pid_t pid = sup_spawn(&sp);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return reject(fd, "cannot start sepcsi-metrics-check", 0);
	}
	s->metrics.check = (struct sup_metrics_check){
	    .pid = pid, .report = fd, .why = p[0], .deadline = mono_ms() + SUP_METRICS_CHECK_MS};
}

void sup_metrics_check_timer(struct sup *s)
{
	struct sup_metrics_check *c = &s->metrics.check;
	if (c->pid > 0 && !c->killed && mono_ms() >= c->deadline) {
		/* It and its group (setsid, if it got that far): not reaped, the ids are its. */
		kill(c->pid, SIGKILL);
		kill(-c->pid, SIGKILL);
		c->killed = true;
	}
}

/* The verdict of check c, which ended with wstatus. */
static void check_done(struct sup *s, struct sup_metrics_check c, int wstatus)
{
	char why[sizeof(uint32_t) + SUP_METRICS_WHY_MAX + 1], how[64];
	uint32_t line = 0;
	ssize_t got = read(c.why, why, sizeof(why) - 1);
	close(c.why);
	if (c.stale) {
		close(c.report); /* rpcd is gone: its figures went with it */
		return;
	}
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
		return sup_metrics_accept(s, c.report);
	/* Its reason: the line (u32), then words, logged as a value and never parsed. */
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1 && got > (ssize_t)sizeof(line)) {
		memcpy(&line, why, sizeof(line));
		why[got] = '\0';
		for (char *q = why + sizeof(line); *q; q++)
			if (*q < 0x20 || *q > 0x7e)
				*q = '?';
		return reject(c.report, why + sizeof(line), line);
	}
	if (c.killed)
		snprintf(how, sizeof(how), "the check did not end within %d ms",
		         SUP_METRICS_CHECK_MS);
	else if (WIFSIGNALED(wstatus))
		snprintf(how, sizeof(how), "the check was killed by signal %d", WTERMSIG(wstatus));
	else
		snprintf(how, sizeof(how), "the check ended with status %d", WEXITSTATUS(wstatus));
	reject(c.report, how, 0);
}

int sup_metrics_check_ended(struct sup *s, pid_t pid, int wstatus)
{
	struct sup_metrics_check c = s->metrics.check;
	int next = s->metrics.queued - 1;
	if (c.pid <= 0 || pid != c.pid)
		return 0;
	s->metrics.check = (struct sup_metrics_check){0};
	s->metrics.queued = 0;
	check_done(s, c, wstatus);
	if (next >= 0)
		sup_metrics_from_rpcd(s, next); /* the newest that came meanwhile */
	return 1;
}

/*
 * Printable ASCII lines, each ended by a newline and about sepcsi_ names
 * alone, none holding the supervisor's names anywhere.
 */
static const char *own_look(const char *text, size_t len)
{
	static const char *const own[] = SUP_METRICS_OWN_PREFIXES;
	for (size_t i = 0; i < len; i++) {
		const char *l = text + i;
		if ((i == 0 || l[-1] == '\n') && strncmp(l, "sepcsi_", 7) != 0 &&
		    strncmp(l, "# HELP sepcsi_", 14) != 0 && strncmp(l, "# TYPE sepcsi_", 14) != 0)
			return "a line about another name than sepcsi_*";
		if (*l != '\n' && (*l < 0x20 || *l > 0x7e))
			return "a byte that is not printable ASCII";
	}
	if (text[len - 1] != '\n')
		return "no newline at its end";
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strstr(text, own[i]))
			return "a name the supervisor writes itself";
	return NULL;
}

void sup_metrics_accept(struct sup *s, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > SUP_METRICS_RPCD_MAX)
		return reject(fd, "empty, or larger than 1 MiB", 0);
	size_t len = (size_t)st.st_size;
	char *text = malloc(len + 1);
	if (!text)
		abort();
	ssize_t got = pread(fd, text, len, 0);
	close(fd);
	text[got > 0 ? (size_t)got : 0] = '\0';
	const char *why = got != (ssize_t)len ? "short read" : own_look(text, len);
	if (why) {
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
	s->metrics.check.stale = true;
	if (s->metrics.queued)
		close(s->metrics.queued - 1);
	s->metrics.queued = 0;
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
