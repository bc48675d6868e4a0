/*
 * sepcsi-privtables: prints the privilege tables of the sepcsi processes (the
 * capabilities each keeps, the seccomp allowlists) from the tables compiled
 * into the driver, as the Markdown the docs carry. tools/doctables.sh checks
 * the docs against it and rewrites them with --update.
 *
 * Needs no privilege and reads no file: the tables are compiled in.
 */
#include <stdio.h>
#include <string.h>

#include "sup_privtab.h"

int main(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("usage: sepcsi-privtables [NAME...]\n"
		       "Prints the named privilege tables as Markdown, a blank line between "
		       "them;\nwithout a name, lists the names.\n");
		return 0;
	}
	if (argc == 1) {
		for (size_t i = 0; sup_privtab_name(i); i++)
			printf("%s\n", sup_privtab_name(i));
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (i > 1)
			putchar('\n');
		if (sup_privtab_print(argv[i], stdout) < 0) {
			fprintf(stderr,
			        "sepcsi-privtables: no table '%s' (run without arguments "
			        "for the list)\n",
			        argv[i]);
			return 2;
		}
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
