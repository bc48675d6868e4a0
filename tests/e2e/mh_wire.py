"""The helper wire protocol in Python, for tests that speak to the helper as
rpcd would, or as a compromised rpcd would: an encoder and a strict decoder of
every message type, field for field as proto/mh_proto.h defines them and
proto/mh_msg.c codes them, plus builders of malformed datagrams.

One message is one SOCK_SEQPACKET datagram: a 12-byte header

    u16 version (VERSION)   u16 type   u32 id   u32 length (payload bytes)

then the payload, all big-endian. A string is a u16 byte count and that many
bytes, no NUL, at most the field's bound. A boolean is one byte, 0 or 1; a
flag set is one byte with only the bits of F_ALL; a clone source is one byte,
SRC_SNAPSHOT or SRC_VOLUME; an error kind is a u32 from E.REFUSED to
E.PRECONDITION. decode() refuses what mh_msg_decode() refuses: a datagram
shorter than the header or longer than MSG_MAX, a wrong version, a length
field that disagrees with the datagram, an unknown type, a short or
out-of-range field, an over-long or NUL-holding string, bytes left over.

    m = Msg(T.REQ_CREATE, 5, volume_id="sv-...", size_bytes=1 << 30)
    data = encode(m)            # bytes; raises WireError where the C encoder fails
    decode(data) == m           # raises WireError where the C decoder fails

Strings are given as str (UTF-8) or bytes and decoded as str (UTF-8 with
surrogateescape, so any byte string survives a round trip).
"""
import enum
import struct

VERSION = 9
HDR_LEN = 12
MSG_MAX = 16384
ID_MAX = 64
PATH_MAX = 4095
FSTYPE_MAX = 16
OPTS_MAX = 4096
REASON_MAX = 255
LIST_TEXT_MAX = 12288
DIRNAME_MAX = 255
GROUP_MAX = 16
BLOCKS_MAX = 512
BLOCKS_ALLOCATED, BLOCKS_DELTA = 1, 2
DIR_DELETE, DIR_RETAIN, DIR_ARCHIVE = 0, 1, 2
LIST_IMAGES, LIST_SNAPSHOTS, LIST_MOUNTS = 1, 2, 3

F_BLOCK = 0x01
F_CREATE_DIR = 0x02
F_REMOVE_DIR = 0x04
F_MOUNT_GROUP = 0x08
F_ONE_NODE = 0x10
F_ALL = 0x1F

SRC_SNAPSHOT = 1
SRC_VOLUME = 2


class T(enum.IntEnum):
    """Message types (enum mh_type)."""
    REQ_PING = 1
    ANS_PING = 2
    REQ_CREATE = 3
    ANS_CREATE = 4
    REQ_DELETE = 5
    ANS_DELETE = 6
    REQ_STAGE = 7
    ANS_STAGE = 8
    REQ_UNSTAGE = 9
    ANS_UNSTAGE = 10
    REQ_PUBLISH = 11
    ANS_PUBLISH = 12
    REQ_UNPUBLISH = 13
    ANS_UNPUBLISH = 14
    REQ_RESIZE = 15
    ANS_RESIZE = 16
    REQ_SNAPSHOT = 17
    ANS_SNAPSHOT = 18
    REQ_DELETE_SNAPSHOT = 19
    ANS_DELETE_SNAPSHOT = 20
    REQ_CLONE = 21
    ANS_CLONE = 22
    REQ_CAPACITY = 23
    ANS_CAPACITY = 24
    REQ_EXPAND = 25
    ANS_EXPAND = 26
    REQ_STATS = 27
    ANS_STATS = 28
    REQ_LIST = 29
    ANS_LIST = 30
    REQ_DIR_CREATE = 31
    ANS_DIR_CREATE = 32
    REQ_DIR_DELETE = 33
    ANS_DIR_DELETE = 34
    REQ_DIR_EXPAND = 35
    ANS_DIR_EXPAND = 36
    REQ_DIR_PUBLISH = 37
    ANS_DIR_PUBLISH = 38
    REQ_DIR_UNPUBLISH = 39
    ANS_DIR_UNPUBLISH = 40
    REQ_DIR_STATS = 41
    ANS_DIR_STATS = 42
    REQ_DIR_CAPACITY = 43
    ANS_DIR_CAPACITY = 44
    REQ_DIR_SNAPSHOT = 45
    ANS_DIR_SNAPSHOT = 46
    REQ_DIR_DELETE_SNAPSHOT = 47
    ANS_DIR_DELETE_SNAPSHOT = 48
    REQ_PURGE = 49  # the helper's own, main loop to worker: from rpcd a violation
    ANS_PURGE = 50
    REQ_FREEZE = 51  # the capable core's own: from rpcd a violation
    ANS_FREEZE = 52
    REQ_THAW = 53
    ANS_THAW = 54
    REQ_REFRESH = 55
    ANS_REFRESH = 56
    REQ_ATTACHED = 57
    ANS_ATTACHED = 58
    REQ_STAGE_CHECK = 59
    ANS_STAGE_CHECK = 60
    REQ_FLUSH = 61
    ANS_FLUSH = 62
    REQ_GROUP_SNAPSHOT = 63
    ANS_GROUP_SNAPSHOT = 64
    REQ_BLOCKS = 65
    ANS_BLOCKS = 66
    REQ_DIR_NODE = 67
    ANS_DIR_NODE = 68
    ANS_ERROR = 100


class E(enum.IntEnum):
    """Error kinds of ANS_ERROR (enum mh_err_kind); OK and the client-side kinds (UNAVAILABLE,
    TIMEOUT) never cross the wire."""
    OK = 0
    REFUSED = 1
    NOTFOUND = 2
    EXISTS = 3
    BUSY = 4
    NOSPACE = 5
    FAILED = 6
    PRECONDITION = 7
    UNAVAILABLE = 8
    TIMEOUT = 9


class WireError(ValueError):
    """A message the C codec would not encode or would refuse to decode."""


# Field kinds: (name, check-and-size). Each kind knows its zero value and how
# to put and get itself; a string kind carries its bound.
class _Int:
    def __init__(self, size, valid=None, what="integer"):
        self.size, self.valid, self.what = size, valid, what
        self.zero = 0

    def put(self, w, name, v):
        if not isinstance(v, int) or v < 0 or v >= 1 << (8 * self.size):
            raise WireError("%s: %r is not a u%d" % (name, v, 8 * self.size))
        if self.valid and not self.valid(v):
            raise WireError("%s: %r is not a valid %s" % (name, v, self.what))
        w.uint(v, self.size)

    def get(self, r, name):
        v = r.uint(self.size, name)
        if self.valid and not self.valid(v):
            raise WireError("%s: %r is not a valid %s" % (name, v, self.what))
        return v


class _Str:
    def __init__(self, bound):
        self.bound = bound
        self.zero = ""

    def put(self, w, name, v):
        b = v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")
        if len(b) > self.bound or b"\0" in b:
            raise WireError("%s: %d bytes (bound %d) or a NUL" % (name, len(b), self.bound))
        w.str(b)

    def get(self, r, name):
        n = r.uint(2, name)
        if n > self.bound:
            raise WireError("%s: %d bytes, bound %d" % (name, n, self.bound))
        b = r.take(n, name)
        if b"\0" in b:
            raise WireError("%s: holds a NUL" % name)
        return b.decode("utf-8", "surrogateescape")


class _Ranges:
    """A u32 count (at most BLOCKS_MAX) and that many (offset, length) pairs of u64."""
    zero = ()

    def put(self, w, name, v):
        if len(v) > BLOCKS_MAX:
            raise WireError("%s: %d ranges, bound %d" % (name, len(v), BLOCKS_MAX))
        w.uint(len(v), 4)
        for off, n in v:
            w.uint(off, 8)
            w.uint(n, 8)

    def get(self, r, name):
        n = r.uint(4, name)
        if n > BLOCKS_MAX:
            raise WireError("%s: %d ranges, bound %d" % (name, n, BLOCKS_MAX))
        return tuple((r.uint(8, name), r.uint(8, name)) for _ in range(n))


U32 = _Int(4)
U64 = _Int(8)
BOOL = _Int(1, lambda v: v <= 1, "boolean (0 or 1)")
FLAGS = _Int(1, lambda v: v & ~F_ALL == 0, "flag set")
SRC = _Int(1, lambda v: v in (SRC_SNAPSHOT, SRC_VOLUME), "clone source")
KIND = _Int(4, lambda v: E.OK < v < E.UNAVAILABLE, "error kind")
SMALL = _Int(1, lambda v: v <= 2, "directory source kind or mode (0 to 2)")
LIST_WHAT = _Int(4, lambda v: LIST_IMAGES <= v <= LIST_MOUNTS, "list kind")
ID = _Str(ID_MAX)
PATH = _Str(PATH_MAX)
FSTYPE = _Str(FSTYPE_MAX)
OPTS = _Str(OPTS_MAX)
REASON = _Str(REASON_MAX)
DIRNAME = _Str(DIRNAME_MAX)
BLOCKS_WHAT = _Int(4, lambda v: BLOCKS_ALLOCATED <= v <= BLOCKS_DELTA, "blocks kind")
RANGES = _Ranges()
MEMBERS = _Int(4, lambda v: 2 <= v <= GROUP_MAX, "member count (2 to %d)" % GROUP_MAX)

_CREATE_ANS = (("size_bytes", U64),)
_COPY_ANS = (("size_bytes", U64), ("reflinked", BOOL))
_STAGE_REQ = (("volume_id", ID), ("staging_path", PATH), ("fs_type", FSTYPE),
              ("mount_flags", OPTS), ("mkfs_options", OPTS), ("readonly", BOOL),
              ("flags", FLAGS), ("gid", U32))
_CAPACITY_ANS = (("available_bytes", U64), ("total_bytes", U64), ("max_volume_bytes", U64),
                 ("reflink", BOOL), ("quota", BOOL), ("direct_io", BOOL),
                 ("shared", BOOL))
_STATS_ANS = (("bytes_total", U64), ("bytes_available", U64), ("bytes_used", U64),
              ("inodes_total", U64), ("inodes_free", U64), ("inodes_used", U64),
              ("abnormal", BOOL), ("message", REASON))
# Every directory-volume request has this one shape (struct mh_req_dir).
_DIR_REQ = (("volume_id", ID), ("base", PATH), ("name", DIRNAME), ("path", PATH),
            ("snapshot_id", ID), ("source_kind", SMALL), ("source_id", ID),
            ("source_name", DIRNAME), ("size_bytes", U64), ("mode", SMALL), ("flags", FLAGS),
            ("gid", U32))
_DIR_ANS = (("size_bytes", U64), ("quota", BOOL), ("reflinked", BOOL))
# GROUP_SNAPSHOT: member i as volume_id_<i> and snapshot_id_<i>, every slot present.
_GROUP_REQ = (("n", MEMBERS),) + tuple(
    f for i in range(GROUP_MAX) for f in (("volume_id_%d" % i, ID), ("snapshot_id_%d" % i, ID)))
_GROUP_ANS = tuple(("size_bytes_%d" % i, U64) for i in range(GROUP_MAX)) + (
    ("reflinked", BOOL),)

# Every type and its payload, in wire order (the table in proto/mh_msg.c).
FIELDS = {
    T.REQ_PING: (),
    T.ANS_PING: (),
    T.REQ_CREATE: (("volume_id", ID), ("size_bytes", U64)),
    T.ANS_CREATE: _CREATE_ANS,
    T.REQ_DELETE: (("volume_id", ID),),
    T.ANS_DELETE: (),
    T.REQ_STAGE: _STAGE_REQ,
    T.ANS_STAGE: (),
    T.REQ_UNSTAGE: (("volume_id", ID), ("staging_path", PATH), ("flags", FLAGS)),
    T.ANS_UNSTAGE: (),
    T.REQ_PUBLISH: (("volume_id", ID), ("staging_path", PATH), ("target_path", PATH),
                    ("readonly", BOOL), ("flags", FLAGS)),
    T.ANS_PUBLISH: (),
    T.REQ_UNPUBLISH: (("volume_id", ID), ("target_path", PATH)),
    T.ANS_UNPUBLISH: (),
    T.REQ_RESIZE: (("volume_id", ID), ("size_bytes", U64)),
    T.ANS_RESIZE: _CREATE_ANS,
    T.REQ_SNAPSHOT: (("snapshot_id", ID), ("volume_id", ID)),
    T.ANS_SNAPSHOT: _COPY_ANS,
    T.REQ_DELETE_SNAPSHOT: (("snapshot_id", ID),),
    T.ANS_DELETE_SNAPSHOT: (),
    T.REQ_CLONE: (("volume_id", ID), ("source_kind", SRC), ("source_id", ID),
                  ("size_bytes", U64)),
    T.ANS_CLONE: _COPY_ANS,
    T.REQ_CAPACITY: (),
    T.ANS_CAPACITY: _CAPACITY_ANS,
    T.REQ_EXPAND: (("volume_id", ID), ("staging_path", PATH), ("fs_type", FSTYPE),
                   ("flags", FLAGS)),
    T.ANS_EXPAND: _CREATE_ANS,
    T.REQ_STATS: (("volume_id", ID), ("path", PATH), ("flags", FLAGS)),
    T.ANS_STATS: _STATS_ANS,
    T.REQ_LIST: (("what", LIST_WHAT), ("after", ID)),
    T.ANS_LIST: (("more", BOOL), ("text", _Str(LIST_TEXT_MAX))),
    T.REQ_DIR_CREATE: _DIR_REQ,
    T.ANS_DIR_CREATE: _DIR_ANS,
    T.REQ_DIR_DELETE: _DIR_REQ,
    T.ANS_DIR_DELETE: (),
    T.REQ_DIR_EXPAND: _DIR_REQ,
    T.ANS_DIR_EXPAND: _DIR_ANS,
    T.REQ_DIR_PUBLISH: _DIR_REQ,
    T.ANS_DIR_PUBLISH: (),
    T.REQ_DIR_UNPUBLISH: _DIR_REQ,
    T.ANS_DIR_UNPUBLISH: (),
    T.REQ_DIR_STATS: _DIR_REQ,
    T.ANS_DIR_STATS: _STATS_ANS,
    T.REQ_DIR_CAPACITY: _DIR_REQ,
    T.ANS_DIR_CAPACITY: _CAPACITY_ANS,
    T.REQ_DIR_SNAPSHOT: _DIR_REQ,
    T.ANS_DIR_SNAPSHOT: _COPY_ANS,
    T.REQ_DIR_DELETE_SNAPSHOT: _DIR_REQ,
    T.ANS_DIR_DELETE_SNAPSHOT: (),
    T.REQ_PURGE: _DIR_REQ,
    T.ANS_PURGE: (),
    T.REQ_FREEZE: (("volume_id", ID), ("seconds", U32)),
    T.ANS_FREEZE: (),
    T.REQ_THAW: (("volume_id", ID),),
    T.ANS_THAW: (),
    T.REQ_REFRESH: (("volume_id", ID),),
    T.ANS_REFRESH: (("size_bytes", U64),),
    T.REQ_ATTACHED: (("volume_id", ID),),
    T.ANS_ATTACHED: (("devices", U32),),
    T.REQ_STAGE_CHECK: _STAGE_REQ,
    T.ANS_STAGE_CHECK: (),
    T.REQ_FLUSH: (("volume_id", ID),),
    T.ANS_FLUSH: (),
    T.REQ_GROUP_SNAPSHOT: _GROUP_REQ,
    T.ANS_GROUP_SNAPSHOT: _GROUP_ANS,
    T.REQ_BLOCKS: (("what", BLOCKS_WHAT), ("snapshot_id", ID), ("base_id", ID), ("offset", U64)),
    T.ANS_BLOCKS: (("size_bytes", U64), ("next", U64), ("ranges", RANGES)),
    T.REQ_DIR_NODE: _DIR_REQ,
    T.ANS_DIR_NODE: (),
    T.ANS_ERROR: (("kind", KIND), ("sys_errno", U32), ("reason", REASON)),
}

# Never between rpcd and the helper: the helper's own, and the capable core's.
INTERNAL = (T.REQ_PURGE, T.ANS_PURGE, T.REQ_FREEZE, T.ANS_FREEZE, T.REQ_THAW, T.ANS_THAW,
            T.REQ_REFRESH, T.ANS_REFRESH, T.REQ_ATTACHED, T.ANS_ATTACHED, T.REQ_STAGE_CHECK,
            T.ANS_STAGE_CHECK, T.REQ_FLUSH, T.ANS_FLUSH)
REQUESTS = tuple(t for t in T if t.name.startswith("REQ_") and t not in INTERNAL)
ANSWERS = tuple(t for t in T if t.name.startswith("ANS_") and t not in INTERNAL)


def answer_type(req_type):
    """The answer type of a request type (ANS_ERROR may answer any request)."""
    return T(req_type + 1)


class Msg:
    """One message: type, id, and the payload fields by name (missing ones are zero)."""

    def __init__(self, type, id=0, **fields):
        self.type = T(type)
        self.id = id
        names = [n for n, _ in FIELDS[self.type]]
        unknown = set(fields) - set(names)
        if unknown:
            raise TypeError("%s has no field %s" % (self.type.name, ", ".join(sorted(unknown))))
        self.fields = {n: fields.get(n, k.zero) for n, k in FIELDS[self.type]}

    def __getattr__(self, name):
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other):
        return (isinstance(other, Msg) and (self.type, self.id, self.fields) ==
                (other.type, other.id, other.fields))

    def __repr__(self):
        f = "".join(", %s=%r" % kv for kv in self.fields.items())
        return "Msg(%s, %d%s)" % (self.type.name, self.id, f)


class Writer:
    """Unchecked big-endian writer: also for building payloads the codec would refuse."""

    def __init__(self):
        self.buf = bytearray()

    def uint(self, v, size):
        self.buf += v.to_bytes(size, "big")
        return self

    def u8(self, v):
        return self.uint(v, 1)

    def u16(self, v):
        return self.uint(v, 2)

    def u32(self, v):
        return self.uint(v, 4)

    def u64(self, v):
        return self.uint(v, 8)

    def str(self, b, length=None):
        """A u16 length (len(b) unless given: a lie is a malformed string) and the bytes."""
        if isinstance(b, str):
            b = b.encode("utf-8", "surrogateescape")
        return self.u16(len(b) if length is None else length).raw(b)

    def raw(self, b):
        self.buf += b
        return self

    def bytes(self):
        return bytes(self.buf)


class _Reader:
    def __init__(self, data):
        self.data, self.off = data, 0

    def take(self, n, name):
        if n > len(self.data) - self.off:
            raise WireError("%s: short (%d bytes wanted, %d left)" %
                            (name, n, len(self.data) - self.off))
        b = self.data[self.off:self.off + n]
        self.off += n
        return b

    def uint(self, size, name):
        return int.from_bytes(self.take(size, name), "big")


def header(type, id, length, version=VERSION):
    """A 12-byte header with any values (nothing is checked)."""
    return struct.pack(">HHII", version, int(type), id, length)


def payload(msg):
    """The payload bytes of msg, checked field by field as the C encoder does."""
    w = Writer()
    for name, kind in FIELDS[msg.type]:
        kind.put(w, name, msg.fields[name])
    return w.bytes()


def encode(msg):
    """The datagram of msg; WireError where mh_msg_encode() fails."""
    if not 0 <= msg.id <= 0xFFFFFFFF:
        raise WireError("id %r is not a u32" % msg.id)
    p = payload(msg)
    if HDR_LEN + len(p) > MSG_MAX:
        raise WireError("%d bytes: longer than MSG_MAX" % (HDR_LEN + len(p)))
    return header(msg.type, msg.id, len(p)) + p


def decode(data):
    """The message in one whole datagram; WireError where mh_msg_decode() fails."""
    data = bytes(data)
    if len(data) < HDR_LEN or len(data) > MSG_MAX:
        raise WireError("datagram of %d bytes (header %d, at most %d)" %
                        (len(data), HDR_LEN, MSG_MAX))
    version, type_, id_, length = struct.unpack(">HHII", data[:HDR_LEN])
    if version != VERSION:
        raise WireError("version %d, not %d" % (version, VERSION))
    if length != len(data) - HDR_LEN:
        raise WireError("length field %d, payload %d" % (length, len(data) - HDR_LEN))
    try:
        t = T(type_)
    except ValueError:
        raise WireError("unknown type %d" % type_) from None
    r = _Reader(data)
    r.off = HDR_LEN
    fields = {name: kind.get(r, name) for name, kind in FIELDS[t]}
    if r.off != len(data):
        raise WireError("%d bytes left over" % (len(data) - r.off))
    return Msg(t, id_, **fields)


# ---- malformed datagrams, each one a protocol violation for the helper ----

def raw(type, id, body, version=VERSION):
    """A header whose length field agrees with body, then body (any bytes)."""
    return header(type, id, len(body), version) + bytes(body)


def with_version(data, version):
    """data with another protocol version."""
    return struct.pack(">H", version) + bytes(data[2:])


def with_type(data, type):
    """data with another type (an unknown one, or an answer type as a request)."""
    return bytes(data[:2]) + struct.pack(">H", int(type)) + bytes(data[4:])


def with_length(data, length):
    """data with a length field that says length (disagreeing with the datagram)."""
    return bytes(data[:8]) + struct.pack(">I", length) + bytes(data[12:])


def trailing(data, extra=b"\0"):
    """data with bytes after its last field; the length field counts them."""
    body = bytes(data[HDR_LEN:]) + extra
    return with_length(bytes(data[:HDR_LEN]) + body, len(body))


def truncated(data, n=1):
    """data without its last n bytes; the length field agrees (a field is short)."""
    body = bytes(data[HDR_LEN:len(data) - n])
    return with_length(bytes(data[:HDR_LEN]) + body, len(body))


def oversized(n=MSG_MAX + 1):
    """A PING header and zero padding: n bytes in all, the length field agreeing."""
    return raw(T.REQ_PING, 0, bytes(n - HDR_LEN))


EMPTY = b""
GARBAGE = b"hello, helper"

# One datagram per kind of violation (name -> bytes), for tests that go through all.
VIOLATIONS = {
    "empty": EMPTY,
    "oversized": oversized(),
    "undecodable": GARBAGE,
    "short header": encode(Msg(T.REQ_PING, 1))[:HDR_LEN - 1],
    "wrong version": with_version(encode(Msg(T.REQ_PING, 2)), VERSION + 1),
    "unknown type": raw(77, 3, b""),
    "the helper's own request": encode(Msg(T.REQ_PURGE, 13, base="/b",
                                           volume_id="sv-" + "0" * 32)),
    "answer as request": encode(Msg(T.ANS_PING, 4)),
    "error answer as request": encode(Msg(T.ANS_ERROR, 5, kind=E.FAILED, reason="x")),
    "trailing bytes": trailing(encode(Msg(T.REQ_PING, 6))),
    "length disagrees": with_length(encode(Msg(T.REQ_PING, 7)), 1),
    "short field": truncated(encode(Msg(T.REQ_DELETE, 8, volume_id="sv-0"))),
    "NUL in string": raw(T.REQ_DELETE, 9, Writer().str(b"sv\0x").bytes()),
    "over-long string": raw(T.REQ_DELETE, 10, Writer().str(b"v" * (ID_MAX + 1)).bytes()),
    "bad boolean": raw(T.REQ_PUBLISH, 11, Writer().str("v").str("/s").str("/t")
                       .u8(2).u8(0).bytes()),
    "unknown flag": raw(T.REQ_UNSTAGE, 12, Writer().str("v").str("/s").u8(F_ALL + 1).bytes()),
}
