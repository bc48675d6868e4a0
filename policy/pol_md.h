/*
 * Markdown table rows, for the tables in policy/ and supervisor/ that the docs
 * carry (tools/doctables.sh) so every generated table is written alike.
 */
#ifndef SEPCSI_POL_MD_H
#define SEPCSI_POL_MD_H

#include <stddef.h>
#include <stdio.h>

/*
 * Write "| c0 | c1 | ... |" and a newline. A '|' inside a cell is written "\|"
 * so that it stays in its column; a NULL cell is empty.
 */
void pol_md_row(FILE *out, size_t n, const char *const *cells);

/* Write the header row and the "|---|---|" line under it. */
void pol_md_head(FILE *out, size_t n, const char *const *cells);

#endif
