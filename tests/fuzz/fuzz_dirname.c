/*
 * A directory volume's name from a StorageClass's pathPattern and the PVC/PV
 * metadata (ctl_dir_name in controller/ctl_dirname.c): both come from the CO,
 * and the result becomes a path beneath a base directory in the helper.
 * Input: byte 0's bits say which of the pattern and the three metadata
 * values are given; the rest is split at NUL bytes into the pattern, the
 * namespace, the claim's name, the PV's name and the request's name. Checks:
 *  - a name built passes pol_dir_name_ok (the helper's own check) and holds
 *    exactly as many '/' as the pattern's literal text (the default pattern
 *    and the request's name: none), so no value ever adds a component;
 *  - a refusal leaves out empty and gives a reason;
 *  - the same input gives the same answer (no hidden state).
 */
#include <string.h>

#include "ctl_dirname.h"
#include "fuzz.h"
#include "policy_all.h"

#define FIELDS 5

static size_t slashes_outside_vars(const char *p)
{
	size_t n = 0;
	for (; *p; p++) {
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p + 2, '}');
			if (!end)
				break;
			p = end;
		} else {
			n += *p == '/';
		}
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[4097], *f[FIELDS] = {"", "", "", "", ""};
	char out[MH_DIRNAME_MAX + 1], again[MH_DIRNAME_MAX + 1], why[256], why2[256];
	if (size < 1 || size > sizeof(buf))
		return 0;
	uint8_t bits = data[0];
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	char *p = buf;
	for (int i = 0; i < FIELDS && p < buf + size - 1; i++) {
		f[i] = p;
		p += strlen(p) + 1;
	}
	const char *pattern = bits & 1 ? f[0] : NULL;
	struct ctl_dir_meta m = {.pvc_namespace = bits & 2 ? f[1] : NULL,
	                         .pvc_name = bits & 4 ? f[2] : NULL,
	                         .pv_name = bits & 8 ? f[3] : NULL};
	why[0] = '\0';
	int rc = ctl_dir_name(pattern, &m, f[4], out, why, sizeof(why));
	int rc2 = ctl_dir_name(pattern, &m, f[4], again, why2, sizeof(why2));
	FUZZ_CHECK(rc == rc2);
	if (rc != 0) {
		FUZZ_CHECK(rc == -1 && out[0] == '\0' && why[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(strcmp(out, again) == 0);
	FUZZ_CHECK(pol_dir_name_ok(out));
	size_t n = 0;
	for (const char *c = out; *c; c++)
		n += *c == '/';
	FUZZ_CHECK(n == (pattern ? slashes_outside_vars(pattern) : 0));
	return 0;
}
