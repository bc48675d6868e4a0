"""A tenant's tool for the hostile tests: make subvolume NAME in the current directory with
BTRFS_IOC_SUBVOL_CREATE_V2 and a quota group inheritance list of the caller's choosing (no
privilege needed). Usage: btrfs_mkv2.py NAME [LEVEL/ID ...]; exits 1 with the errno's name
when the kernel refuses."""
import ctypes
import errno
import fcntl
import os
import struct
import sys

INHERIT = 1 << 2  # BTRFS_SUBVOL_QGROUP_INHERIT


def main():
    name, groups = sys.argv[1], [int(g.split("/")[0]) << 48 | int(g.split("/")[1])
                                 for g in sys.argv[2:]]
    # struct btrfs_qgroup_inherit: flags, num_qgroups, num_ref_copies, num_excl_copies,
    # struct btrfs_qgroup_limit (5 x u64), then the group ids
    inherit = struct.pack("9Q", 0, len(groups), 0, 0, 0, 0, 0, 0, 0) + \
        b"".join(struct.pack("Q", g) for g in groups)
    buf = ctypes.create_string_buffer(inherit, len(inherit))
    # struct btrfs_ioctl_vol_args_v2: fd, transid, flags, size, qgroup_inherit, unused, name
    args = struct.pack("qQQQQ", 0, 0, INHERIT, len(inherit), ctypes.addressof(buf))
    args += b"\0" * 16 + name.encode() + b"\0" * (4040 - len(name))
    req = (1 << 30) | (4096 << 16) | (0x94 << 8) | 24  # BTRFS_IOC_SUBVOL_CREATE_V2
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, req, bytearray(args))
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
        sys.exit(1)
    print("created", name)


if __name__ == "__main__":
    main()
