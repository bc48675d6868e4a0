/*
 * What the supervisor prepares, as root, before it spawns anything: the
 * standard descriptors, the paths of its two children, the policy file check
 * and the three directories (state, data, endpoint).
 */
#ifndef SEPCSI_SUP_PREP_H
#define SEPCSI_SUP_PREP_H

#include "sup_config.h"

#include <limits.h>
#include <stddef.h>

/* Make sure fds 0, 1 and 2 are open (on /dev/null if they were closed). */
void sup_prep_stdio(void);

/*
 * Find sepcsi-rpcd and sepcsi-mounthelper: beside our own executable, else in
 * <its directory>/../libexec/sepcsi (an installed tree), both in the same
 * one. The directory and each program must be owned by root and writable
 * only by root; the programs regular executable files.
 */
int sup_prep_binaries(char rpcd[PATH_MAX], char helper[PATH_MAX], char *err, size_t errlen);

/*
 * Find the program name in the children's directory, with the same checks:
 * sepcsi-privileges, which prints --print-privileges for the supervisor.
 */
int sup_prep_program(const char *name, char out[PATH_MAX], char *err, size_t errlen);

/* The policy file, if any, must be a regular file owned by root, writable only by root. */
int sup_prep_policy(const struct sup_config *cfg, char *err, size_t errlen);

/*
 * Create (if missing) and fix owner and mode of: the state directory (0700,
 * rpcd uid:gid), the data directory (0700, root), the endpoint's directory
 * (0750, rpcd uid:gid; an existing one must hold nothing but our socket);
 * and the metrics file's directory, if missing (0755, root).
 */
int sup_prep_dirs(const struct sup_config *cfg, char *err, size_t errlen);

#endif
