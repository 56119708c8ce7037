#!/usr/bin/env python3
"""Writes the seed corpus of //tests/multiprocess:fabric_conversation_fuzzer (next to this
file): scripts of whole conversations, in the step encoding of fabric_conversation_fuzz.cc
(each step an opcode byte, then its fields in the order the fuzzer reads them). Byte 0: even,
the fuzzer is the server of a real librpma client; odd, it is the client(s) of a real librpma
listener. Run it again after a change of the encoding."""
import os
import struct


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


RIGHT = u8(0)  # PickLength: the right length


# ---- Hostile server steps (ServerStep) ----

def accept(qp=0x51, pdlen=0, pid_sel=0, can_reach=0, probe_sel=1, flags=0, status=0, length=RIGHT):
    # pid_sel 0: ours, 1: 0, 2: a raw one; probe_sel 0: the client's own probe word, 1: none,
    # 2: a raw address.
    out = u8(0) + u32(qp) + u8(pdlen) + u8(1) + u8(1) + u8(0) + u8(pid_sel)
    if pid_sel == 2:
        out += u32(0x7FFFFFF0)
    out += u8(can_reach) + u8(probe_sel)
    if probe_sel == 2:
        out += u64(0x10)
    return out + bytes(196) + u16(flags) + u32(status) + length


def reject(pdlen=0, status=28):
    return u8(1) + u8(pdlen) + u32(status)


def no_body(op, flags=0):  # 2 RTU, 3 DREQ, 4 DREP
    return u8(op) + u16(flags)


def ack(which=0, raw_seq=None, status=None, flags=0):
    out = u8(5) + (u8(0xF0) + u64(raw_seq) if raw_seq is not None else u8(which))
    out += u8(1) if status is None else u8(0) + u32(status)
    return out + u16(flags)


def read_response(which=0, cma=False, length=RIGHT, fill=0x77):
    out = u8(6) + u8(which) + u8(1) + u8(0 if cma else 1)
    if not cma:
        out += length
    return out + u8(fill)


def server_request(kind, rkey_right=True, offset=0, flags=0, length=8, fill=0x33, segments=()):
    out = u8(7) + u8(kind) + u8(1 if rkey_right else 0)
    if not rkey_right:
        out += u32(0xBADBAD)
    out += u16(offset) + u32(0) + u8(flags)
    if flags & 4 and kind != 3:
        out += u8(len(segments) - 1)
        for addr, seg_len in segments:
            out += (u8(1) + u16(addr)) if addr is not None else (u8(0) + u64(0xDEAD0000))
            out += u16(seg_len)
    elif kind == 2:
        out += u16(length)
    elif kind == 3:
        out += u8(fill)
    else:
        out += u16(length) + u8(fill)
    return out


def announce(kind=0, body_len=1 << 30, seq=1, sent=100):
    return u8(9) + u8(kind) + u32(body_len) + u8(seq) + u16(sent)


def post(what, dst=0, src=0, length=8, always=True):  # 0 write 1 read 2 send 3 recv 4 flush 5 atomic
    return u8(10) + u8(what) + u16(dst) + u16(src) + u16(length) + u8(0 if always else 1)


POLL, EVENTS, HANG_UP, DISCONNECT = u8(11), u8(12), u8(14), u8(15)


def pump(ms=19):
    return u8(13) + u8(ms)


def server_script(steps, pdata=b""):
    return u8(0) + u8(len(pdata)) + pdata + b"".join(steps)


# ---- Hostile client steps (ClientStep) ----

def dial(slot):
    return u8(0) + u8(slot)


def template(slot, k, fields=b"", flags=None, status=None, seq=0, rkey_right=True, offset=0,
             body_len=None):
    out = u8(1) + u8(slot) + u8(k) + fields
    out += u8(1) if flags is None else u8(0) + u16(flags)
    out += u8(1) if status is None else u8(0) + u32(status)
    out += u8(seq)
    if 5 <= k <= 8:
        out += u8(1) if rkey_right else u8(0) + u32(0xBADBAD)
        out += u16(offset)
    out += u8(1) if body_len is None else u8(0) + body_len
    return out


def req_fields(pdata=b"", pid_sel=0, probe_sel=0):
    return (u8(0) + u8(len(pdata)) + pdata.ljust(56, b"\0") + u8(0) + u8(pid_sel)
            + u8(probe_sel) + u8(1))


def read_back(slot, ms=19):
    return u8(3) + u8(slot) + u8(ms)


def hang_up(slot, both=False):
    return u8(4) + u8(slot) + u8(1 if both else 0)


def serve(accept_it=True):
    return u8(5) + u8(0) + u8(1 if accept_it else 0)


def server_events():
    return u8(6) + u8(0)


def listener_acts(conn, what, offset=0, length=8):  # 0 write 1 read 2 send 3 disconnect
    return u8(7) + u8(0) + u8(conn) + u8(what) + u16(offset) + u16(length)


def client_script(steps):
    return u8(1) + b"".join(steps)


SEEDS = {
    # A client's REQ accepted, its write acknowledged, its read answered, its flush too.
    "server_good_write_read_flush": server_script([
        pump(), accept(), EVENTS, post(0), post(1, length=16), post(4), pump(), ack(),
        pump(), read_response(), pump(), read_response(), POLL, POLL]),
    "server_rejects": server_script([pump(), reject(), EVENTS, post(0)], pdata=b"hello"),
    # Responses that do not fit: a write answered with a read response, a read response of
    # the wrong length, an ack of a seq never sent, an error status.
    "server_wrong_responses": server_script([
        pump(), accept(), EVENTS, post(0), post(1, length=64), pump(), read_response(),
        read_response(length=u8(4)), ack(raw_seq=12345), ack(status=9),
        POLL]),
    # A read answered with kFlagCma although it was not sent that way (no data comes).
    "server_read_response_cma_flag": server_script([
        pump(), accept(), EVENTS, post(1, length=32), pump(), read_response(cma=True), POLL]),
    # The server writes into, sends to and reads from the client's region, right and wrong
    # rkey, and by cross-memory attach with a good and a bad segment.
    "server_requests_toward_client": server_script([
        pump(), accept(can_reach=1, probe_sel=0), EVENTS, post(3, length=64),
        server_request(0, offset=8), server_request(1, length=16), server_request(2, length=32),
        server_request(0, rkey_right=False), server_request(3),
        server_request(0, flags=4, segments=[(0, 64), (None, 16)]), pump(), POLL]),
    "server_accept_then_dreq": server_script([
        pump(), accept(), EVENTS, no_body(3), EVENTS, post(0), POLL, DISCONNECT]),
    "server_accept_wrong_size": server_script([pump(), accept(length=u8(4)), EVENTS]),
    "server_accept_bad_fields": server_script([
        pump(), accept(qp=0, pdlen=250, pid_sel=2, can_reach=1, probe_sel=2), EVENTS]),
    # Half a 1 GiB body, then the server hangs up.
    "server_announces_1_GiB": server_script([
        pump(), accept(), EVENTS, post(1), announce(), HANG_UP, EVENTS]),
    "server_rtu_and_drep_to_client": server_script([
        pump(), no_body(2, flags=4), no_body(4), accept(), no_body(2), EVENTS]),
    # Two clients: one accepted, one rejected; the accepted one writes, sends, reads and
    # disconnects; the other hangs up.
    "client_two_connections": client_script([
        dial(0), dial(1), template(0, 0, req_fields()), serve(), read_back(0),
        template(0, 1), template(1, 0, req_fields(b"\x01")), serve(accept_it=False),
        read_back(1), template(0, 5, u16(16) + u8(0xAB)), template(0, 6, u16(8) + u8(0xCD)),
        template(0, 7, u16(32)), template(0, 8, u8(0xEF)), read_back(0), hang_up(1),
        server_events(), template(0, 2), read_back(0)]),
    # The listener writes and reads toward its client, which acks and answers.
    "client_answers_listener": client_script([
        dial(0), template(0, 0, req_fields()), serve(), read_back(0), template(0, 1),
        server_events(), listener_acts(0, 0), listener_acts(0, 1), read_back(0),
        template(0, 9), template(0, 10, RIGHT), server_events(), listener_acts(0, 3),
        read_back(0), template(0, 3)]),
    # A QP bind, data before any REQ, a REQ with a bad family and too much private data.
    "client_out_of_order": client_script([
        dial(0), template(0, 4, u32(0x11) + u32(0x12)), template(0, 5, u16(8) + u8(1)),
        dial(1), template(1, 1), template(1, 0, u8(0) + u8(63) + bytes(56) + u8(0) + u8(0)
                                          + u8(0) + u8(0) + u8(0)),
        read_back(0), read_back(1), serve(), dial(2),
        template(2, 0, req_fields(pid_sel=1, probe_sel=1)), serve(), read_back(2),
        template(2, 7, u16(4096), body_len=u8(5) + u16(100)), hang_up(2, both=True)]),
}


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fabric_conversation")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
