/*
 * Whether rpcd's metrics report is Prometheus text in the strict form the
 * metrics file takes (sup_metrics_text.c says which). Pure code: linked by
 * sepcsi-metrics-check and the unit tests, never by the supervisor.
 */
#ifndef SEPCSI_SUP_METRICS_TEXT_H
#define SEPCSI_SUP_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#define SUP_METRICS_RPCD_MAX 0x100000 /* the largest report read: 1 MiB */
#define SUP_METRICS_CHECK_MS 2000     /* a check still running then is killed */
#define SUP_METRICS_WHY_MAX  200      /* a refusal's reason, in bytes, after its line */

/*
 * The beginnings of the names only the supervisor writes: a report naming one
 * is refused here, and one holding any of them anywhere, by the supervisor.
 */
#define SUP_METRICS_OWN_PREFIXES                                                                   \
	{                                                                                          \
		"sepcsi_child_", "sepcsi_supervisor_", "sepcsi_rpcd_report_"                       \
	}

/*
 * The check, on text of len bytes (text[len] is '\0'). On refusal *why is a
 * static reason and *line the line it is about, from 1 (0: the report as a
 * whole).
 */
bool sup_metrics_text_ok(const char *text, size_t len, const char **why, unsigned *line);

#endif
