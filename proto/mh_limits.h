/*
 * The bounds of the helper protocol's fields (mh_proto.h), apart: the policy's
 * syntax checks (policy/syntax.c) apply the same bounds without the protocol
 * itself, so that a process that checks paths but speaks no helper protocol
 * (the supervisor) compiles none of it.
 */
#ifndef SEPCSI_MH_LIMITS_H
#define SEPCSI_MH_LIMITS_H

#define MH_ID_MAX        64   /* volume and snapshot ids */
#define MH_PATH_MAX      4095 /* staging and target paths */
#define MH_FSTYPE_MAX    16
#define MH_OPTS_MAX      4096 /* comma-separated mount options */
#define MH_REASON_MAX    255
#define MH_LIST_TEXT_MAX 12288 /* one page of a LIST answer */
#define MH_DIRNAME_MAX   255   /* a directory volume's name beneath its base (pol_dir_name_ok) */

#endif
