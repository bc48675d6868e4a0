/*
 * sepcsi-bench's figures: per-RPC latencies (percentiles by nearest rank) and
 * the memory of the driver's processes. Runs as the operator; reading another
 * process's smaps_rollup needs the right to ptrace-read it (root, or the same
 * user). Nothing is fatal but allocation failure.
 *
 * Memory: VmHWM (peak resident set, kept by the kernel since the process
 * started) and VmRSS from /proc/PID/status at the end; PSS from
 * /proc/PID/smaps_rollup, sampled before the run, every 100 ms during it and
 * after it. The total PSS is the sum over the pids of one sample, and over
 * every descendant they have at that moment (a pool of workers, a tool
 * running); its peak is the largest such sum. PSS divides shared pages among
 * the processes sharing them, so the sum over a driver's processes is its
 * footprint, less the share of the pages this process maps too: while it
 * runs, the bench takes part of the shared libraries it has in common with
 * the driver (libgrpc and its company, for sepcsi's rpcd). A figure to
 * compare drivers by is sampled after the bench has exited
 * (tests/bench/side_by_side.py does).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define SAMPLE_MS 100

static pthread_t sampler;
static atomic_bool sampler_stop;

void bench_lat_add(struct bench_lat *l, int64_t ns)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->ns = realloc(l->ns, l->cap * sizeof(int64_t));
		if (!l->ns)
			abort();
	}
	l->ns[l->n++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void bench_lat_merge(const struct bench_run *run, enum bench_rpc r, struct bench_lat *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < run->cfg->clients; i++) {
		const struct bench_lat *l = &run->threads[i].lat[r];
		for (size_t j = 0; j < l->n; j++)
			bench_lat_add(out, l->ns[j]);
	}
	if (out->n)
		qsort(out->ns, out->n, sizeof(int64_t), cmp_i64);
}

double bench_lat_pct_ms(const struct bench_lat *l, double p)
{
	if (l->n == 0)
		return 0;
	size_t rank = (size_t)((p / 100.0) * (double)l->n + 0.999999999);
	if (rank < 1)
		rank = 1;
	if (rank > l->n)
		rank = l->n;
	return (double)l->ns[rank - 1] / 1e6;
}

/* The value in kB of the line "<key>: <n> kB" of a /proc file, or -1. */
static int64_t proc_kib(int pid, const char *file, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	int64_t v = -1;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtoll(line + klen + 1, NULL, 10);
			break;
		}
	}
	(void)fclose(f);
	return v;
}

static bool listed(const struct bench_mem *m, int pid)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->pid[i].pid == pid)
			return true;
	return false;
}

#define MAX_DESCENDANTS 256

/* Append to out the children of pid (every thread's) that are not listed; returns the new n. */
static size_t children_of(const struct bench_mem *m, int pid, int *out, size_t n)
{
	char path[96], word[16];
	DIR *tasks;
	struct dirent *t;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(tasks = opendir(path)))
		return n;
	while ((t = readdir(tasks))) {
		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", pid, t->d_name);
		FILE *f = fopen(path, "re");
		while (f && n < MAX_DESCENDANTS && fscanf(f, "%15s", word) == 1) {
			long child = strtol(word, NULL, 10);
			if (child > 0 && !listed(m, (int)child))
				out[n++] = (int)child;
		}
		if (f)
			(void)fclose(f);
	}
	closedir(tasks);
	return n;
}

/* The PSS of the descendants of pid that are not listed themselves. */
static int64_t descendants_pss(const struct bench_mem *m, int pid)
{
	int found[MAX_DESCENDANTS];
	size_t n = children_of(m, pid, found, 0);
	int64_t sum = 0;

	for (size_t i = 0; i < n; i++) { /* found grows as it is walked: breadth first */
		int64_t pss = proc_kib(found[i], "smaps_rollup", "Pss");
		sum += pss > 0 ? pss : 0;
		n = children_of(m, found[i], found, n);
	}
	return sum;
}

/* One PSS sample of every pid and their descendants; returns the total. */
static int64_t sample(struct bench_mem *m, int which)
{
	int64_t total = 0;

	for (size_t i = 0; i < m->n; i++) {
		struct bench_mem_pid *p = &m->pid[i];
		int64_t pss = proc_kib(p->pid, "smaps_rollup", "Pss");
		if (pss < 0) {
			p->gone = true;
			continue;
		}
		total += pss + descendants_pss(m, p->pid);
		if (which == 0)
			p->pss_start_kib = pss;
		if (pss > p->pss_peak_kib)
			p->pss_peak_kib = pss;
		if (which == 2)
			p->pss_final_kib = pss;
	}
	if (which == 0)
		m->total_start_kib = total;
	if (total > m->total_peak_kib)
		m->total_peak_kib = total;
	if (which == 2)
		m->total_final_kib = total;
	return total;
}

static void *sampler_thread(void *arg)
{
	struct bench_mem *m = arg;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = SAMPLE_MS * 1000000L};

	while (!atomic_load(&sampler_stop)) {
		nanosleep(&ts, NULL);
		sample(m, 1);
	}
	return NULL;
}

int bench_mem_start(struct bench_run *run)
{
	struct bench_mem *m = &run->mem;

	m->n = run->cfg->npids;
	for (size_t i = 0; i < m->n; i++) {
		char path[64];
		struct bench_mem_pid *p = &m->pid[i];
		p->pid = run->cfg->pids[i];
		snprintf(path, sizeof(path), "/proc/%d/comm", p->pid);
		FILE *f = fopen(path, "re");
		if (!f || !fgets(p->name, sizeof(p->name), f)) {
			fprintf(stderr, "sepcsi-bench: --pids: no process %d\n", p->pid);
			if (f)
				(void)fclose(f);
			return -1;
		}
		(void)fclose(f);
		p->name[strcspn(p->name, "\n")] = '\0';
		if (proc_kib(p->pid, "smaps_rollup", "Pss") < 0) {
			fprintf(stderr,
			        "sepcsi-bench: --pids: cannot read /proc/%d/smaps_rollup "
			        "(run as root or as the driver's user)\n",
			        p->pid);
			return -1;
		}
	}
	if (m->n == 0)
		return 0;
	sample(m, 0);
	atomic_store(&sampler_stop, false);
	if (pthread_create(&sampler, NULL, sampler_thread, m) != 0)
		abort();
	return 0;
}

void bench_mem_stop(struct bench_run *run)
{
	struct bench_mem *m = &run->mem;

	if (m->n == 0)
		return;
	atomic_store(&sampler_stop, true);
	pthread_join(sampler, NULL);
	sample(m, 2);
	for (size_t i = 0; i < m->n; i++) {
		m->pid[i].hwm_kib = proc_kib(m->pid[i].pid, "status", "VmHWM");
		m->pid[i].rss_kib = proc_kib(m->pid[i].pid, "status", "VmRSS");
	}
}
