"""The Python helper-protocol codec (mh_wire.py) against the wire format of
proto/mh_proto.h: known bytes, round trips of every type at typical values
and at the bounds, the encoder's refusals, the decoder's refusals (each the
C decoder's), and that any datagram the decoder accepts is exactly the
encoding of what it decoded (nothing is ignored or normalised). That the
helper agrees, field by field, is test_violations.py's first test.
"""
import random

import pytest

import mh_wire
from mh_wire import (F_ALL, HDR_LEN, ID_MAX, MSG_MAX, OPTS_MAX, PATH_MAX, REASON_MAX,
                     SRC_SNAPSHOT, SRC_VOLUME, E, Msg, T, WireError, decode, encode)

U64_MAX = (1 << 64) - 1


def samples():
    """Every type twice: typical values, then every field at its bound."""
    out = []
    for t, fields in mh_wire.FIELDS.items():
        typical, bound = {}, {}
        for name, kind in fields:
            if isinstance(kind, mh_wire._Str):
                typical[name] = "x-" + name
                bound[name] = "\u00e9" * (kind.bound // 2) + "z" * (kind.bound % 2)
            elif kind is mh_wire.FLAGS:
                typical[name], bound[name] = mh_wire.F_BLOCK, F_ALL
            elif kind is mh_wire.SRC:
                typical[name], bound[name] = SRC_SNAPSHOT, SRC_VOLUME
            elif kind is mh_wire.KIND:
                typical[name], bound[name] = E.REFUSED, E.PRECONDITION
            elif kind is mh_wire.LIST_WHAT:
                typical[name], bound[name] = mh_wire.LIST_IMAGES, mh_wire.LIST_MOUNTS
            elif kind is mh_wire.BOOL:
                typical[name], bound[name] = 0, 1
            elif kind is mh_wire.SMALL:
                typical[name], bound[name] = 1, 2
            elif kind is mh_wire.MEMBERS:
                typical[name], bound[name] = 2, mh_wire.GROUP_MAX
            elif kind is mh_wire.BLOCKS_WHAT:
                typical[name], bound[name] = mh_wire.BLOCKS_ALLOCATED, mh_wire.BLOCKS_DELTA
            elif kind is mh_wire.RANGES:
                typical[name] = ((4096, 8192),)
                bound[name] = ((U64_MAX, U64_MAX),) * mh_wire.BLOCKS_MAX
            else:
                typical[name], bound[name] = 42, (1 << (8 * kind.size)) - 1
        out.append(Msg(t, 7, **typical))
        out.append(Msg(t, 0xFFFFFFFF, **bound))
    return out


def test_known_bytes():
    assert encode(Msg(T.REQ_PING, 0x01020304)) == bytes.fromhex("0009 0001 01020304 00000000")
    assert encode(Msg(T.REQ_CREATE, 9, volume_id="ab", size_bytes=5)) == bytes.fromhex(
        "0009 0003 00000009 0000000c  0002 6162  0000000000000005")
    assert encode(Msg(T.ANS_ERROR, 1, kind=E.BUSY, sys_errno=16, reason="in use")) == \
        bytes.fromhex("0009 0064 00000001 00000010  00000004 00000010 0006") + b"in use"
    assert encode(Msg(T.REQ_UNSTAGE, 2, volume_id="v", staging_path="/s", flags=5)) == \
        bytes.fromhex("0009 0009 00000002 00000008  0001 76 0002 2f73 05")
    # A directory request: every field, empty ones as zero-length strings.
    assert encode(Msg(T.REQ_DIR_DELETE, 3, volume_id="v", base="/b", name="n", mode=2)) == \
        bytes.fromhex("0009 0021 00000003 00000021  0001 76 0002 2f62 0001 6e 0000 0000 00"
                      "0000 0000 0000000000000000 02 00 00000000")


def test_every_type_listed():
    assert set(mh_wire.FIELDS) == set(T)
    assert len(mh_wire.REQUESTS) == 27 and len(mh_wire.ANSWERS) == 28
    for t in mh_wire.REQUESTS:
        assert mh_wire.answer_type(t).name == "ANS_" + t.name[4:]


@pytest.mark.parametrize("msg", samples(), ids=lambda m: "%s-%d" % (m.type.name, m.id))
def test_round_trip(msg):
    data = encode(msg)
    assert len(data) <= MSG_MAX
    assert decode(data) == msg
    assert decode(bytearray(data)) == msg


def test_missing_fields_are_zero_and_unknown_ones_refused():
    m = Msg(T.REQ_STAGE, 1, volume_id="v")
    assert m.staging_path == "" and m.readonly == 0 and m.gid == 0
    with pytest.raises(TypeError):
        Msg(T.REQ_PING, 1, volume_id="v")
    with pytest.raises(ValueError):
        Msg(99, 1)


@pytest.mark.parametrize("msg", [
    Msg(T.REQ_DELETE, 1, volume_id="v" * (ID_MAX + 1)),
    Msg(T.REQ_DELETE, 1, volume_id="a\0b"),
    Msg(T.REQ_UNPUBLISH, 1, volume_id="v", target_path="/" * (PATH_MAX + 1)),
    Msg(T.REQ_STAGE, 1, mount_flags="o" * (OPTS_MAX + 1)),
    Msg(T.REQ_STAGE, 1, readonly=2),
    Msg(T.REQ_STAGE, 1, flags=F_ALL + 1),
    Msg(T.REQ_CLONE, 1, source_kind=0),
    Msg(T.REQ_CLONE, 1, source_kind=3),
    Msg(T.REQ_CREATE, 1, size_bytes=U64_MAX + 1),
    Msg(T.REQ_CREATE, 1, size_bytes=-1),
    Msg(T.ANS_ERROR, 1),  # kind OK
    Msg(T.ANS_ERROR, 1, kind=E.UNAVAILABLE),
    Msg(T.ANS_STATS, 1, message="m" * (REASON_MAX + 1)),
    Msg(T.REQ_PING, 1 << 32),
    Msg(T.REQ_BLOCKS, 1, what=0),
    Msg(T.REQ_BLOCKS, 1, what=3),
    Msg(T.ANS_BLOCKS, 1, ranges=((0, 1),) * (mh_wire.BLOCKS_MAX + 1)),
], ids=lambda m: m.type.name)
def test_encoder_refuses(msg):
    with pytest.raises(WireError):
        encode(msg)


def test_largest_message_fits():
    """Every field at its bound still fits MSG_MAX: no valid message is refused for size."""
    m = Msg(T.REQ_STAGE, 1, volume_id="v" * ID_MAX, staging_path="p" * PATH_MAX,
            fs_type="f" * 16, mount_flags="o" * OPTS_MAX, mkfs_options="m" * OPTS_MAX)
    assert len(encode(m)) < MSG_MAX
    assert decode(encode(m)) == m


PING = encode(Msg(T.REQ_PING, 1))
DELETE = encode(Msg(T.REQ_DELETE, 2, volume_id="sv-1"))


@pytest.mark.parametrize("data", [
    b"",
    PING[:HDR_LEN - 1],
    mh_wire.oversized(),
    mh_wire.with_version(PING, 1),
    mh_wire.with_version(PING, mh_wire.VERSION + 1),
    mh_wire.with_type(PING, 0),
    mh_wire.with_type(PING, 49),
    mh_wire.with_type(PING, 99),
    mh_wire.with_type(PING, 101),
    mh_wire.with_length(PING, 1),
    mh_wire.with_length(DELETE, len(DELETE) - HDR_LEN - 1),
    mh_wire.trailing(PING),
    mh_wire.trailing(DELETE, b"xyz"),
    mh_wire.truncated(DELETE),
    mh_wire.raw(T.REQ_DELETE, 3, mh_wire.Writer().str(b"sv-1", length=5).bytes()),
    mh_wire.raw(T.REQ_DELETE, 3, mh_wire.Writer().str(b"sv\x001").bytes()),
    mh_wire.raw(T.ANS_ERROR, 3, mh_wire.Writer().u32(0).u32(0).str("").bytes()),
    mh_wire.raw(T.ANS_ERROR, 3, mh_wire.Writer().u32(8).u32(0).str("").bytes()),
], ids=lambda d: d[:20].hex() or "empty")
def test_decoder_refuses(data):
    with pytest.raises(WireError):
        decode(data)


@pytest.mark.parametrize("kind", sorted(mh_wire.VIOLATIONS))
def test_each_violation_is_one(kind):
    """Each datagram is refused by the decoder, or is an answer (never a request)."""
    try:
        m = decode(mh_wire.VIOLATIONS[kind])
    except WireError:
        return
    assert m.type not in mh_wire.REQUESTS, kind


def test_accepted_means_canonical():
    """Mutations of valid datagrams (bytes changed, cut, added): whatever the
    decoder still accepts re-encodes to the very same bytes."""
    rng = random.Random(1)
    accepted = 0
    for msg in samples():
        data = encode(msg)
        for _ in range(40):
            b = bytearray(data)
            op = rng.randrange(3)
            if op == 0:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op == 1:
                del b[rng.randrange(len(b)):]
            else:
                b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
            try:
                m = decode(bytes(b))
            except WireError:
                continue
            accepted += 1
            assert encode(m) == bytes(b)
    print("mutations the decoder accepted: %d" % accepted)
    assert accepted > 0
