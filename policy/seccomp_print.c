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

/* Row i of the table, its base's rows first; NULL past the last. */
static const struct sc_rule *row(const struct pol_sc_table *table, size_t i)
{
	size_t nb = table->base ? table->base->n : 0;
	if (i < nb)
		return &table->base->rules[i];
	return i - nb < table->n ? &table->rules[i - nb] : NULL;
}

size_t pol_seccomp_syscall_count(const struct pol_sc_table *table)
{
	size_t count = 0;
	for (size_t i = 0; row(table, i); i++) {
		size_t j;
		for (j = 0; j < i; j++)
			if (strcmp(row(table, j)->name, row(table, i)->name) == 0)
				break;
		if (j == i)
			count++;
	}
	return count;
}

static void print_rows(const struct sc_rule *t, size_t n, FILE *out)
{
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

void pol_seccomp_print(const struct pol_sc_table *table, FILE *out)
{
	pol_md_head(out, 3, (const char *[]){"syscall", "allowed when", "why"});
	if (table->base)
		print_rows(table->base->rules, table->base->n, out);
	print_rows(table->rules, table->n, out);
}
