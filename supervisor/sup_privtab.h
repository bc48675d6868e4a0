/*
 * The privilege tables of the three sepcsi processes, by name, as the Markdown
 * the docs carry between "<!-- generated: NAME -->" and "<!-- end generated -->"
 * (tools/doctables.sh compares the two).
 */
#ifndef SEPCSI_SUP_PRIVTAB_H
#define SEPCSI_SUP_PRIVTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The i-th table's name, NULL past the end. */
const char *sup_privtab_name(size_t i);

/* Print the table called name; 0, or -1 if there is no such table. */
int sup_privtab_print(const char *name, FILE *out);

struct sup_config;

/*
 * sepcsi-supervisor --print-privileges: for each process (supervisor, rpcd,
 * helper, the helper's tool runner) its uid/gid, capabilities, no_new_privs,
 * seccomp table and file-system view, from the very tables the code installs
 * and the configuration given (rpcd's user, the policy's roots, the data
 * dir). Markdown, or one JSON object. 0, or -1 with err (a broken policy).
 */
int sup_print_privileges(const struct sup_config *cfg, bool json, FILE *out, char *err,
                         size_t errlen);

#endif
