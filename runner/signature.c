/*
 * RN_SIGNATURE: what an image or its loop device holds, read for the helper
 * by the tools runner. This is the only code of sepcsi that parses bytes a
 * tenant may have written (libblkid's probes of every known file system and
 * partition table, and ext4's superblock fields), and it runs here, in a
 * child the tools runner forks for each probe (tools.c: probe_child), which
 * holds no capability, only a read-only descriptor of the one image and its
 * answer socket, sees no kubelet directory, and runs under the probe filter
 * stacked on the tools' (reads, anonymous memory, the answer); never in the
 * helper, which holds CAP_SYS_ADMIN and links no libblkid. A subverted parser
 * can read that one image and answer, nothing else, and no later job reaches
 * it. Nothing here is fatal.
 *
 * What the answer says is itself tenant-shaped: the helper checks its form
 * (bounded, printable) and decides from it only whether to format (blank:
 * nothing to lose) or mount (the type asked for), and whether an ext4 needs
 * growing.
 */
#include <blkid/blkid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

int rn_ext4_sb_blocks(const unsigned char sb[RN_EXT4_SB_LEN], uint64_t *blocks, uint32_t *bsize)
{
#define LE32(o)                                                                                    \
	((uint32_t)sb[o] | (uint32_t)sb[(o) + 1] << 8 | (uint32_t)sb[(o) + 2] << 16 |              \
	 (uint32_t)sb[(o) + 3] << 24)
	*blocks = 0;
	*bsize = 0;
	if (sb[0x38] != 0x53 || sb[0x39] != 0xef || LE32(0x18) > 6)
		return -1; /* not an ext4 superblock, or a block size over 64 KiB */
	*bsize = 1024u << LE32(0x18);
	*blocks = LE32(0x04);
	if (LE32(0x60) & 0x80) /* INCOMPAT_64BIT: the high half counts too */
		*blocks |= (uint64_t)LE32(0x150) << 32;
#undef LE32
	return 0;
}

/* libblkid's safe probe with superblocks and partition tables: never writes. */
static void probe(int fd, struct rn_answer *a)
{
	blkid_probe pr = blkid_new_probe();
	const char *type = NULL, *pttype = NULL;
	if (!pr) {
		a->err = ENOMEM;
		return;
	}
	if (blkid_probe_set_device(pr, fd, 0, 0) != 0) {
		a->err = errno ? errno : EIO;
		goto out;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);
	int rc = blkid_do_safeprobe(pr);
	if (rc == 1) {
		a->status = RN_SIG_BLANK;
	} else if (rc == -2) {
		a->status = RN_SIG_AMBIVALENT;
	} else if (rc != 0) {
		a->err = errno ? errno : EIO;
	} else {
		a->status = RN_SIG_FOUND;
		blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
		blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
		snprintf(a->type, sizeof(a->type), "%s", type ? type : "");
		snprintf(a->pttype, sizeof(a->pttype), "%s", pttype ? pttype : "");
	}
out:
	blkid_free_probe(pr);
}

void rn_signature(int fd, struct rn_answer *a)
{
	unsigned char sb[RN_EXT4_SB_LEN];
	memset(a, 0, sizeof(*a));
	probe(fd, a);
	if (!a->err && pread(fd, sb, sizeof(sb), 1024) == (ssize_t)sizeof(sb))
		(void)rn_ext4_sb_blocks(sb, &a->fs_blocks, &a->fs_block_size);
}
