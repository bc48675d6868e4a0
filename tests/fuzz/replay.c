/*
 * A stand-in for libFuzzer's main() in normal (gcc) builds: runs the harness
 * once on every input named on the command line, where an argument is a file
 * or a directory whose regular files are inputs (in name order). This is how
 * CTest replays each checked-in corpus, with the sanitizers of the build.
 * Each input is handed over in a buffer of exactly its size, so a read past
 * the end is caught under ASan. No inputs at all is a failure: a test that
 * replays nothing proves nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Defined by the harnesses that need set-up. */
/* NOLINTNEXTLINE(readability-redundant-declaration): redeclared only to make it weak */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	size_t size = (size_t)st.st_size;
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf || fread(buf, 1, size, f) != size) {
		fprintf(stderr, "replay: %s: short read\n", path);
		exit(1);
	}
	(void)fclose(f);
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	return 1;
}

static int only_files(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

static int run_dir(const char *dir)
{
	struct dirent **list;
	int n = scandir(dir, &list, only_files, alphasort), done = 0;
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			done += run_file(path);
		free(list[i]);
	}
	free(list);
	return done;
}

int main(int argc, char **argv)
{
	int done = 0;
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		done += S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
	}
	printf("%s: %d inputs replayed\n", argv[0], done);
	return done > 0 ? 0 : 1;
}
