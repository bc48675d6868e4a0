/*
 * The form of a seccomp table (seccomp.c builds, installs and prints them;
 * seccomp_helper.c and seccomp_rpcd.c hold the tables). Private to policy/.
 */
#ifndef SEPCSI_POL_SC_RULES_H
#define SEPCSI_POL_SC_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pol_seccomp.h"

/*
 * SC_EAFNOSUPPORT_NE: the call fails with EAFNOSUPPORT when argument arg differs from
 * value (used so that gRPC's probes for IPv4/IPv6 support get a clean error
 * instead of a kill, while only AF_UNIX sockets can be made).
 */
enum sc_act { SC_ALLOW, SC_ENOSYS, SC_EAFNOSUPPORT_NE, SC_EACCES };

struct sc_rule {
	const char *name;
	enum sc_act act;
	int arg; /* -1: any arguments; else allowed when (arg & mask) == value */
	uint64_t mask, value;
	const char *filter; /* the filter in words, for the printed table */
	const char *why;
	bool and2; /* and also (arg2 & mask2) == value2 */
	int arg2;
	uint64_t mask2, value2;
	int nr; /* the x86_64 number of a call libseccomp does not know by name yet, else 0 */
};

/* The rows of one process's filter; defined in seccomp_<process>.c. */
struct pol_sc_table {
	const char *process;
	const struct sc_rule *rules;
	size_t n;
	const struct pol_sc_table *base; /* rows allowed too, before these; NULL: none */
};

#define ALLOW(n, w)                                                                                \
	{                                                                                          \
		.name = (n), .act = SC_ALLOW, .arg = -1, .why = (w)                                \
	}
/* A call newer than Debian's libseccomp (2.5.4), by its x86_64 number. */
#define ALLOW_NR(n, num, w)                                                                        \
	{                                                                                          \
		.name = (n), .act = SC_ALLOW, .arg = -1, .why = (w), .nr = (num)                   \
	}
#define ALLOW_IF(n, a, m, v, f, w)                                                                 \
	{                                                                                          \
		.name = (n), .act = SC_ALLOW, .arg = (a), .mask = (m), .value = (v),               \
		.filter = (f), .why = (w)                                                          \
	}
#define ALLOW_EQ(n, a, v, w) ALLOW_IF(n, a, ~0ULL, (uint64_t)(v), #v, w)
/* Two argument conditions, both required. */
#define ALLOW_IF2(n, a, m, v, a2, m2, v2, f, w)                                                    \
	{                                                                                          \
		.name = (n), .act = SC_ALLOW, .arg = (a), .mask = (m), .value = (v),               \
		.filter = (f), .why = (w), .and2 = true, .arg2 = (a2), .mask2 = (m2),              \
		.value2 = (v2)                                                                     \
	}
#define EAFNOSUPPORT_UNLESS(n, a, v, f, w)                                                         \
	{                                                                                          \
		.name = (n), .act = SC_EAFNOSUPPORT_NE, .arg = (a), .mask = ~0ULL,                 \
		.value = (uint64_t)(v), .filter = (f), .why = (w)                                  \
	}
#define ENOSYS_(n, w)                                                                              \
	{                                                                                          \
		.name = (n), .act = SC_ENOSYS, .arg = -1, .why = (w)                               \
	}
/* The call fails with EACCES: a library's attempt gets a clean refusal, not a kill. */
#define EACCES_(n, w)                                                                              \
	{                                                                                          \
		.name = (n), .act = SC_EACCES, .arg = -1, .why = (w)                               \
	}
/* ioctl's request is an unsigned int in the kernel: compare the low 32 bits only. */
#define IOCTL(cmd, w) ALLOW_IF("ioctl", 1, 0xffffffffULL, (uint64_t)(cmd), #cmd, w)

/* clone(2) flags that would create a namespace: never allowed. */
#define CLONE_NS_FLAGS                                                                             \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |  \
	            CLONE_NEWPID | CLONE_NEWNET))
#define CLONE_THREAD_FLAGS ((uint64_t)(CLONE_VM | CLONE_THREAD))
#define MOUNT_FORCED       ((uint64_t)(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV))

#define SC_TABLE(proc, table)                                                                      \
	{                                                                                          \
		.process = (proc), .rules = (table), .n = sizeof(table) / sizeof((table)[0])       \
	}
/* A table that is another's rows (base) and its own. */
#define SC_TABLE_ON(proc, table, on)                                                               \
	{                                                                                          \
		.process = (proc), .rules = (table), .n = sizeof(table) / sizeof((table)[0]),      \
		.base = (on)                                                                       \
	}

#endif
