#!/usr/bin/env python3
"""Writes the seed corpus of //tests/multiprocess:fabric_listener_fuzzer (next to this file):
message sequences a peer sends the listener (simverbs/sim/fabric/wire.h, native layout), good
ones and garbage.py's bad ones. In data requests remote_addr is an offset into the target's
region and rkey 0 is its key, and a REQ's pid 0 is the fuzzer's true pid
(fabric_listener_fuzz.cc). Run it again after a wire change."""
import os
import socket
import struct

MAGIC = 0x52504D31
HEADER = struct.Struct("=IHHIIQQQIi")  # 48 bytes
REQ, REP, REJ, RTU, DREQ, DREP, QP_BIND = 1, 2, 3, 4, 5, 6, 7
WRITE, SEND, READ, ATOMIC, ACK, READ_RESPONSE = 16, 17, 18, 19, 32, 33
IMM, SOLICITED, CMA = 1, 2, 4


def header(type_, body_len=0, magic=MAGIC, flags=0, imm=0, seq=0, addr=0, length=0, rkey=0, status=0):
    return HEADER.pack(magic, type_, flags, body_len, imm, seq, addr, length, rkey, status)


def sockaddr_in(port, family=socket.AF_INET):
    return struct.pack("=H", family) + struct.pack("!H4s", port, socket.inet_aton("127.0.0.1")) + bytes(120)


def connect_body(pdata=b"", pdata_len=None, family=socket.AF_INET, pid=0):
    n = len(pdata) if pdata_len is None else pdata_len
    return (struct.pack("=IBBBBiIQ", 17, 0, n, 1, 1, pid, 0, 0) + sockaddr_in(40001, family)
            + sockaddr_in(7411, family) + pdata.ljust(56, b"\0"))


def req(pdata=b"", **kw):
    body = connect_body(pdata, **kw)
    return header(REQ, len(body)) + body


def qp_bind(version=1, dst_qp=0x11):
    # QpBindBody: version, src_qp_num, dst_qp_num, pid, src_gid[16], dst_gid[16] (48 bytes).
    gid = bytes(10) + b"\xff\xff\x7f\x00\x00\x01"
    body = struct.pack("=IIIi", version, 0x12, dst_qp, 1) + gid + gid
    return header(QP_BIND, len(body)) + body


def write(offset, data, **kw):
    return header(WRITE, len(data), addr=offset, seq=1, **kw) + data


CASES = {
    "req_rtu_dreq": req(b"hello") + header(RTU) + header(DREQ),
    # After its DREQ the peer still sends (the listener's QP stays RTS), then a DREP nobody asked for.
    "req_rtu_dreq_write_drep": req() + header(RTU) + header(DREQ) + write(0, b"late") + header(DREP),
    "drep_before_connection": header(DREP),
    "req_rejected_odd_pdata": req(b"\x01reject me") + header(RTU),
    "req_write_read_send": req(b"\x02") + header(RTU) + write(0, b"A" * 64)
    + header(READ, addr=0, length=64, seq=2) + header(SEND, 5, seq=3, flags=SOLICITED) + b"hello",
    "req_write_imm_atomic": req() + header(RTU) + write(128, b"imm!", flags=IMM, imm=7)
    + header(ATOMIC, 8, addr=256, seq=2) + struct.pack("=Q", 0x1122334455667788),
    "req_out_of_bounds": req() + header(RTU) + write(4090, b"0123456789")
    + header(READ, addr=8000, length=512, seq=2) + header(WRITE, 4, addr=0, rkey=1, seq=3) + b"bad!",
    "req_cma_not_offered": req() + header(RTU) + header(WRITE, 16, flags=CMA, length=8)
    + struct.pack("=QQ", 0x1000, 8),
    "req_unsolicited_responses": req() + header(RTU) + header(ACK, seq=9) + header(READ_RESPONSE, 4, seq=9) + b"resp",
    "req_twice": req() + req(),
    # Issue 18, attack 0: an atomic flagged for cross-memory attach, length 0, no valid key
    # (rkey 1), aimed at the region and at a wild address: it stored its word anywhere.
    "atomic_cma_no_length": req() + header(RTU) + header(ATOMIC, 8, flags=CMA, addr=256, rkey=1, seq=1)
    + struct.pack("=Q", 0x4141414141414141)
    + header(ATOMIC, 8, flags=CMA, addr=0xDEAD0000, rkey=1, seq=2) + struct.pack("=Q", 1),
    # Issue 18, attack 1: a REQ naming another process (pid 1 XOR ours), then data.
    "req_forged_pid": req(pid=1) + header(RTU) + write(0, b"as whom?"),
    "rep_rej_from_active_side": header(REP, 224) + bytes(224) + header(REJ, 149, status=28) + bytes(149),
    "random_bytes": bytes(range(256)) * 2,
    "bad_magic": header(REQ, 336, magic=0xDEADBEEF) + bytes(336),
    "unknown_type": header(77),
    "connect_body_wrong_size": header(REQ, 10) + bytes(10),
    "connect_body_bad_family": header(REQ, 336) + bytes(336),
    "private_data_too_long": req(pdata_len=200),
    "request_before_connection": header(WRITE, 4) + b"evil",
    "read_4_GiB": header(READ, length=1 << 32),
    # The listener allocated the 2 GiB a header announced before a byte of it came.
    "write_announcing_2_GiB": header(WRITE, 1 << 31) + b"only this",
    "header_cut_short": header(REQ, 336)[:20],
    # The first message to a QP endpoint (ibv_modify_qp's RTR), sent to a CM listener instead.
    "qp_bind_to_cm_listener": qp_bind() + write(0, b"bound?"),
    "req_rtu_qp_bind": req() + header(RTU) + qp_bind(version=9, dst_qp=0) + write(0, b"after"),
    "empty": b"",  # UBSan: the fabric thread bound a packed epoll_event field to a reference
}

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fabric_listener")
os.makedirs(here, exist_ok=True)
for name, data in CASES.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
