/*
 * The privilege tables of the three sepcsi processes, by name, as the Markdown
 * the docs carry between "<!-- generated: NAME -->" and "<!-- end generated -->"
 * (tools/doctables.sh compares the two).
 */
#ifndef SEPCSI_SUP_PRIVTAB_H
#define SEPCSI_SUP_PRIVTAB_H

#include <stddef.h>
#include <stdio.h>

/* The i-th table's name, NULL past the end. */
const char *sup_privtab_name(size_t i);

/* Print the table called name; 0, or -1 if there is no such table. */
int sup_privtab_print(const char *name, FILE *out);

#endif
