/*
 * sepcsi-bench's output: the report as a table or one JSON object, and the
 * progress bar, which is drawn only when stderr is a terminal so that logs
 * and pipes stay clean. Runs as the operator; nothing fatal.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define BAR_WIDTH 30

static double seconds(const struct bench_run *run)
{
	return (double)(run->end_ns - run->start_ns) / 1e9;
}

static bool storm(const struct bench_run *run)
{
	return run->cfg->probe_storm_s > 0;
}

/* Errors of rpc r with code column c, summed over the threads. */
static uint64_t errors_of(const struct bench_run *run, int r, int c)
{
	uint64_t n = 0;

	for (int i = 0; i < run->cfg->clients; i++)
		n += run->threads[i].errors[r][c];
	return n;
}

static const char *code_label(int c)
{
	return c < CSIC_NCODES ? csic_code_name(c) : "OTHER";
}

static const char *first_error(const struct bench_run *run, int r)
{
	for (int i = 0; i < run->cfg->clients; i++)
		if (run->threads[i].first_error[r][0])
			return run->threads[i].first_error[r];
	return NULL;
}

static void size_str(int64_t kib, char *buf, size_t len)
{
	if (kib < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f MiB", (double)kib / 1024.0);
}

void bench_report_text(const struct bench_run *run)
{
	const struct bench_cfg *cfg = run->cfg;

	if (storm(run)) {
		printf("sepcsi-bench: Probe storm, %d clients, %.1f s, against %s\n\n",
		       cfg->clients, seconds(run), cfg->endpoint);
	} else {
		char cap[32];
		units_format_size(cfg->capacity, cap, sizeof(cap));
		printf("sepcsi-bench: %zu lifecycles, %d clients, against %s\n", cfg->lifecycles,
		       cfg->clients, cfg->endpoint);
		printf("  access %s%s%s, capacity %s; stage %s, controller publish %s%s\n\n",
		       cfg->block ? "block" : "mount", cfg->block ? "" : ", fs ",
		       cfg->block ? "" : (cfg->fs_type[0] ? cfg->fs_type : "(driver default)"),
		       cfg->capacity ? cap : "(driver default)", run->plan.stage ? "yes" : "no",
		       run->plan.controller_publish ? "yes" : "no",
		       cfg->skip_node ? "; --skip-node: controller calls only" : "");
	}
	printf("%-26s %8s %7s %9s %9s %9s %9s\n", "rpc", "calls", "errors", "p50 ms", "p95 ms",
	       "p99 ms", "max ms");
	for (int r = 0; r < BR_N; r++) {
		struct bench_lat l;
		bench_lat_merge(run, r, &l);
		if (l.n == 0)
			continue;
		uint64_t errs = 0;
		for (int c = 0; c <= CSIC_NCODES; c++)
			errs += errors_of(run, r, c);
		printf("%-26s %8zu %7" PRIu64 " %9.2f %9.2f %9.2f %9.2f\n", bench_rpc_name(r), l.n,
		       errs, bench_lat_pct_ms(&l, 50), bench_lat_pct_ms(&l, 95),
		       bench_lat_pct_ms(&l, 99), bench_lat_pct_ms(&l, 100));
		free(l.ns);
	}
	printf("\n");
	if (storm(run)) {
		size_t calls = atomic_load(&run->calls);
		printf("probe storm: %zu calls in %.2f s: %.0f calls/s\n", calls, seconds(run),
		       (double)calls / seconds(run));
	} else {
		size_t ok = atomic_load(&run->ok), failed = atomic_load(&run->failed);
		printf("lifecycles: %zu ok, %zu failed in %.2f s: %.2f lifecycles/s\n", ok, failed,
		       seconds(run), (double)ok / seconds(run));
	}

	printf("errors by code:");
	bool any = false;
	for (int c = 1; c <= CSIC_NCODES; c++) {
		uint64_t n = 0;
		for (int r = 0; r < BR_N; r++)
			n += errors_of(run, r, c);
		if (n) {
			printf("%s %s %" PRIu64, any ? "," : "", code_label(c), n);
			any = true;
		}
	}
	printf("%s\n", any ? "" : " none");
	for (int r = 0; r < BR_N; r++) {
		const char *e = first_error(run, r);
		if (e)
			printf("  first %s error: %s\n", bench_rpc_name(r), e);
	}

	const struct bench_mem *m = &run->mem;
	if (m->n == 0)
		return;
	printf("\nmemory of the driver (PSS sampled every 100 ms):\n");
	printf("  %-8s %-20s %10s %10s %10s %10s %10s\n", "pid", "name", "VmHWM", "VmRSS",
	       "PSS start", "PSS peak", "PSS end");
	int64_t hwm = 0, rss = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct bench_mem_pid *p = &m->pid[i];
		char a[24], b[24], c[24], d[24], e[24];
		size_str(p->hwm_kib, a, sizeof(a));
		size_str(p->rss_kib, b, sizeof(b));
		size_str(p->pss_start_kib, c, sizeof(c));
		size_str(p->pss_peak_kib, d, sizeof(d));
		size_str(p->gone ? -1 : p->pss_final_kib, e, sizeof(e));
		printf("  %-8d %-20s %10s %10s %10s %10s %10s%s\n", p->pid, p->name, a, b, c, d, e,
		       p->gone ? "  (exited during the run)" : "");
		hwm += p->hwm_kib > 0 ? p->hwm_kib : 0;
		rss += p->rss_kib > 0 ? p->rss_kib : 0;
	}
	char a[24], b[24], c[24], d[24], e[24];
	size_str(hwm, a, sizeof(a));
	size_str(rss, b, sizeof(b));
	size_str(m->total_start_kib, c, sizeof(c));
	size_str(m->total_peak_kib, d, sizeof(d));
	size_str(m->total_final_kib, e, sizeof(e));
	printf("  %-8s %-20s %10s %10s %10s %10s %10s\n", "total", "", a, b, c, d, e);
}

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

void bench_report_json(const struct bench_run *run)
{
	const struct bench_cfg *cfg = run->cfg;
	size_t ok = atomic_load(&run->ok), failed = atomic_load(&run->failed);
	size_t calls = atomic_load(&run->calls);

	printf("{\"endpoint\":");
	json_str(cfg->endpoint);
	printf(",\"mode\":\"%s\",\"clients\":%d,\"seconds\":%.3f",
	       storm(run) ? "probe-storm" : "lifecycle", cfg->clients, seconds(run));
	if (storm(run)) {
		printf(",\"probe_storm\":{\"calls\":%zu,\"calls_per_second\":%.1f}", calls,
		       (double)calls / seconds(run));
	} else {
		printf(",\"lifecycles\":{\"requested\":%zu,\"ok\":%zu,\"failed\":%zu,"
		       "\"per_second\":%.3f,\"stage\":%s,\"controller_publish\":%s,"
		       "\"skip_node\":%s,\"access_type\":\"%s\",\"capacity_bytes\":%" PRId64
		       ",\"fs_type\":",
		       cfg->lifecycles, ok, failed, (double)ok / seconds(run),
		       run->plan.stage ? "true" : "false",
		       run->plan.controller_publish ? "true" : "false",
		       cfg->skip_node ? "true" : "false", cfg->block ? "block" : "mount",
		       cfg->capacity);
		json_str(cfg->fs_type);
		printf("}");
	}
	printf(",\"rpcs\":{");
	bool first = true;
	for (int r = 0; r < BR_N; r++) {
		struct bench_lat l;
		bench_lat_merge(run, r, &l);
		if (l.n == 0)
			continue;
		uint64_t errs = 0;
		for (int c = 0; c <= CSIC_NCODES; c++)
			errs += errors_of(run, r, c);
		printf("%s\"%s\":{\"calls\":%zu,\"errors\":%" PRIu64 ",\"p50_ms\":%.3f,"
		       "\"p95_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors_by_code\":{",
		       first ? "" : ",", bench_rpc_name(r), l.n, errs, bench_lat_pct_ms(&l, 50),
		       bench_lat_pct_ms(&l, 95), bench_lat_pct_ms(&l, 99),
		       bench_lat_pct_ms(&l, 100));
		bool f2 = true;
		for (int c = 1; c <= CSIC_NCODES; c++) {
			uint64_t n = errors_of(run, r, c);
			if (n) {
				printf("%s\"%s\":%" PRIu64, f2 ? "" : ",", code_label(c), n);
				f2 = false;
			}
		}
		printf("}");
		const char *e = first_error(run, r);
		if (e) {
			printf(",\"first_error\":");
			json_str(e);
		}
		printf("}");
		first = false;
		free(l.ns);
	}
	printf("},\"errors_by_code\":{");
	first = true;
	for (int c = 1; c <= CSIC_NCODES; c++) {
		uint64_t n = 0;
		for (int r = 0; r < BR_N; r++)
			n += errors_of(run, r, c);
		if (n) {
			printf("%s\"%s\":%" PRIu64, first ? "" : ",", code_label(c), n);
			first = false;
		}
	}
	printf("}");
	const struct bench_mem *m = &run->mem;
	if (m->n) {
		printf(",\"memory\":{\"pids\":[");
		for (size_t i = 0; i < m->n; i++) {
			const struct bench_mem_pid *p = &m->pid[i];
			printf("%s{\"pid\":%d,\"name\":", i ? "," : "", p->pid);
			json_str(p->name);
			printf(",\"vm_hwm_kib\":%" PRId64 ",\"vm_rss_kib\":%" PRId64
			       ",\"pss_start_kib\":%" PRId64 ",\"pss_peak_kib\":%" PRId64
			       ",\"pss_final_kib\":%" PRId64 ",\"exited\":%s}",
			       p->hwm_kib, p->rss_kib, p->pss_start_kib, p->pss_peak_kib,
			       p->pss_final_kib, p->gone ? "true" : "false");
		}
		printf("],\"total\":{\"pss_start_kib\":%" PRId64 ",\"pss_peak_kib\":%" PRId64
		       ",\"pss_final_kib\":%" PRId64 "}}",
		       m->total_start_kib, m->total_peak_kib, m->total_final_kib);
	}
	printf("}\n");
}

void bench_progress(const struct bench_run *run, bool done)
{
	static int tty = -1;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	if (done) {
		fprintf(stderr, "\r\033[K");
		return;
	}
	double el = (double)(csic_now_ns() - run->start_ns) / 1e9;
	double frac;
	char tail[96];
	if (storm(run)) {
		frac = el / run->cfg->probe_storm_s;
		snprintf(tail, sizeof(tail), "%.0f/%.0f s  %zu calls  %zu errors", el,
		         run->cfg->probe_storm_s, atomic_load(&run->calls),
		         atomic_load(&run->errors));
	} else {
		size_t n = atomic_load(&run->ok) + atomic_load(&run->failed);
		frac = (double)n / (double)run->cfg->lifecycles;
		snprintf(tail, sizeof(tail), "%zu/%zu lifecycles  %.1f/s  %zu errors", n,
		         run->cfg->lifecycles, el > 0 ? (double)n / el : 0.0,
		         atomic_load(&run->errors));
	}
	if (frac > 1)
		frac = 1;
	int fill = (int)(frac * BAR_WIDTH);
	char bar[BAR_WIDTH + 1];
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
	bar[BAR_WIDTH] = '\0';
	fprintf(stderr, "\r[%s] %s\033[K", bar, tail);
	fflush(stderr);
}
