/*
 * The ext4 superblock reader of the tools runner (rn_ext4_sb_blocks in
 * runner/signature.c). Before STAGE mounts an existing ext4 file system it
 * reads the block count from the image's primary superblock, whose bytes the
 * volume's user wrote. The input is those 1024 bytes (shorter inputs are
 * padded with zeros). Checks: the function reads only its 1024 bytes (the
 * buffer is exactly that size, so ASan sees any read past it); it accepts
 * exactly the blocks with the ext4 magic and a block size of at most 64 KiB;
 * what it returns agrees with the fields read here independently, the block
 * size is a power of two from 1 KiB to 64 KiB, and a refusal clears both
 * outputs.
 */
#include <endian.h>
#include <string.h>

#include "fuzz.h"
#include "runner.h"

static uint32_t le32_at(const unsigned char *sb, size_t off)
{
	uint32_t v;
	memcpy(&v, sb + off, sizeof(v));
	return le32toh(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *sb = calloc(1, RN_EXT4_SB_LEN);
	uint64_t blocks = 1;
	uint32_t bsize = 1;
	if (!sb)
		abort();
	memcpy(sb, data, size < RN_EXT4_SB_LEN ? size : RN_EXT4_SB_LEN);

	int rc = rn_ext4_sb_blocks(sb, &blocks, &bsize);
	bool magic = sb[0x38] == 0x53 && sb[0x39] == 0xef;
	uint32_t log_bs = le32_at(sb, 0x18);
	FUZZ_CHECK((rc == 0) == (magic && log_bs <= 6));
	if (rc == 0) {
		uint64_t want = le32_at(sb, 0x04);
		if (le32_at(sb, 0x60) & 0x80) /* INCOMPAT_64BIT */
			want |= (uint64_t)le32_at(sb, 0x150) << 32;
		FUZZ_CHECK(blocks == want);
		FUZZ_CHECK(bsize >= 1024 && bsize <= 65536 && (bsize & (bsize - 1)) == 0);
		FUZZ_CHECK(bsize == 1024u << log_bs);
	} else {
		FUZZ_CHECK(rc == -1 && blocks == 0 && bsize == 0);
	}
	free(sb);
	return 0;
}
