/*
 * The metrics file (--metrics-file): Prometheus' text exposition format,
 * replaced atomically, for node-exporter's textfile collector and for
 * `sepcsictl metrics`. The supervisor writes it: its own figures (children up,
 * given up on, restarts and how they ended) followed by what rpcd last
 * reported (CSI calls, latencies, the store's counts, the helper's errors),
 * which rpcd sends as a sealed memfd on its control channel (SUP_CTL_METRICS).
 * rpcd never gets a network socket or a path outside its own directories.
 * Used by sup_child.c only.
 */
#ifndef SEPCSI_SUP_METRICS_H
#define SEPCSI_SUP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a child ended, for sepcsi_child_restarts_total{reason}. */
enum sup_end { SUP_END_EXIT = 0, SUP_END_SIGNAL, SUP_END_SECCOMP, SUP_END_KILLED, SUP_END_N };

struct sup_metrics {
	uint64_t restarts[2][SUP_END_N]; /* [enum sup_role][enum sup_end] */
	char *rpcd_text;                 /* rpcd's last report, checked; NULL if none */
	int64_t rpcd_at_ms;              /* when it came */
	int64_t read_ms; /* when a report was last read, kept or not (sup_child.c) */
	int64_t start_unix_s;
};

struct sup;

/* A child died without being asked to: count it by how it ended. */
void sup_metrics_death(struct sup *s, int role, int wstatus, bool killed);

/*
 * rpcd sent its report: takes fd. It is used only if it is a memfd sealed
 * against writing, growing and shrinking, at most SUP_METRICS_RPCD_MAX bytes,
 * and well-formed Prometheus text, strictly (sup_metrics.c says what passes):
 * sepcsi_ families and samples only, never one of the supervisor's own names.
 * Otherwise it is logged and dropped, and the last accepted report stays.
 */
#define SUP_METRICS_RPCD_MAX 0x100000 /* 1 MiB */
void sup_metrics_from_rpcd(struct sup *s, int fd);

/* rpcd is gone: its figures go with it. */
void sup_metrics_rpcd_gone(struct sup *s);

/* Write the file now (no-op without --metrics-file). Failures are logged. */
void sup_metrics_write(struct sup *s);

/*
 * The check sup_metrics_from_rpcd() applies, on text of len bytes (exported for
 * the unit tests). On refusal *why is a static reason and *line the line it is
 * about, from 1 (0: the report as a whole).
 */
bool sup_metrics_text_ok(const char *text, size_t len, const char **why, unsigned *line);

#endif
