/*
 * Markdown table rows (pol_md.h). Pure code: used by whatever prints a policy
 * table, never by a confined process at run time.
 */
#include "pol_md.h"

void pol_md_row(FILE *out, size_t n, const char *const *cells)
{
	for (size_t i = 0; i < n; i++) {
		fputs("| ", out);
		for (const char *c = cells[i] ? cells[i] : ""; *c; c++) {
			if (*c == '|')
				fputc('\\', out);
			fputc(*c, out);
		}
		fputc(' ', out);
	}
	fputs("|\n", out);
}

void pol_md_head(FILE *out, size_t n, const char *const *cells)
{
	pol_md_row(out, n, cells);
	for (size_t i = 0; i < n; i++)
		fputs("|---", out);
	fputs("|\n", out);
}
