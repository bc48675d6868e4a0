/*
 * The seccomp tables as the docs and --print-privileges show them. Pure code,
 * linked only by what prints a table (the supervisor's --print-privileges,
 * the doc tools); never by a confined process, which installs its own table
 * (seccomp.c) and prints nothing.
 */
#include "pol_md.h"
#include "sc_rules.h"

#include <stdio.h>
#include <string.h>

size_t pol_seccomp_syscall_count(const struct pol_sc_table *table)
{
	size_t n = table->n, count = 0;
	const struct sc_rule *t = table->rules;
	for (size_t i = 0; i < n; i++) {
		size_t j;
		for (j = 0; j < i; j++)
			if (strcmp(t[j].name, t[i].name) == 0)
				break;
		if (j == i)
			count++;
	}
	return count;
}

void pol_seccomp_print(const struct pol_sc_table *table, FILE *out)
{
	size_t n = table->n;
	const struct sc_rule *t = table->rules;
	pol_md_head(out, 3, (const char *[]){"syscall", "allowed when", "why"});
	for (size_t i = 0; i < n; i++) {
		char when[160];
		const char *filter = t[i].filter ? t[i].filter : "always";
		if (t[i].act == SC_ENOSYS)
			filter = "fails with ENOSYS";
		if (t[i].act == SC_EACCES)
			filter = "fails with EACCES";
		snprintf(when, sizeof(when), "%s%s",
		         t[i].act == SC_EAFNOSUPPORT_NE ? "fails with EAFNOSUPPORT when " : "",
		         filter);
		pol_md_row(out, 3, (const char *[]){t[i].name, when, t[i].why});
	}
}
