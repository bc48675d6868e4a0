/*
 * The name of a directory volume beneath its base: pathPattern with its
 * variables filled from the PVC/PV metadata. Runs in rpcd, unprivileged;
 * pure string work, nothing fatal. The helper checks the name again
 * (pol_dir_name_ok) and builds the path itself; what this file adds is that
 * a value from the CO (a namespace, a claim's name) can only ever be one
 * harmless run of characters inside a component the pattern placed.
 */
#include "ctl_dirname.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "policy_all.h"

/* Each variable, with its alias, and where its value comes from. */
static const struct {
	const char *name, *alias, *key;
	size_t off;
} vars[] = {
    {".PVC.namespace", "pvc.metadata.namespace", CTL_META_PVC_NAMESPACE,
     offsetof(struct ctl_dir_meta, pvc_namespace)},
    {".PVC.name", "pvc.metadata.name", CTL_META_PVC_NAME, offsetof(struct ctl_dir_meta, pvc_name)},
    {".PV.name", "pv.metadata.name", CTL_META_PV_NAME, offsetof(struct ctl_dir_meta, pv_name)},
};

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

static const char *meta_value(const struct ctl_dir_meta *m, size_t i)
{
	const char *v = m ? *(const char *const *)((const char *)m + vars[i].off) : NULL;
	return v && *v ? v : NULL;
}

/* Append value, sanitised, at out[*len]; false if it does not fit. */
static bool put_value(char *out, size_t *len, const char *value)
{
	for (const char *p = value; *p; p++) {
		if (*len >= MH_DIRNAME_MAX)
			return false;
		char c = *p;
		if (!name_char(c))
			c = '-';
		else if (p == value && c == '.')
			c = '_';
		out[(*len)++] = c;
	}
	out[*len] = '\0';
	return true;
}

/* Does every variable of the pattern have a value? */
static bool meta_complete(const struct ctl_dir_meta *m)
{
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (!meta_value(m, i))
			return false;
	return true;
}

static int fail(char *out, char *why, size_t whysz, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *out, char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	out[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* The variable named by the n bytes at p, or the number of variables if none is. */
static size_t var_index(const char *p, size_t n)
{
	size_t i = 0;
	for (; i < sizeof(vars) / sizeof(vars[0]); i++) {
		if ((strlen(vars[i].name) == n && strncmp(p, vars[i].name, n) == 0) ||
		    (strlen(vars[i].alias) == n && strncmp(p, vars[i].alias, n) == 0))
			break;
	}
	return i;
}

int ctl_dir_name(const char *pattern, const struct ctl_dir_meta *meta, const char *request_name,
                 char out[MH_DIRNAME_MAX + 1], char *why, size_t whysz)
{
	const char *p = pattern ? pattern : CTL_DIR_DEFAULT_PATTERN, *from = "pathPattern";
	size_t len = 0;

	out[0] = '\0';
	if (!pattern && !meta_complete(meta)) {
		from = "the request's name";
		/* csi-sanity and plain clients: no PVC to name it after. */
		if (!put_value(out, &len, request_name ? request_name : ""))
			goto too_long;
		p = "";
	}
	while (*p) {
		if (p[0] != '$' || p[1] != '{') {
			if (!name_char(*p) && *p != '/')
				return fail(
				    out, why, whysz,
				    "pathPattern '%.80s' may hold only letters, digits, '.', "
				    "'_', '-', '/' and ${...} variables",
				    pattern);
			if (len >= MH_DIRNAME_MAX)
				goto too_long;
			out[len++] = *p++;
			out[len] = '\0';
			continue;
		}
		const char *end = strchr(p + 2, '}');
		if (!end)
			return fail(out, why, whysz, "pathPattern: '${' without '}' in '%.80s'",
			            pattern);
		size_t n = (size_t)(end - p - 2), i = var_index(p + 2, n);
		if (i == sizeof(vars) / sizeof(vars[0]))
			return fail(out, why, whysz,
			            "pathPattern: unknown variable '${%.*s}' (known: "
			            "${.PVC.namespace}, ${.PVC.name}, ${.PV.name})",
			            n > 60 ? 60 : (int)n, p + 2);
		const char *v = meta_value(meta, i);
		if (!v)
			return fail(out, why, whysz,
			            "pathPattern needs parameter '%s', which external-provisioner "
			            "adds only when run with --extra-create-metadata",
			            vars[i].key);
		if (!put_value(out, &len, v))
			goto too_long;
		p = end + 1;
	}
	if (!pol_dir_name_ok(out)) {
		char name[MH_DIRNAME_MAX + 1];
		snprintf(name, sizeof(name), "%s", out);
		return fail(out, why, whysz,
		            "directory name '%.120s' is not valid beneath a base directory: 1 to 4 "
		            "components separated by single '/', none empty or starting with "
		            "'.' or 'archived-'",
		            name);
	}
	return 0;
too_long:
	return fail(out, why, whysz, "the directory name made from %s is longer than %d bytes",
	            from, MH_DIRNAME_MAX);
}
