/*
 * rpcd's metrics (rpcd_metrics.c): counted on the call path, reported to the
 * supervisor every interval as Prometheus text in a sealed memfd.
 */
#ifndef SEPCSI_RPCD_METRICS_H
#define SEPCSI_RPCD_METRICS_H

#include <stddef.h>

#include "rpcd.h"

/* Count one answered call: m NULL for a path that names no method; code a gRPC code. */
void rpcd_metrics_call(const struct rpcd_method *m, int code, double seconds);

/* The report as Prometheus text (malloc'd, *len bytes, NUL-terminated). */
char *rpcd_metrics_render(struct rpcd *r, size_t *len);

/* Report now and every interval_s seconds from a thread of its own, until stop. */
void rpcd_metrics_start(struct rpcd *r, unsigned interval_s);
void rpcd_metrics_stop(void);

#endif
