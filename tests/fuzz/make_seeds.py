#!/usr/bin/python3
"""Writes the seed corpora of the fuzz harnesses into tests/fuzz/corpus/<name>/.

Each seed is built here from the wire formats as the project documents them
(proto/mh_proto.h, common/supctl.h, docs/policy.md, proto/csi.proto), so the
corpus can be read and regenerated rather than kept as opaque blobs:

    /usr/bin/python3 tests/fuzz/make_seeds.py

The protocol's version and type numbers are read from proto/mh_proto.h and
proto/mh_proto_all.h, so a new version cannot leave the seeds behind
undecodable; with --check (the CTest test fuzz_seeds) it writes nothing and
fails if a seed it makes without outside tools differs from the checked-in one.

It rewrites the seeds it knows and leaves every other file alone: inputs that
once crashed a harness are kept beside the seeds under names starting with
"bug-". The CSI seeds are protobuf messages made with the Python module that
tests/e2e/csi_client.py generates from proto/csi.proto.
"""

import os
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

VOL = b"sv-0123456789abcdef0123456789abcdef"
VOL2 = b"sv-fedcba9876543210fedcba9876543210"
SNAP = b"ss-0123456789abcdef0123456789abcdef"
STAGING = b"/var/lib/kubelet/plugins/kubernetes.io/csi/local.sepcsi.io/abc/globalmount"
TARGET = b"/var/lib/kubelet/pods/1234/volumes/kubernetes.io~csi/pvc-1/mount"


# With --check: the seeds that differ from what is checked in, instead of writing.
stale = None


def write(harness, name, data):
    d = os.path.join(CORPUS, harness)
    if isinstance(data, str):
        data = data.encode()
    path = os.path.join(d, name)
    if stale is not None:
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except FileNotFoundError:
            same = False
        if not same:
            stale.append(os.path.join(harness, name))
        return
    os.makedirs(d, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# ---- the helper protocol (proto/mh_proto.h) ----

PROTO = os.path.join(os.path.dirname(os.path.dirname(HERE)), "proto")


def _protocol():
    """The version and every message type, read from the headers that define them."""
    text = ""
    for name in ("mh_proto.h", "mh_proto_all.h"):
        with open(os.path.join(PROTO, name)) as f:
            text += f.read()
    version = int(re.search(r"#define MH_PROTO_VERSION (\d+)", text).group(1))
    types = {m.group(1): int(m.group(2))
             for m in re.finditer(r"\bMH_((?:REQ|ANS)_\w+)\s*=\s*(\d+)", text)}
    return version, types


MH_VERSION, T = _protocol()


def s(b):
    """A protocol string: u16 length, bytes."""
    return struct.pack(">H", len(b)) + b


def u8(v):
    return struct.pack(">B", v)


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def msg(type_name, payload=b"", mid=1, version=MH_VERSION):
    return struct.pack(">HHII", version, T[type_name], mid, len(payload)) + payload


def stage(vol=VOL, path=STAGING, fs=b"ext4", flags=b"noatime", mkfs=b"-m0", ro=0, f=0, gid=0):
    return msg("REQ_STAGE", s(vol) + s(path) + s(fs) + s(flags) + s(mkfs) + u8(ro) + u8(f) + u32(gid))


BASE = b"/srv/sepcsi"


def dirq(type_name, vol=VOL, base=BASE, name=b"ns/claim", path=b"", snap=b"", src_kind=0,
         src=b"", src_name=b"", size=0, mode=0, flags=0, gid=0):
    """A directory-volume request (struct mh_req_dir)."""
    return msg(type_name, s(vol) + s(base) + s(name) + s(path) + s(snap) + u8(src_kind) + s(src)
               + s(src_name) + u64(size) + u8(mode) + u8(flags) + u32(gid))


def requests():
    """One valid request of every type, and some the helper must refuse after decoding."""
    return {
        "dir-create": dirq("REQ_DIR_CREATE", size=1 << 30),
        "dir-create-from-volume": dirq("REQ_DIR_CREATE", vol=VOL2, size=1 << 30, src_kind=2,
                                       src=VOL, src_name=b"ns/claim"),
        "dir-delete-archive": dirq("REQ_DIR_DELETE", mode=2),
        "dir-expand": dirq("REQ_DIR_EXPAND", size=2 << 30),
        "dir-publish-group": dirq("REQ_DIR_PUBLISH", path=TARGET, mode=1, flags=0x08, gid=1000),
        "dir-unpublish": dirq("REQ_DIR_UNPUBLISH", path=TARGET),
        "dir-stats": dirq("REQ_DIR_STATS", path=b""),
        "dir-capacity": dirq("REQ_DIR_CAPACITY", vol=b"", name=b""),
        "dir-snapshot": dirq("REQ_DIR_SNAPSHOT", snap=SNAP),
        "dir-delete-snapshot": dirq("REQ_DIR_DELETE_SNAPSHOT", vol=b"", name=b"", snap=SNAP),
        "dir-node": dirq("REQ_DIR_NODE", vol=b"", name=b"node-1"),
        "hostile-dir-node-climb": dirq("REQ_DIR_NODE", vol=b"", name=b"../../../etc"),
        "hostile-dir-climb": dirq("REQ_DIR_CREATE", name=b"../../etc", size=1 << 30),
        "hostile-dir-own-area": dirq("REQ_DIR_DELETE", name=b".sepcsi-snapshots"),
        "hostile-dir-base": dirq("REQ_DIR_DELETE", base=b"/etc", name=b"passwd"),
        "ping": msg("REQ_PING"),
        "create": msg("REQ_CREATE", s(VOL) + u64(1 << 30)),
        "delete": msg("REQ_DELETE", s(VOL)),
        "stage": stage(),
        "stage-block": stage(fs=b"", flags=b"", mkfs=b"", f=0x01),
        "stage-ephemeral-group": stage(path=TARGET, f=0x02 | 0x08, gid=1000),
        "stage-xfs-nouuid": stage(fs=b"xfs", flags=b"nouuid,ro", mkfs=b"-K -mreflink=1", ro=1),
        "unstage": msg("REQ_UNSTAGE", s(VOL) + s(STAGING) + u8(0x04)),
        "publish": msg("REQ_PUBLISH", s(VOL) + s(STAGING) + s(TARGET) + u8(1) + u8(0)),
        "unpublish": msg("REQ_UNPUBLISH", s(VOL) + s(TARGET)),
        "resize": msg("REQ_RESIZE", s(VOL) + u64(2 << 30)),
        "snapshot": msg("REQ_SNAPSHOT", s(SNAP) + s(VOL)),
        "delete-snapshot": msg("REQ_DELETE_SNAPSHOT", s(SNAP)),
        "clone-snapshot": msg("REQ_CLONE", s(VOL2) + u8(1) + s(SNAP) + u64(1 << 30)),
        "clone-volume": msg("REQ_CLONE", s(VOL2) + u8(2) + s(VOL) + u64(1 << 30)),
        "capacity": msg("REQ_CAPACITY", mid=0xFFFFFFFF),
        "expand": msg("REQ_EXPAND", s(VOL) + s(STAGING) + s(b"ext4") + u8(0)),
        "stats": msg("REQ_STATS", s(VOL) + s(TARGET) + u8(0)),
        "list-images": msg("REQ_LIST", u32(1) + s(b"")),
        "list-mounts-after": msg("REQ_LIST", u32(3) + s(b"417")),
        "group-snapshot": msg("REQ_GROUP_SNAPSHOT", u32(2) + s(VOL) + s(SNAP) + s(VOL2)
                              + s(b"ss-fedcba9876543210fedcba9876543210") + s(b"") * 28),
        "blocks-allocated": msg("REQ_BLOCKS", u32(1) + s(SNAP) + s(b"") + u64(4096)),
        "blocks-delta": msg("REQ_BLOCKS", u32(2) + s(SNAP) + s(SNAP) + u64(0)),
        "hostile-blocks-base-without-delta": msg("REQ_BLOCKS", u32(1) + s(SNAP) + s(SNAP)
                                                 + u64(0)),
        # The capable core's own (from rpcd, a violation).
        "freeze": msg("REQ_FREEZE", s(VOL) + u32(30)),
        "thaw": msg("REQ_THAW", s(VOL)),
        # Decodable, but refused by the helper's own checks.
        "hostile-traversal": msg("REQ_UNPUBLISH", s(VOL) + s(b"/var/lib/kubelet/../../etc")),
        "hostile-id-path": msg("REQ_DELETE", s(b"../../etc/passwd")),
        "hostile-root-itself": msg("REQ_STATS", s(VOL) + s(b"/var/lib/kubelet") + u8(0)),
        "hostile-mount-opts": stage(flags=b"suid,dev,bind"),
        "hostile-mkfs-opts": stage(mkfs=b"-d /etc -E root_owner"),
        "hostile-control-chars": msg(
            "REQ_PUBLISH", s(VOL) + s(STAGING) + s(b"/var/lib/kubelet/\x1b[31m\"x\\" * 50) + u8(0) + u8(0)),
        "long-path": msg("REQ_UNPUBLISH", s(VOL) + s(b"/var/lib/kubelet/" + b"\x01" * 4078)),
    }


def answers():
    return {
        "ans-ping": msg("ANS_PING"),
        "ans-create": msg("ANS_CREATE", u64(1 << 30)),
        "ans-delete": msg("ANS_DELETE"),
        "ans-stage": msg("ANS_STAGE"),
        "ans-snapshot": msg("ANS_SNAPSHOT", u64(1 << 30) + u8(1)),
        "ans-clone": msg("ANS_CLONE", u64(1 << 30) + u8(0)),
        "ans-capacity": msg("ANS_CAPACITY", u64(50 << 30) + u64(100 << 30) + u64(16 << 40) + u8(1)
                            + u8(0) + u8(1) + u8(0)),
        "ans-dir-create": msg("ANS_DIR_CREATE", u64(1 << 30) + u8(1) + u8(0)),
        "ans-expand": msg("ANS_EXPAND", u64(2 << 30)),
        "ans-stats": msg("ANS_STATS", u64(1) + u64(2) + u64(3) + u64(4) + u64(5) + u64(6) + u8(1)
                         + s(b"file system errors")),
        "ans-list": msg("ANS_LIST", u8(1) + s(b"417 b " + VOL + b" " + TARGET + b"\n")),
        "ans-error": msg("ANS_ERROR", u32(2) + u32(2) + s(b"no such image")),
        "ans-blocks": msg("ANS_BLOCKS", u64(1 << 30) + u64(1 << 20) + u32(2) + u64(0) + u64(4096)
                          + u64(8192) + u64(65536)),
    }


def mh_msg_seeds():
    for name, m in {**requests(), **answers()}.items():
        write("mh_msg", name, m)
    edge = {
        "edge-empty": b"",
        "edge-header-only-short": msg("REQ_PING")[:11],
        "edge-bad-version": msg("REQ_PING", version=1),
        "edge-unknown-type": struct.pack(">HHII", MH_VERSION, 99, 1, 0),
        "edge-length-disagrees": msg("REQ_DELETE", s(VOL))[:-1],
        "edge-trailing-byte": msg("REQ_DELETE", s(VOL) + b"x"),
        "edge-nul-in-string": msg("REQ_DELETE", s(b"sv-\x00")),
        "edge-string-too-long": msg("REQ_DELETE", s(b"a" * 65)),
        "edge-bad-bool": stage(ro=2),
        "edge-bad-flags": stage(f=0x20),
        "edge-bad-clone-source": msg("REQ_CLONE", s(VOL2) + u8(3) + s(SNAP) + u64(1)),
        "edge-error-kind-ok": msg("ANS_ERROR", u32(0) + u32(0) + s(b"")),
        "edge-error-kind-unavailable": msg("ANS_ERROR", u32(8) + u32(0) + s(b"")),
        "edge-blocks-too-many": msg("ANS_BLOCKS", u64(0) + u64(0) + u32(513)),
        "edge-blocks-count-past-end": msg("ANS_BLOCKS", u64(0) + u64(0) + u32(2) + u64(0)
                                          + u64(4096)),
    }
    for name, m in edge.items():
        write("mh_msg", name, m)
    # The core's codec is given the same: what is not its own, it refuses.
    for name, m in {**requests(), **answers(), **edge}.items():
        write("core_msg", name, m)


def mh_request_seeds():
    for name, m in requests().items():
        write("mh_request", name, m)
    write("mh_request", "answer-sent-as-request", answers()["ans-create"])


STUBS = ["PING", "CREATE", "DELETE", "STAGE", "UNSTAGE", "PUBLISH", "UNPUBLISH", "RESIZE",
         "SNAPSHOT", "DELETE_SNAPSHOT", "CLONE", "CAPACITY", "EXPAND", "STATS", "LIST"]
ANSWERS = {"PING": msg("ANS_PING"), "CREATE": answers()["ans-create"],
           "DELETE": msg("ANS_DELETE"), "STAGE": msg("ANS_STAGE"), "UNSTAGE": msg("ANS_UNSTAGE"),
           "PUBLISH": msg("ANS_PUBLISH"), "UNPUBLISH": msg("ANS_UNPUBLISH"),
           "RESIZE": msg("ANS_RESIZE", u64(2 << 30)), "SNAPSHOT": answers()["ans-snapshot"],
           "DELETE_SNAPSHOT": msg("ANS_DELETE_SNAPSHOT"), "CLONE": answers()["ans-clone"],
           "CAPACITY": answers()["ans-capacity"], "EXPAND": answers()["ans-expand"],
           "STATS": answers()["ans-stats"], "LIST": answers()["ans-list"]}


def client_input(stub, datagrams, patch=True):
    out = bytes([STUBS.index(stub), 1 if patch else 0])
    for d in datagrams:
        out += struct.pack(">H", len(d)) + d
    return out


def mh_client_seeds():
    err = answers()["ans-error"]
    for stub in STUBS:
        write("mh_client", "answer-" + stub.lower(), client_input(stub, [ANSWERS[stub]]))
    write("mh_client", "error-create", client_input("CREATE", [err]))
    write("mh_client", "error-stats", client_input("STATS", [err]))
    write("mh_client", "no-answer", client_input("PING", []))
    write("mh_client", "empty-datagram", client_input("PING", [b""]))
    write("mh_client", "garbage", client_input("STAGE", [b"\x00\x02\x00\x08garbage"]))
    write("mh_client", "wrong-type", client_input("STAGE", [msg("ANS_PUBLISH")]))
    write("mh_client", "request-to-rpcd", client_input("PING", [msg("REQ_PING")]))
    write("mh_client", "unknown-id", client_input("PING", [msg("ANS_PING", mid=77)], patch=False))
    write("mh_client", "answer-twice", client_input("CREATE", [ANSWERS["CREATE"]] * 2))
    write("mh_client", "stray-then-answer",
          client_input("DELETE", [msg("ANS_DELETE", mid=9), msg("ANS_DELETE")], patch=False))
    write("mh_client", "oversized", client_input("PING", [msg("ANS_PING") + b"\0" * 16380]))


# ---- the supervisor control channel (common/supctl.h) ----

def supctl_input(passcred, datagrams):
    out = bytes([1 if passcred else 0])
    for payload, nfds, kind in datagrams:
        out += bytes([len(payload), nfds | kind << 5]) + payload
    return out


def supctl_seeds():
    seqpacket, stream, pipe, devnull = 0, 1, 2, 3
    seeds = {
        "ready": [(b"\x01", 0, 0)],
        "peer-fd": [(b"\x02", 1, seqpacket)],
        "helper-failed": [(b"\x03", 0, 0)],
        "all-valid": [(b"\x01", 0, 0), (b"\x02", 1, seqpacket), (b"\x03", 0, 0)],
        "peer-fd-without-fd": [(b"\x02", 0, 0)],
        "ready-with-fd": [(b"\x01", 1, seqpacket)],
        "peer-fd-two-fds": [(b"\x02", 2, seqpacket)],
        "peer-fd-stream": [(b"\x02", 1, stream)],
        "peer-fd-pipe": [(b"\x02", 1, pipe)],
        "peer-fd-file": [(b"\x02", 1, devnull)],
        "too-many-fds": [(b"\x02", 20, seqpacket)],
        "two-bytes": [(b"\x01\x01", 0, 0)],
        "long-payload": [(b"\x01" * 20, 0, 0)],
        "peer-violation": [(b"\x04", 0, 0)],
        "unknown-type": [(b"\x05", 0, 0), (b"\x00", 0, 0)],
        "empty-with-fds": [(b"", 3, pipe)],
    }
    for name, dgrams in seeds.items():
        write("supctl", name, supctl_input(False, dgrams))
    write("supctl", "credentials", supctl_input(True, seeds["all-valid"]))


# ---- the policy file (docs/policy.md) ----

def policy_seeds():
    seeds = {
        "empty": "",
        "defaults-spelled-out": """\
; the built-in defaults, written out
[paths]
allowed_roots = /var/lib/kubelet
staging_paths = plugins/kubernetes.io/csi/*/*/globalmount
  plugins/kubernetes.io/csi/volumeDevices/staging/*
target_paths = pods/*/volumes/kubernetes.io~csi/*/*
  plugins/kubernetes.io/csi/volumeDevices/publish/*/*

[filesystems]
types = ext4 xfs btrfs
mount_options = ro rw noatime relatime nodiratime lazytime noexec sync dirsync
  discard nodiscard nouuid
mkfs_options_ext4 = -m0 -m1 -m5 -b4096 -Elazy_itable_init=1,lazy_journal_init=1
  -Enodiscard -O^has_journal
mkfs_options_xfs = -K -mreflink=0 -mreflink=1 -mbigtime=1
mkfs_options_btrfs = -K -msingle -mdup -dsingle

[volumes]
min_bytes = 1Mi
max_bytes = 16Ti
overcommit_ratio = 1.0
freeze_max_seconds = 60

[seccomp]
log_only = false
""",
        "narrow": """\
# only ext4, two roots, small volumes
[paths]
allowed_roots = /var/lib/kubelet /srv/kubelet ; a second kubelet
allowed_roots = /data/k8s
[filesystems]
types = ext4
mount_options = noatime commit= errors=
[volumes]
min_bytes = 4096
max_bytes = 10Gi
[seccomp]
log_only = true
""",
        "nomad-layout": "[paths]\nallowed_roots = /csi\nstaging_paths = staging/*/*/*\n"
                        "target_paths = per-alloc/**\n[volumes]\novercommit_ratio = 2.5\n",
        "err-pattern-absolute": "[paths]\nstaging_paths = /var/lib/kubelet/x\n",
        "err-pattern-dotdot": "[paths]\ntarget_paths = pods/../../etc\n",
        "err-pattern-inner-doublestar": "[paths]\ntarget_paths = a/**/b\n",
        "err-ratio": "[volumes]\novercommit_ratio = 0.001\n",
        "err-freeze": "[volumes]\nfreeze_max_seconds = 0\n",
        "err-unknown-section": "[network]\n",
        "err-unknown-key": "[paths]\nroots = /x\n",
        "err-key-outside-section": "types = ext4\n",
        "err-duplicate-key": "[volumes]\nmin_bytes = 1Mi\nmin_bytes = 2Mi\n",
        "err-bad-size": "[volumes]\nmax_bytes = 12Pi\n",
        "err-size-overflow": "[volumes]\nmax_bytes = 18446744073709551615Ti\n",
        "err-min-over-max": "[volumes]\nmin_bytes = 2Gi\nmax_bytes = 1Gi\n",
        "err-root-slash": "[paths]\nallowed_roots = /\n",
        "err-root-dotdot": "[paths]\nallowed_roots = /var/lib/../etc\n",
        "err-type": "[filesystems]\ntypes = vfat\n",
        "err-forbidden-option": "[filesystems]\nmount_options = suid\n",
        "err-option-comma": "[filesystems]\nmount_options = ro,rw\n",
        "err-mkfs-split": "[filesystems]\nmkfs_options_ext4 = -m 0\n",
        "err-empty-list": "[filesystems]\ntypes =\n",
        "err-long-line": "[paths]\nallowed_roots = /" + "a" * 200 + "\n",
        "err-nul": "[paths]\x00\n",
        "err-syntax": "[paths\nallowed_roots\n",
        "err-log-only": "[seccomp]\nlog_only = yes\n",
        "continuation-comment": "[filesystems]\nmount_options = ro\n\t; a comment, not options\n  rw\n",
        "crlf": "[volumes]\r\nmin_bytes = 8192\r\n",
    }
    for name, text in seeds.items():
        write("policy", name, text)


# ---- mount and mkfs options ----

def mount_opts_seeds():
    lists = {
        "empty": "", "noatime": "noatime", "ro": "ro", "rw-sync": "rw,sync,dirsync,lazytime",
        "atimes": "relatime,strictatime,noatime,nodiratime", "exec": "noexec,exec",
        "nouuid": "nouuid,discard", "forced": "nosuid,nodev", "value": "commit=5",
        "data": "data=ordered,errors=remount-ro", "suid": "suid", "bind": "bind,remount",
        "userspace": "user,x-mount.mkdir", "defaults": "defaults", "quotes": 'context="a,b"',
        "empty-item": "ro,,rw", "trailing-comma": "noatime,", "control": "ro\tnoatime",
    }
    for name, text in lists.items():
        # byte 0: bit 0 readonly, bit 1 the policy with file system options
        write("mount_opts", name, b"\x00" + text.encode())
        write("mount_opts", name + "-ro-fsopts", b"\x03" + text.encode())


def mkfs_opts_seeds():
    fs = {"ext4": 0, "xfs": 1, "btrfs": 2, "none": 3, "vfat": 4}
    lists = [
        ("ext4", "m0", "-m0"), ("ext4", "m-space-0", "-m 0"), ("ext4", "several", "-b4096 -m1  -Enodiscard"),
        ("ext4", "lazy", "-Elazy_itable_init=1,lazy_journal_init=1"), ("ext4", "journal", "-O^has_journal"),
        ("ext4", "bare-flag-last", "-m"), ("ext4", "populate", "-d /etc"), ("ext4", "double-dash", "--"),
        ("ext4", "too-many", " ".join(["-m0"] * 17)), ("ext4", "quote", "-L'x'"),
        ("ext4", "label-value", "-L x"), ("xfs", "reflink", "-K -mreflink=1"),
        ("xfs", "bigtime", "-mbigtime=1 -K"), ("btrfs", "profiles", "-msingle -dsingle -K"),
        ("none", "no-fs", "-m0"), ("vfat", "unknown-fs", "-F32"), ("ext4", "empty", ""),
    ]
    for f, name, text in lists:
        write("mkfs_opts", f + "-" + name, bytes([fs[f], 200]) + text.encode())
    write("mkfs_opts", "ext4-tight-room", bytes([0, 1]) + b"-b4096 -m0")


# ---- directory volume names ----

def dirname_seeds():
    # byte 0: bit 0 pattern given, bits 1-3 namespace, claim and PV name given;
    # then pattern, namespace, claim, PV name and request name, NUL-separated.
    cases = {
        "default": (0x0e, "", "team-a", "data", "pvc-1", "pvc-1"),
        "default-no-meta": (0x00, "", "", "", "", "sanity vol"),
        "nested": (0x0f, "${.PVC.namespace}/${.PVC.name}", "ns", "claim", "pv", "r"),
        "aliases": (0x0f, "${pvc.metadata.namespace}-${pv.metadata.name}", "ns", "c", "pv", "r"),
        "traversal": (0x0f, "${.PVC.namespace}/${.PVC.name}", "..", "../../etc", "pv", "r"),
        "missing": (0x0d, "x/${.PVC.namespace}", "", "c", "pv", "r"),
        "unknown": (0x0f, "${.PVC.uid}", "ns", "c", "pv", "r"),
        "unterminated": (0x0f, "${.PV.name", "ns", "c", "pv", "r"),
        "archived": (0x0f, "archived-${.PV.name}", "ns", "c", "pv", "r"),
        "deep": (0x0f, "a/b/c/${.PV.name}", "ns", "c", "pv", "r"),
        "dollar": (0x0f, "$x/${.PV.name}", "ns", "c", "pv", "r"),
        "long": (0x0f, "${.PVC.name}", "ns", "x" * 300, "pv", "r"),
    }
    for name, (bits, *fields) in cases.items():
        write("dirname", name, bytes([bits]) + b"\0".join(f.encode() for f in fields))


# ---- the ext4 superblock ----

def superblock(blocks, log_bs, incompat=0, blocks_hi=0, magic=0xEF53):
    sb = bytearray(1024)
    struct.pack_into("<I", sb, 0x04, blocks & 0xFFFFFFFF)
    struct.pack_into("<I", sb, 0x18, log_bs)
    struct.pack_into("<H", sb, 0x38, magic)
    struct.pack_into("<I", sb, 0x60, incompat)
    struct.pack_into("<I", sb, 0x150, blocks_hi)
    return bytes(sb)


def ext4_sb_seeds():
    write("ext4_sb", "4k-blocks", superblock(262144, 2, incompat=0x2C2))
    write("ext4_sb", "1k-blocks", superblock(1 << 20, 0))
    write("ext4_sb", "64k-blocks", superblock(1000, 6))
    write("ext4_sb", "64bit", superblock(0x10, 2, incompat=0x80, blocks_hi=1))
    write("ext4_sb", "64bit-flag-off", superblock(0x10, 2, incompat=0x7F, blocks_hi=1))
    write("ext4_sb", "block-size-too-big", superblock(1000, 7))
    write("ext4_sb", "no-magic", superblock(1000, 2, magic=0x1234))
    write("ext4_sb", "short", superblock(1000, 2)[:0x3A])
    write("ext4_sb", "empty", b"")
    # A real one, from mkfs.ext4 with a fixed UUID, hash seed and time.
    with tempfile.TemporaryDirectory() as tmp:
        img = os.path.join(tmp, "img")
        env = dict(os.environ, E2FSPROGS_FAKE_TIME="1700000000")
        uuid = "01234567-89ab-cdef-0123-456789abcdef"
        res = subprocess.run(["mkfs.ext4", "-q", "-F", "-U", uuid, "-E", "hash_seed=" + uuid,
                              img, "8M"], env=env, capture_output=True)
        if res.returncode == 0:
            with open(img, "rb") as f:
                f.seek(1024)
                write("ext4_sb", "mkfs-ext4-8M", f.read(1024))
        else:
            print("make_seeds: mkfs.ext4 failed, kept the old real superblock", file=sys.stderr)


# ---- the audit log (one JSON object per line, as mounthelper/mh_dispatch.c writes it) ----

def audit_line_seeds():
    lines = {
        "ok": '{"ts":"2026-01-02T03:04:05.678Z","event":"audit","req":"7","op":"STAGE",'
              '"volume_id":"sv-0123456789abcdef0123456789abcdef","path":"/var/lib/kubelet/x",'
              '"result":"ok"}',
        "refused": '{"ts":"2026-01-02T03:04:05.678Z","event":"audit","req":"8","op":"DELETE",'
                   '"volume_id":"..\\/..\\/etc","result":"refused","kind":"REFUSED","errno":"22",'
                   '"reason":"malformed volume id"}',
        "escapes": '{"path":"\\u001b[31m\\"quoted\\"\\\\ \\t\\n\\r\\b\\f \\u00e9 \\ud83d\\ude00"}',
        "raw-values": '{"n":42, "f":-1.5e3, "t":true, "z":null, "o":{"a":[1,2,{"b":"}"}]}, "l":[]}',
        "empty-object": "{}",
        "whitespace": ' \t{ "a" : "b" ,\t"c":"d" } ',
        "lone-surrogate": '{"a":"\\ud800x","b":"\\udc00"}',
        "nul-escape": '{"volume_id":"sv-0123456789abcdef0123456789abcdef\\u0000 and more"}',
        "bad-escape": '{"a":"\\x41"}',
        "short-unicode": '{"a":"\\u12"}',
        "unterminated": '{"a":"b',
        "trailing": '{"a":"b"} x',
        "not-object": '["a","b"]',
        "missing-colon": '{"a" "b"}',
        "unbalanced": '{"a":{"b":1}',
        "too-many-keys": "{" + ",".join('"k%d":%d' % (i, i) for i in range(65)) + "}",
    }
    for name, line in lines.items():
        write("audit_line", name, line)


# ---- CSI requests (proto/csi.proto), in the order of the harness's method table ----

METHODS = [
    "GetPluginInfo", "GetPluginCapabilities", "Probe", "CreateVolume", "DeleteVolume",
    "ControllerGetCapabilities", "ControllerPublishVolume", "ControllerUnpublishVolume",
    "ValidateVolumeCapabilities", "ListVolumes", "GetCapacity", "CreateSnapshot",
    "DeleteSnapshot", "ListSnapshots", "GetSnapshot", "ControllerExpandVolume",
    "ControllerGetVolume", "ControllerModifyVolume", "GroupControllerGetCapabilities",
    "CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot", "GetVolumeGroupSnapshot",
    "NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume",
    "NodeGetCapabilities", "NodeGetInfo", "NodeGetVolumeStats", "NodeExpandVolume",
]


def csi_seeds():
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
    from csi_client import pb  # generated from proto/csi.proto

    def cap(fs="ext4", block=False, mode=1, flags=()):
        c = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(mode=mode))
        if block:
            c.block.SetInParent()
        else:
            c.mount.fs_type = fs
            c.mount.mount_flags.extend(flags)
        return c

    staging = STAGING.decode()
    target = TARGET.decode()
    gi = 1 << 30
    seeds = [
        ("GetPluginInfo", "info", pb.GetPluginInfoRequest(), 0),
        ("GetPluginCapabilities", "plugin-caps", pb.GetPluginCapabilitiesRequest(), 0),
        ("Probe", "probe", pb.ProbeRequest(), 0),
        ("CreateVolume", "create", pb.CreateVolumeRequest(
            name="pvc-1", capacity_range=pb.CapacityRange(required_bytes=gi),
            volume_capabilities=[cap()], parameters={"mkfsOptions": "-m0"}), 0),
        ("CreateVolume", "create-block", pb.CreateVolumeRequest(
            name="pvc-2", volume_capabilities=[cap(block=True)]), 0),
        ("CreateVolume", "create-xfs-topology", pb.CreateVolumeRequest(
            name="pvc-3", volume_capabilities=[cap("xfs", flags=["noatime"])],
            accessibility_requirements=pb.TopologyRequirement(
                requisite=[pb.Topology(segments={"topology.sepcsi.io/node": "node-1"})])), 0),
        ("CreateVolume", "create-from-snapshot", pb.CreateVolumeRequest(
            name="pvc-4", volume_capabilities=[cap()],
            volume_content_source=pb.VolumeContentSource(
                snapshot=pb.VolumeContentSource.SnapshotSource(snapshot_id="@s0"))), 0),
        ("CreateVolume", "create-clone", pb.CreateVolumeRequest(
            name="pvc-5", capacity_range=pb.CapacityRange(required_bytes=2 * gi),
            volume_capabilities=[cap()],
            volume_content_source=pb.VolumeContentSource(
                volume=pb.VolumeContentSource.VolumeSource(volume_id="@v0"))), 0),
        ("CreateVolume", "create-helper-full", pb.CreateVolumeRequest(
            name="pvc-6", volume_capabilities=[cap()]), 0x80 | 4),
        ("DeleteVolume", "delete", pb.DeleteVolumeRequest(volume_id="@v1"), 0),
        ("DeleteVolume", "delete-foreign-id", pb.DeleteVolumeRequest(volume_id="../../etc"), 0),
        ("ControllerGetCapabilities", "controller-caps", pb.ControllerGetCapabilitiesRequest(), 0),
        ("ControllerPublishVolume", "controller-publish", pb.ControllerPublishVolumeRequest(
            volume_id="@v0", node_id="node-1", volume_capability=cap()), 0),
        ("ControllerUnpublishVolume", "controller-unpublish", pb.ControllerUnpublishVolumeRequest(
            volume_id="@v0", node_id="node-1"), 0),
        ("ValidateVolumeCapabilities", "validate", pb.ValidateVolumeCapabilitiesRequest(
            volume_id="@v0", volume_capabilities=[cap(), cap(block=True, mode=5)]), 0),
        ("ListVolumes", "list-volumes", pb.ListVolumesRequest(max_entries=2), 0),
        ("ListVolumes", "list-volumes-bad-token", pb.ListVolumesRequest(starting_token="zz"), 0),
        ("GetCapacity", "capacity", pb.GetCapacityRequest(volume_capabilities=[cap()]), 0),
        ("CreateSnapshot", "snapshot", pb.CreateSnapshotRequest(
            source_volume_id="@v0", name="snap-1"), 0),
        ("DeleteSnapshot", "delete-snapshot", pb.DeleteSnapshotRequest(snapshot_id="@s1"), 0),
        ("ListSnapshots", "list-snapshots", pb.ListSnapshotsRequest(source_volume_id="@v0"), 0),
        ("GetSnapshot", "get-snapshot", pb.GetSnapshotRequest(snapshot_id="@s0"), 0),
        ("ControllerExpandVolume", "controller-expand", pb.ControllerExpandVolumeRequest(
            volume_id="@v0", capacity_range=pb.CapacityRange(required_bytes=3 * gi)), 0),
        ("ControllerGetVolume", "controller-get-volume",
         pb.ControllerGetVolumeRequest(volume_id="@v0"), 0),
        ("ControllerModifyVolume", "modify", pb.ControllerModifyVolumeRequest(
            volume_id="@v0", mutable_parameters={"condition": "x"}), 0),
        ("GroupControllerGetCapabilities", "group-caps",
         pb.GroupControllerGetCapabilitiesRequest(), 0),
        ("CreateVolumeGroupSnapshot", "group-snapshot", pb.CreateVolumeGroupSnapshotRequest(
            name="group-1", source_volume_ids=["@v0", "@v1"]), 0),
        ("DeleteVolumeGroupSnapshot", "delete-group", pb.DeleteVolumeGroupSnapshotRequest(
            group_snapshot_id="@g0", snapshot_ids=["@s0"]), 0),
        ("GetVolumeGroupSnapshot", "get-group", pb.GetVolumeGroupSnapshotRequest(
            group_snapshot_id="@g0"), 0),
        ("NodeStageVolume", "stage", pb.NodeStageVolumeRequest(
            volume_id="@v0", staging_target_path=staging, volume_capability=cap()), 0),
        ("NodeStageVolume", "stage-block", pb.NodeStageVolumeRequest(
            volume_id="@v1", staging_target_path=staging, volume_capability=cap(block=True)), 0),
        ("NodeStageVolume", "stage-helper-refuses", pb.NodeStageVolumeRequest(
            volume_id="@v0", staging_target_path=staging, volume_capability=cap()), 0x80 | 0),
        ("NodeUnstageVolume", "unstage", pb.NodeUnstageVolumeRequest(
            volume_id="@v0", staging_target_path=staging), 0),
        ("NodePublishVolume", "publish", pb.NodePublishVolumeRequest(
            volume_id="@v0", staging_target_path=staging, target_path=target,
            volume_capability=cap(), readonly=True), 0),
        ("NodePublishVolume", "publish-ephemeral", pb.NodePublishVolumeRequest(
            volume_id="csi-0123", target_path=target, volume_capability=cap(),
            volume_context={"csi.storage.k8s.io/ephemeral": "true", "size": "64Mi"}), 0),
        ("NodeUnpublishVolume", "unpublish", pb.NodeUnpublishVolumeRequest(
            volume_id="@v0", target_path=target), 0),
        ("NodeGetCapabilities", "node-caps", pb.NodeGetCapabilitiesRequest(), 0),
        ("NodeGetInfo", "node-info", pb.NodeGetInfoRequest(), 0),
        ("NodeGetVolumeStats", "node-stats", pb.NodeGetVolumeStatsRequest(
            volume_id="@v0", volume_path=target), 0),
        ("NodeExpandVolume", "node-expand", pb.NodeExpandVolumeRequest(
            volume_id="@v0", volume_path=staging,
            capacity_range=pb.CapacityRange(required_bytes=3 * gi)), 0),
    ]
    for i, (method, name, req, fault) in enumerate(seeds):
        data = bytes([METHODS.index(method), fault]) + req.SerializeToString()
        write("csi", "%02d-%s" % (i, name), data)
    write("csi", "undecodable", bytes([METHODS.index("CreateVolume"), 0]) + b"\x0a\xff")


def undecodable_requests():
    """The request harness returns at once on what does not decode: its every input must."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
    import mh_wire  # the codec's twin in Python, at the same version

    bad = []
    d = os.path.join(CORPUS, "mh_request")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        try:
            mh_wire.decode(data)
        except Exception as e:  # noqa: BLE001 (any failure to decode is the finding)
            bad.append("mh_request/" + name)
            print("make_seeds: corpus/mh_request/%s does not decode: %s" % (name, e))
    return bad


def main():
    global stale
    if sys.argv[1:] == ["--check"]:
        # What CTest runs: the seeds made from the project's own headers and
        # texts alone (not the CSI ones, which need the generated module, nor
        # the superblock, which needs mkfs) are those checked in.
        stale = []
        for seeds in (mh_msg_seeds, mh_request_seeds, mh_client_seeds, supctl_seeds,
                      policy_seeds, mount_opts_seeds, mkfs_opts_seeds, dirname_seeds,
                      audit_line_seeds):
            seeds()
        for name in stale:
            print("make_seeds: corpus/%s is not what make_seeds.py writes" % name)
        stale += undecodable_requests()
        if stale:
            print("make_seeds: run /usr/bin/python3 tests/fuzz/make_seeds.py", file=sys.stderr)
        sys.exit(1 if stale else 0)
    mh_msg_seeds()
    mh_request_seeds()
    mh_client_seeds()
    supctl_seeds()
    policy_seeds()
    mount_opts_seeds()
    mkfs_opts_seeds()
    dirname_seeds()
    ext4_sb_seeds()
    audit_line_seeds()
    csi_seeds()


if __name__ == "__main__":
    main()
