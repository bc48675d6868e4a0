/*
 * sepcsi-privileges: what `sepcsi-supervisor --print-privileges` prints. The
 * supervisor, which holds capabilities, links no printer and no other
 * process's tables: on that flag it execs this program, found beside its
 * children, with its own arguments, before it does anything else. It parses
 * them as the supervisor does (the same sup_config.c), prints each process's
 * uid/gid, capability sets, seccomp table and file-system view for those
 * options, and exits.
 *
 * Holds whatever the caller held (root, when the supervisor execs it), but
 * needs none of it: it reads the policy file the options name and its own
 * capability bounding set, and writes to stdout.
 */
#include <stdio.h>

#include "sup_config.h"
#include "sup_privtab.h"

int main(int argc, char **argv)
{
	static struct sup_config cfg;
	char err[1024];
	if (sup_config_parse(&cfg, argc, argv, err, sizeof(err)) != SUP_PARSE_OK ||
	    !cfg.print_privileges) {
		fprintf(stderr, "sepcsi-privileges: run by sepcsi-supervisor --print-privileges\n");
		return 2;
	}
	if (sup_print_privileges(&cfg, cfg.log_format == LOG_FMT_JSON, stdout, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "sepcsi-supervisor: %s\nTry 'sepcsi-supervisor --help'.\n", err);
		return 2;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
