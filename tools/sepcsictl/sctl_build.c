/*
 * sepcsictl's request builder: command-line flags to a protobuf-c request.
 * Runs as the operator; nothing privileged.
 *
 * Fields are reached by a dotted path through the protobuf-c descriptors
 * ("volume_content_source.snapshot.snapshot_id"), creating the messages on
 * the way and setting oneof cases; everything is allocated with malloc so
 * that protobuf_c_message_free_unpacked(msg, NULL) frees the whole request.
 * A path the descriptors do not know is a bug in the RPC table and aborts.
 * Bad values are usage errors; a --secret value never appears in a message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "csi.pb-c.h"
#include "csic.h"
#include "sctl.h"

#define MAX_MODES     16
#define MAX_RPC_FLAGS 32 /* an RPC's flags and the capability flags */

#define MEMBER(m, f, type) ((type *)((char *)(m) + (f)->offset))
#define QUANT(m, f, type)  ((type *)((char *)(m) + (f)->quantifier_offset))

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		abort();
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		abort();
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (!p)
		abort();
	return p;
}

static ProtobufCMessage *msg_new(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = xcalloc(1, d->sizeof_message);

	d->message_init(m);
	return m;
}

static void bug(const char *what, const char *path)
{
	fprintf(stderr, "sepcsictl: internal error: %s '%s'\n", what, path);
	abort();
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d,
                                                   const char *name, size_t len)
{
	for (unsigned i = 0; i < d->n_fields; i++) {
		if (strlen(d->fields[i].name) == len && memcmp(d->fields[i].name, name, len) == 0)
			return &d->fields[i];
	}
	return NULL;
}

/*
 * Marks f as the set member of its oneof. -1 if another member of the same
 * oneof is already set: the two share storage and exclude each other.
 */
static int claim_oneof(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
		return 0;
	uint32_t *cas = QUANT(m, f, uint32_t);
	if (*cas != 0 && *cas != f->id)
		return -1;
	*cas = f->id;
	return 0;
}

/*
 * Resolves path in m: the message that holds the last component (created on
 * the way) and that component's descriptor. -1 on a oneof conflict.
 */
static int resolve(ProtobufCMessage *m, const char *path, ProtobufCMessage **owner,
                   const ProtobufCFieldDescriptor **fd)
{
	const char *p = path, *dot;

	while ((dot = strchr(p, '.')) != NULL) {
		const ProtobufCFieldDescriptor *f =
		    field_named(m->descriptor, p, (size_t)(dot - p));
		if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE ||
		    f->label == PROTOBUF_C_LABEL_REPEATED)
			bug("bad field path", path);
		if (claim_oneof(m, f) != 0)
			return -1;
		ProtobufCMessage **slot = MEMBER(m, f, ProtobufCMessage *);
		if (!*slot)
			*slot = msg_new(f->descriptor);
		m = *slot;
		p = dot + 1;
	}
	*fd = field_named(m->descriptor, p, strlen(p));
	if (!*fd)
		bug("bad field path", path);
	if (claim_oneof(m, *fd) != 0)
		return -1;
	*owner = m;
	return 0;
}

/* Appends one element of size elem to the repeated field f of m; returns its slot. */
static void *append(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, size_t elem)
{
	size_t *n = QUANT(m, f, size_t);
	void **arr = MEMBER(m, f, void *);
	char *grown = realloc(*arr, (*n + 1) * elem);

	if (!grown)
		abort();
	*arr = grown;
	memset(grown + *n * elem, 0, elem);
	return grown + (*n)++ * elem;
}

static void set_string(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, const char *v)
{
	char **slot = MEMBER(m, f, char *);

	if (*slot && *slot != (const char *)f->default_value && *slot != protobuf_c_empty_string)
		free(*slot);
	*slot = xstrdup(v);
}

/* The message at path (singular: created once; repeated: a new element appended). */
static ProtobufCMessage *message_at(ProtobufCMessage *req, const char *path)
{
	ProtobufCMessage *owner;
	const ProtobufCFieldDescriptor *f;

	if (resolve(req, path, &owner, &f) != 0)
		return NULL;
	if (f->type != PROTOBUF_C_TYPE_MESSAGE)
		bug("not a message field", path);
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		ProtobufCMessage **slot = append(owner, f, sizeof(ProtobufCMessage *));
		*slot = msg_new(f->descriptor);
		return *slot;
	}
	ProtobufCMessage **slot = MEMBER(owner, f, ProtobufCMessage *);
	if (!*slot)
		*slot = msg_new(f->descriptor);
	return *slot;
}

/* Adds key=value to the map field (a repeated *Entry message) at path; -1 if the key is there. */
static int map_put(ProtobufCMessage *m, const char *path, const char *key, size_t klen,
                   const char *value)
{
	ProtobufCMessage *owner;
	const ProtobufCFieldDescriptor *f;

	if (resolve(m, path, &owner, &f) != 0)
		bug("map in a oneof", path);
	const ProtobufCFieldDescriptor *kf = field_named(f->descriptor, "key", 3);
	const ProtobufCFieldDescriptor *vf = field_named(f->descriptor, "value", 5);
	if (f->label != PROTOBUF_C_LABEL_REPEATED || !kf || !vf)
		bug("not a map field", path);
	size_t n = *QUANT(owner, f, size_t);
	ProtobufCMessage **entries = *MEMBER(owner, f, ProtobufCMessage **);
	for (size_t i = 0; i < n; i++) {
		const char *k = *MEMBER(entries[i], kf, char *);
		if (strlen(k) == klen && memcmp(k, key, klen) == 0)
			return -1;
	}
	ProtobufCMessage **slot = append(owner, f, sizeof(ProtobufCMessage *));
	*slot = msg_new(f->descriptor);
	*MEMBER(*slot, kf, char *) = xstrndup(key, klen);
	*MEMBER(*slot, vf, char *) = xstrdup(value);
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "1", "yes", "on"};
	static const char *const no[] = {"false", "0", "no", "off"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static int parse_int(const char *s, int64_t *out)
{
	char *end;

	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int usage_error(const char *flag, const char *why)
{
	fprintf(stderr, "sepcsictl: --%s: %s (see --help)\n", flag, why);
	return SCTL_EXIT_USAGE;
}

static int set_integer(ProtobufCMessage *owner, const ProtobufCFieldDescriptor *f, int64_t v,
                       const struct sctl_flag *fl)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
		if (v < INT32_MIN || v > INT32_MAX)
			return usage_error(fl->name, "out of range for a 32-bit integer");
		*MEMBER(owner, f, int32_t) = (int32_t)v;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
		*MEMBER(owner, f, int64_t) = v;
		return 0;
	default:
		bug("not an integer field", fl->path);
	}
	return 0;
}

/* KEY=VALUE,KEY=VALUE into a new Topology at path. */
static int add_topology(ProtobufCMessage *req, const struct sctl_flag *fl, const char *val)
{
	ProtobufCMessage *topo = message_at(req, fl->path);
	const char *p = val;

	if (!topo)
		bug("topology in a oneof", fl->path);
	do {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (!eq || eq == p)
			return usage_error(fl->name, "expected KEY=VALUE,KEY=VALUE...");
		char *value = xstrndup(eq + 1, len - (size_t)(eq - p) - 1);
		int rc = map_put(topo, "segments", p, (size_t)(eq - p), value);
		free(value);
		if (rc != 0)
			return usage_error(fl->name, "a segment key is given twice");
		p = comma ? comma + 1 : NULL;
	} while (p);
	return 0;
}

/* One flag's value into the request. */
static int apply(ProtobufCMessage *req, const struct sctl_flag *fl, const char *val)
{
	ProtobufCMessage *owner;
	const ProtobufCFieldDescriptor *f;
	int64_t v;
	bool b;

	if (fl->kind == FK_TOPO)
		return add_topology(req, fl, val);
	if (fl->kind == FK_MAP) {
		const char *eq = strchr(val, '=');
		if (!eq || eq == val)
			return usage_error(fl->name, "expected KEY=VALUE");
		if (map_put(req, fl->path, val, (size_t)(eq - val), eq + 1) != 0)
			return usage_error(fl->name, "a key is given twice");
		return 0;
	}
	if (resolve(req, fl->path, &owner, &f) != 0)
		return usage_error(fl->name, "conflicts with another flag (only one may be given)");
	switch (fl->kind) {
	case FK_STR:
		set_string(owner, f, val);
		return 0;
	case FK_STRS:
		*(char **)append(owner, f, sizeof(char *)) = xstrdup(val);
		return 0;
	case FK_INT:
		if (parse_int(val, &v) != 0)
			return usage_error(fl->name, "expected an integer");
		return set_integer(owner, f, v, fl);
	case FK_SIZE:
		if (units_parse_size(val, &v) != 0)
			return usage_error(fl->name,
			                   "expected a size such as 1Gi, 512Mi, 1G or 4096");
		return set_integer(owner, f, v, fl);
	case FK_BOOL:
		if (parse_bool(val, &b) != 0)
			return usage_error(fl->name, "expected true or false");
		*MEMBER(owner, f, protobuf_c_boolean) = b;
		return 0;
	default:
		bug("bad flag kind", fl->path);
	}
	return 0;
}

/* ---- the capability flags ---- */

struct cap_opts {
	const char *access_type; /* "mount" (default), "block" or "none" */
	const char *fs_type;
	const char *mount_group;
	const char **mount_flags;
	size_t nflags;
	int modes[MAX_MODES];
	size_t nmodes;
	bool any;
};

static const struct sctl_flag cap_flags[] = {
    {"access-type", FK_STR, NULL, false,
     "mount (default) or block; none sends no capability at all"},
    {"fs-type", FK_STR, NULL, false, "filesystem type (mount; empty: the driver's default)"},
    {"mount-flag", FK_STRS, NULL, false, "mount option (mount; repeat)"},
    {"mount-group", FK_STR, NULL, false, "volume_mount_group (mount)"},
    {"access-mode", FK_STR, NULL, false,
     "single-node-writer (default), single-node-reader-only,\n"
     "                                     multi-node-reader-only, multi-node-single-writer,\n"
     "                                     multi-node-multi-writer, single-node-single-writer,\n"
     "                                     single-node-multi-writer"},
    {NULL, FK_STR, NULL, false, NULL},
};
#define NCAP_FLAGS (sizeof(cap_flags) / sizeof(cap_flags[0]) - 1)

/* "single-node-writer", "SINGLE_NODE_WRITER" or a number, as an AccessMode.Mode. */
static int parse_mode(const char *s, int *out)
{
	const ProtobufCEnumDescriptor *d =
	    &csi__v1__volume_capability__access_mode__mode__descriptor;
	char up[64];
	size_t i;
	int64_t v;

	if (parse_int(s, &v) == 0 && v >= INT32_MIN && v <= INT32_MAX) {
		*out = (int)v;
		return 0;
	}
	for (i = 0; i < sizeof(up) - 1 && s[i]; i++)
		up[i] = (char)(s[i] == '-' ? '_' : s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
	up[i] = '\0';
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(d, up);
	if (!ev || ev->value == 0)
		return -1;
	*out = ev->value;
	return 0;
}

/* A capability flag's value into c; 0, or a usage exit code. */
static int cap_apply(struct cap_opts *c, const struct sctl_flag *fl, const char *val)
{
	c->any = true;
	if (strcmp(fl->name, "access-type") == 0) {
		if (strcmp(val, "mount") != 0 && strcmp(val, "block") != 0 &&
		    strcmp(val, "none") != 0)
			return usage_error(fl->name, "expected mount, block or none");
		c->access_type = val;
	} else if (strcmp(fl->name, "fs-type") == 0) {
		c->fs_type = val;
	} else if (strcmp(fl->name, "mount-group") == 0) {
		c->mount_group = val;
	} else if (strcmp(fl->name, "mount-flag") == 0) {
		c->mount_flags = realloc(c->mount_flags, (c->nflags + 1) * sizeof(char *));
		if (!c->mount_flags)
			abort();
		c->mount_flags[c->nflags++] = val;
	} else {
		if (c->nmodes == MAX_MODES)
			return usage_error(fl->name, "given too many times");
		if (parse_mode(val, &c->modes[c->nmodes]) != 0)
			return usage_error(fl->name, "unknown access mode");
		c->nmodes++;
	}
	return 0;
}

/* The VolumeCapability (or one per --access-mode) at r->cap_path. */
static int build_caps(ProtobufCMessage *req, const struct sctl_rpc *r, struct cap_opts *c)
{
	bool required = r->cap == SCTL_CAP_ONE_REQUIRED || r->cap == SCTL_CAP_MANY_REQUIRED;
	bool many = r->cap == SCTL_CAP_MANY || r->cap == SCTL_CAP_MANY_REQUIRED;
	const char *type = c->access_type ? c->access_type : "mount";
	bool mount_opts = c->fs_type || c->nflags || c->mount_group;

	if (strcmp(type, "none") == 0) {
		if (mount_opts || c->nmodes)
			return usage_error("access-type",
			                   "none excludes the other capability flags");
		return 0;
	}
	if (!c->any && !required)
		return 0;
	if (strcmp(type, "block") == 0 && mount_opts)
		return usage_error("access-type",
		                   "block excludes --fs-type, --mount-flag and --mount-group");
	if (c->nmodes == 0)
		c->modes[c->nmodes++] =
		    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	if (!many && c->nmodes > 1)
		return usage_error("access-mode",
		                   "this request carries one capability: give it once");
	for (size_t i = 0; i < c->nmodes; i++) {
		Csi__V1__VolumeCapability *cap = (void *)message_at(req, r->cap_path);
		cap->access_mode =
		    (void *)msg_new(&csi__v1__volume_capability__access_mode__descriptor);
		cap->access_mode->mode = c->modes[i];
		if (strcmp(type, "block") == 0) {
			cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
			cap->block =
			    (void *)msg_new(&csi__v1__volume_capability__block_volume__descriptor);
			continue;
		}
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		Csi__V1__VolumeCapability__MountVolume *mv =
		    (void *)msg_new(&csi__v1__volume_capability__mount_volume__descriptor);
		cap->mount = mv;
		if (c->fs_type)
			mv->fs_type = xstrdup(c->fs_type);
		if (c->mount_group)
			mv->volume_mount_group = xstrdup(c->mount_group);
		if (c->nflags) {
			mv->mount_flags = xcalloc(c->nflags, sizeof(char *));
			for (size_t j = 0; j < c->nflags; j++)
				mv->mount_flags[j] = xstrdup(c->mount_flags[j]);
			mv->n_mount_flags = c->nflags;
		}
	}
	return 0;
}

/* ---- the command line ---- */

int sctl_build_request(const struct sctl_rpc *r, int argc, char **argv, struct sctl_opts *o,
                       ProtobufCMessage **out)
{
	static const struct option common[] = {SCTL_COMMON_OPTIONS};
	const struct sctl_flag *flags[MAX_RPC_FLAGS]; /* flags[i] has the code SCTL_OPT_OWN + i */
	struct option longopts[MAX_RPC_FLAGS + sizeof(common) / sizeof(common[0])];
	size_t nown = 0, n = 0;

	for (; r->flags[nown].name; nown++) {
		if (nown == MAX_RPC_FLAGS - NCAP_FLAGS)
			bug("too many flags", r->name);
		flags[n++] = &r->flags[nown];
	}
	for (size_t i = 0; i < NCAP_FLAGS && r->cap != SCTL_CAP_NONE; i++)
		flags[n++] = &cap_flags[i];
	for (size_t i = 0; i < n; i++)
		longopts[i] = (struct option){flags[i]->name,
		                              flags[i]->kind == FK_BOOL ? optional_argument
		                                                        : required_argument,
		                              NULL, SCTL_OPT_OWN + (int)i};
	memcpy(longopts + n, common, sizeof(common));

	ProtobufCMessage *req = msg_new(r->req);
	struct cap_opts caps = {0};
	int rc = SCTL_EXIT_OK, c;
	bool help = false;
	char level[96];
	snprintf(level, sizeof(level), "%s %s: ", r->service, r->name);
	optind = 0;
	while (rc == SCTL_EXIT_OK && !help &&
	       (c = sctl_getopt(argc, argv, "-:o:h", longopts, level, o, NULL)) != -1) {
		if (c == SCTL_OPT_HELP) {
			sctl_rpc_help(stdout, r);
			help = true;
		} else if (c == SCTL_OPT_USAGE) {
			rc = SCTL_EXIT_USAGE;
		} else {
			size_t i = (size_t)(c - SCTL_OPT_OWN);
			const char *val = optarg ? optarg : "true"; /* a bool flag alone */
			rc = i < nown ? apply(req, flags[i], val) : cap_apply(&caps, flags[i], val);
		}
	}
	if (rc == SCTL_EXIT_OK && !help && r->cap != SCTL_CAP_NONE)
		rc = build_caps(req, r, &caps);
	free(caps.mount_flags);
	if (rc != SCTL_EXIT_OK || help) {
		protobuf_c_message_free_unpacked(req, NULL);
		req = NULL;
	}
	*out = req;
	return rc;
}

static const char *metavar(enum sctl_fk k)
{
	switch (k) {
	case FK_STR:
	case FK_STRS:
		return "VALUE";
	case FK_INT:
		return "N";
	case FK_SIZE:
		return "SIZE";
	case FK_BOOL:
		return "[=true|false]";
	case FK_MAP:
		return "KEY=VALUE";
	case FK_TOPO:
		return "KEY=VALUE,...";
	}
	return "VALUE";
}

/* The capability flags name their values more precisely. */
static const char *cap_metavar(const struct sctl_flag *fl)
{
	static const char *const names[][2] = {
	    {"access-type", "mount|block|none"},
	    {"fs-type", "FSTYPE"},
	    {"mount-flag", "OPTION"},
	    {"mount-group", "GID"},
	    {"access-mode", "MODE"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (fl >= cap_flags && fl < cap_flags + NCAP_FLAGS &&
		    strcmp(fl->name, names[i][0]) == 0)
			return names[i][1];
	return metavar(fl->kind);
}

static void flag_help(FILE *o, const struct sctl_flag *fl)
{
	char left[64];

	snprintf(left, sizeof(left), "--%s %s", fl->name, cap_metavar(fl));
	if (fl->kind == FK_BOOL)
		snprintf(left, sizeof(left), "--%s%s", fl->name, metavar(fl->kind));
	fprintf(o, "  %-34s %s%s\n", left, fl->help, fl->required ? " (required)" : "");
}

void sctl_rpc_help(FILE *o, const struct sctl_rpc *r)
{
	fprintf(o, "usage: sepcsictl [global flags] %s %s [flags]\n\n", r->service, r->name);
	fprintf(o, "%s (%s): %s.\n\n", sctl_rpc_method_name(r), r->method, r->summary);
	if (r->flags[0].name || r->cap != SCTL_CAP_NONE)
		fprintf(o, "flags:\n");
	for (const struct sctl_flag *fl = r->flags; fl->name; fl++)
		flag_help(o, fl);
	if (r->cap != SCTL_CAP_NONE) {
		bool many = r->cap == SCTL_CAP_MANY || r->cap == SCTL_CAP_MANY_REQUIRED;
		bool req = r->cap == SCTL_CAP_ONE_REQUIRED || r->cap == SCTL_CAP_MANY_REQUIRED;
		fprintf(o, "\ncapability flags (the request's %s%s):\n", r->cap_path,
		        req ? ", required: mount + single-node-writer unless told otherwise"
		            : ", sent only when one of these is given");
		for (const struct sctl_flag *fl = cap_flags; fl->name; fl++)
			flag_help(o, fl);
		if (many)
			fprintf(o, "  (repeat --access-mode to send one capability per mode)\n");
	}
	if (r->streams)
		fprintf(o, "\nThe answer is a stream: each message prints as it arrives (text: the "
		           "ranges as one\nlist; json: one object per message, one per line). "
		           "--timeout bounds the whole stream.\n");
	fprintf(o, "\n(required) marks fields the CSI spec requires; sepcsictl sends what it is "
	           "given and\nleaves the check to the driver.\n");
	fprintf(o, "global flags: --endpoint URL, --output text|json, --timeout DURATION "
	           "(see sepcsictl --help)\n");
}
