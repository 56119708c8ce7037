#!/usr/bin/env python3
"""gen_trace.py: writes a large simulator trace (docs/TRACE.md, format 1) to stdout, for testing
`rpma-sim trace --chrome` on traces far bigger than a test program makes.

  gen_trace.py burst N     N work requests in flight at once on one QP, as a program that posts
                           a whole send queue and then polls it makes: every post at the same
                           time; every 8th send unsignaled; completions polled in order
  gen_trace.py stagger N   N work requests whose slices all overlap partially (each is posted
                           later and completes later than the one before): the worst case of the
                           lane layout, one lane per work request
  gen_trace.py mixed N     small and varied, for comparing outputs: sends (signaled or not),
                           receives, SRQ receives, completions out of order, errors, polls out
                           of order, work requests never completed, completions never polled
"""
import random
import sys


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("burst", "stagger", "mixed"):
        sys.exit(__doc__)
    mode, n = sys.argv[1], int(sys.argv[2])
    lines = []
    seq = 0

    def event(time_ns, text):
        nonlocal seq
        seq += 1
        lines.append(f"{seq} {time_ns} {text}")

    event(0, "create_cq cq=1 cqe=65536 channel=1")
    event(0, "create_qp qp=17 id=1 send_cq=1 recv_cq=1 srq=0")
    event(0, "qp_state qp=17 state=IBV_QPS_RTS")
    if mode == "burst":
        signaled = []
        for i in range(n):
            sig = 0 if i % 8 == 7 else 1
            event(0, f"post_send qp=17 wr_id={i + 1:#x} opcode=IBV_WR_RDMA_WRITE len=64 "
                     f"signaled={sig}")
            if sig:
                ready = 1500 + 10 * i
                event(0, f"cqe cq=1 qp=17 wr_id={i + 1:#x} status=IBV_WC_SUCCESS "
                         f"opcode=IBV_WC_RDMA_WRITE byte_len=64 ready={ready}")
                signaled.append((i, ready))
        for i, ready in signaled:
            event(ready, f"wc cq=1 qp=17 wr_id={i + 1:#x} status=IBV_WC_SUCCESS "
                         f"opcode=IBV_WC_RDMA_WRITE byte_len=64")
    elif mode == "stagger":
        for i in range(n):
            ready = 10 * n + 10 * i + 1500
            event(10 * i, f"post_send qp=17 wr_id={i + 1:#x} opcode=IBV_WR_RDMA_READ len=8 "
                          f"signaled=1")
            event(10 * i, f"cqe cq=1 qp=17 wr_id={i + 1:#x} status=IBV_WC_SUCCESS "
                          f"opcode=IBV_WC_RDMA_READ byte_len=8 ready={ready}")
        for i in range(n):
            event(10 * n + 10 * i + 1500, f"wc cq=1 qp=17 wr_id={i + 1:#x} status=IBV_WC_SUCCESS "
                                          f"opcode=IBV_WC_RDMA_READ byte_len=8")
    else:
        rng = random.Random(n)  # the same N gives the same trace
        event(0, "create_cq cq=2 cqe=64 channel=0")
        event(0, "create_qp qp=18 id=2 send_cq=2 recv_cq=2 srq=1")
        event(0, "create_qp qp=19 id=3 send_cq=2 recv_cq=2 srq=1")
        now = 0
        pending_cqes = []  # (cq, qp, wr_id, status, opcode, byte_len)
        wr = 0
        for _ in range(n):
            now += rng.choice((0, 0, 7, 300))
            what = rng.random()
            wr += 1
            wr_id = f"{rng.choice((wr, wr, 5)):#x}"  # some wr_ids repeat
            if what < 0.45:
                sig = rng.choice((0, 1, 1))
                op = rng.choice(("RDMA_WRITE", "RDMA_READ", "SEND"))
                event(now, f"post_send qp=17 wr_id={wr_id} opcode=IBV_WR_{op} len=16 "
                           f"signaled={sig}")
                status = "IBV_WC_SUCCESS" if rng.random() < 0.9 else "IBV_WC_REM_ACCESS_ERR"
                if (sig or status != "IBV_WC_SUCCESS") and rng.random() < 0.85:
                    ready = now + rng.randrange(1500, 4000)
                    event(now, f"cqe cq=1 qp=17 wr_id={wr_id} status={status} opcode=IBV_WC_{op} "
                               f"byte_len=16 ready={ready}")
                    pending_cqes.append((1, 17, wr_id, status, f"IBV_WC_{op}", 16))
            elif what < 0.65:
                event(now, f"post_recv qp=17 wr_id={wr_id} len=64")
                if rng.random() < 0.7:
                    event(now, f"cqe cq=1 qp=17 wr_id={wr_id} status=IBV_WC_SUCCESS "
                               f"opcode=IBV_WC_RECV byte_len=20 ready={now + 2000}")
                    pending_cqes.append((1, 17, wr_id, "IBV_WC_SUCCESS", "IBV_WC_RECV", 20))
            elif what < 0.8:
                event(now, f"post_srq_recv srq=1 wr_id={wr_id} len=64")
                if rng.random() < 0.6:
                    qp = rng.choice((18, 19))
                    event(now, f"cqe cq=2 qp={qp} wr_id={wr_id} status=IBV_WC_SUCCESS "
                               f"opcode=IBV_WC_RECV byte_len=20 ready={now + 2500}")
                    pending_cqes.append((2, qp, wr_id, "IBV_WC_SUCCESS", "IBV_WC_RECV", 20))
            elif pending_cqes and rng.random() < 0.9:
                k = 0 if rng.random() < 0.7 else rng.randrange(len(pending_cqes))
                cq, qp, cqe_wr_id, status, op, byte_len = pending_cqes.pop(k)
                now += 2000
                event(now, f"wc cq={cq} qp={qp} wr_id={cqe_wr_id} status={status} opcode={op} "
                           f"byte_len={byte_len}")
            else:
                event(now, f"cq_arm cq=1 solicited_only=0")
    sys.stdout.write("softrpma-sim-trace 1\nseed 0x0000000000000001\nfaults -\n")
    sys.stdout.write("\n".join(lines))
    sys.stdout.write("\n")
    # No end line: the fingerprint is not worth computing here (the reader warns, and says so).


if __name__ == "__main__":
    main()
