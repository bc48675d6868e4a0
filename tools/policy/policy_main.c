/*
 * sepcsi-policy: checks a policy file, or compiles it for the capable core,
 * which links no parser of the file (policy/compiled.c).
 *
 *   sepcsi-policy check FILE       exit 0 if FILE loads, else 2 and "FILE:LINE: reason"
 *   sepcsi-policy compile [FILE]   the compiled policy on stdout (no FILE: the defaults)
 *
 * Needs no privilege: it reads the file and writes to stdout.
 */
#include <stdio.h>
#include <string.h>

#include "policy_all.h"

int main(int argc, char **argv)
{
	char err[512];
	struct pol *p;
	bool check = argc == 3 && strcmp(argv[1], "check") == 0;
	bool compile = (argc == 2 || argc == 3) && strcmp(argv[1], "compile") == 0;
	if (!check && !compile) {
		fprintf(stderr, "usage: sepcsi-policy check FILE | compile [FILE]\n");
		return 2;
	}
	if (pol_load(argc == 3 ? argv[2] : NULL, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "sepcsi-policy: %s\n", err);
		return 2;
	}
	int rc = compile && pol_compile(p, stdout) < 0 ? 1 : 0;
	pol_free(p);
	return rc;
}
