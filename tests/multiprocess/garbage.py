#!/usr/bin/env python3
"""garbage.py FABRIC ADDR:PORT: connects to a simulated NIC's listener on the host fabric as a
hostile process would, and sends one malformed message per connection. Each must end that
connection (the listener closes it) and nothing else. Prints one line per case; exits 1 when
a connection was left open."""
import socket
import struct
import sys

MAGIC = 0x52504D31
HEADER = struct.Struct("=IHHIIQQQIi")  # wire.h: wire::Header
# wire.h: wire::ConnectBody up to its addresses (qp_num, srq, private_data_len,
# responder_resources, initiator_depth, pid, flow_control, retry_count, rnr_retry_count,
# reserved, probe_addr), then src, dst (two sockaddr_storage) and the private data.
CONNECT_HEAD = struct.Struct("=IBBBBiBBBBQ")
CONNECT_BODY_LEN = CONNECT_HEAD.size + 128 + 128 + 56


def header(type_, body_len, magic=MAGIC, length=0):
    return HEADER.pack(magic, type_, 0, body_len, 0, 0, 0, length, 0, 0)


def sockaddr_in(port):
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H4s", port, socket.inet_aton("127.0.0.1")) + bytes(120)


CASES = {
    "random bytes": bytes(range(256)) * 4,
    "bad magic": header(1, CONNECT_BODY_LEN, magic=0xDEADBEEF) + bytes(CONNECT_BODY_LEN),
    "unknown type": header(77, 0),
    "connect body of the wrong size": header(1, 10) + bytes(10),
    "connect body with a bad family": header(1, CONNECT_BODY_LEN) + bytes(CONNECT_BODY_LEN),
    "private data longer than the REQ carries": header(1, CONNECT_BODY_LEN)
    + CONNECT_HEAD.pack(17, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0) + sockaddr_in(1) + sockaddr_in(2) + bytes(56),
    "a request before any connection": header(16, 4) + b"evil",
    "a 4 GiB read": header(18, 0, length=1 << 32),
}


def main():
    fabric, where = sys.argv[1], sys.argv[2]
    name = b"\0softrpma/" + fabric.encode() + b"/" + where.encode()
    failures = 0
    for what, data in CASES.items():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(name)
        s.sendall(data)
        try:
            closed = s.recv(4096) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        except socket.timeout:
            closed = False
        s.close()
        print(f"garbage: {what}: {'closed' if closed else 'LEFT OPEN'}")
        failures += 0 if closed else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
