#include "tools/shm_baseline.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace softrpma::bench {
namespace {

constexpr size_t kBig = size_t{1} << 20;
constexpr int kWindow = 16;
// The registered buffer: [0, 8) the ping-pong slot the peer writes, [8, 16) what this side
// writes into the peer's, [64, 72) the "done" flag, [128, 136) its source, [4096, 4096 + kBig)
// the streams' target (and source).
constexpr size_t kSlot = 0;
constexpr size_t kSlotSource = 8;
constexpr size_t kDone = 64;
constexpr size_t kDoneSource = 128;
constexpr size_t kData = 4096;
constexpr size_t kBufferBytes = kData + kBig;

// What one process tells the other.
struct Card {
  uint64_t base;  // the buffer's address (FI_MR_VIRT_ADDR)
  uint64_t key;
  size_t addr_len;
  uint8_t addr[64];
};

struct Side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_ep* ep = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_mr* mr = nullptr;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kBufferBytes, 0);
  fi_addr_t peer = 0;
  Card peer_card{};
  uint64_t completions = 0;  // read from the CQ so far, by whichever call read them
  uint64_t writes = 0;       // posted so far (each asks for a completion)
  std::string error;

  bool Fail(const char* what, int ret) {
    error = std::string(what) + ": " + fi_strerror(-ret);
    return false;
  }

  bool Open() {
    fi_info* hints = fi_allocinfo();
    if (hints == nullptr) return Fail("fi_allocinfo", -FI_ENOMEM);
    hints->caps = FI_MSG | FI_RMA;
    hints->ep_attr->type = FI_EP_RDM;
    hints->fabric_attr->prov_name = strdup("shm");
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    int ret = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (ret != 0) return Fail("fi_getinfo(shm)", ret);
    if ((ret = fi_fabric(info->fabric_attr, &fabric, nullptr)) != 0) return Fail("fi_fabric", ret);
    if ((ret = fi_domain(fabric, info, &domain, nullptr)) != 0) return Fail("fi_domain", ret);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = 128;
    if ((ret = fi_cq_open(domain, &cq_attr, &cq, nullptr)) != 0) return Fail("fi_cq_open", ret);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if ((ret = fi_av_open(domain, &av_attr, &av, nullptr)) != 0) return Fail("fi_av_open", ret);
    if ((ret = fi_endpoint(domain, info, &ep, nullptr)) != 0) return Fail("fi_endpoint", ret);
    if ((ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) != 0) return Fail("bind cq", ret);
    if ((ret = fi_ep_bind(ep, &av->fid, 0)) != 0) return Fail("bind av", ret);
    if ((ret = fi_enable(ep)) != 0) return Fail("fi_enable", ret);
    ret = fi_mr_reg(domain, buffer.data(), buffer.size(),
                    FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr);
    if (ret != 0) return Fail("fi_mr_reg", ret);
    if ((info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
      if ((ret = fi_mr_bind(mr, &ep->fid, 0)) != 0) return Fail("fi_mr_bind", ret);
      if ((ret = fi_mr_enable(mr)) != 0) return Fail("fi_mr_enable", ret);
    }
    return true;
  }

  Card MyCard() {
    Card card{};
    card.base = reinterpret_cast<uintptr_t>(buffer.data());
    card.key = fi_mr_key(mr);
    card.addr_len = sizeof(card.addr);
    if (fi_getname(&ep->fid, card.addr, &card.addr_len) != 0) card.addr_len = 0;
    return card;
  }

  bool Meet(const Card& card) {
    peer_card = card;
    const int n = fi_av_insert(av, card.addr, 1, &peer, 0, nullptr);
    return n == 1 || Fail("fi_av_insert", n < 0 ? n : -FI_EINVAL);
  }

  // Drives progress and counts the completions read; a negative error, or 0.
  int Progress() {
    fi_cq_entry entries[kWindow];
    const ssize_t n = fi_cq_read(cq, entries, kWindow);
    if (n == -FI_EAGAIN) return 0;
    if (n < 0) return static_cast<int>(n);
    completions += static_cast<uint64_t>(n);
    return 0;
  }

  volatile uint64_t* Word(size_t offset) {
    return reinterpret_cast<volatile uint64_t*>(buffer.data() + offset);
  }

  // One write of `length` bytes from `from` of this buffer to `to` of the peer's; retried while
  // the provider is busy. Returns false on an error.
  bool Write(size_t from, size_t to, size_t length) {
    while (true) {
      const ssize_t ret = fi_write(ep, buffer.data() + from, length, fi_mr_desc(mr), peer,
                                   peer_card.base + to, peer_card.key, nullptr);
      if (ret == 0) return ++writes, true;
      if (ret != -FI_EAGAIN) return Fail("fi_write", static_cast<int>(ret));
      if (Progress() < 0) return Fail("fi_cq_read", -FI_EIO);
    }
  }

  // Waits (progressing) until the word at `offset` holds `value`.
  void AwaitWord(size_t offset, uint64_t value) {
    while (*Word(offset) != value) Progress();
  }

  // `count` writes of `length` bytes, kWindow in flight. Seconds.
  double Stream(int count, size_t length) {
    const auto start = std::chrono::steady_clock::now();
    const uint64_t base = completions;  // (a Write's retry may read completions too)
    uint64_t posted = 0;
    while (completions - base < static_cast<uint64_t>(count)) {
      if (posted < static_cast<uint64_t>(count) && posted - (completions - base) < kWindow) {
        if (!Write(kData, kData, length)) return 0;
        ++posted;
      } else if (const int err = Progress(); err < 0) {
        return Fail("fi_cq_read", err), 0;
      }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // `count` 8-byte writes, one at a time, each waited for until its completion says that its
  // data is in the target's memory (FI_DELIVERY_COMPLETE). Microseconds a write.
  double DeliveredWrites(int count) {
    // Every earlier write's completion first: each write here then waits for its own.
    while (completions < writes) {
      if (const int err = Progress(); err < 0) return Fail("fi_cq_read", err), 0;
    }
    void* desc = fi_mr_desc(mr);
    iovec iov{buffer.data() + kData, sizeof(uint64_t)};
    fi_rma_iov rma{peer_card.base + kData, sizeof(uint64_t), peer_card.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = peer;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
      while (true) {
        const ssize_t ret = fi_writemsg(ep, &msg, FI_DELIVERY_COMPLETE);
        if (ret == 0) break;
        if (ret != -FI_EAGAIN) {
          return Fail("fi_writemsg(FI_DELIVERY_COMPLETE)", static_cast<int>(ret)), 0;
        }
        if (const int err = Progress(); err < 0) return Fail("fi_cq_read", err), 0;
      }
      ++writes;
      while (completions < writes) {
        if (const int err = Progress(); err < 0) return Fail("fi_cq_read", err), 0;
      }
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() /
           count;
  }

  ~Side() {
    if (mr != nullptr) fi_close(&mr->fid);
    if (ep != nullptr) fi_close(&ep->fid);
    if (av != nullptr) fi_close(&av->fid);
    if (cq != nullptr) fi_close(&cq->fid);
    if (domain != nullptr) fi_close(&domain->fid);
    if (fabric != nullptr) fi_close(&fabric->fid);
    if (info != nullptr) fi_freeinfo(info);
  }
};

bool WriteAll(int fd, const void* data, size_t length) {
  return write(fd, data, length) == static_cast<ssize_t>(length);
}
bool ReadAll(int fd, void* data, size_t length) {
  size_t got = 0;
  while (got < length) {
    const ssize_t n = read(fd, static_cast<uint8_t*>(data) + got, length - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// The peer process: answers the ping-pong, then keeps progressing until told it is done.
[[noreturn]] void RunPeer(int in, int out, int pingpong_rounds) {
  Side side;
  Card mine{};
  const bool open = side.Open();
  if (open) mine = side.MyCard();
  if (!WriteAll(out, &mine, sizeof(mine)) || !open) std::_Exit(1);
  Card theirs;
  if (!ReadAll(in, &theirs, sizeof(theirs)) || !side.Meet(theirs)) std::_Exit(1);
  for (int i = 1; i <= pingpong_rounds; ++i) {
    side.AwaitWord(kSlot, static_cast<uint64_t>(i));
    *side.Word(kSlotSource) = static_cast<uint64_t>(i);
    if (!side.Write(kSlotSource, kSlot, sizeof(uint64_t))) std::_Exit(1);
  }
  side.AwaitWord(kDone, 1);  // the streams' target: progress until the last write
  const char byte = 'd';
  if (!WriteAll(out, &byte, 1)) std::_Exit(1);
  char bye;
  ReadAll(in, &bye, 1);  // the endpoint stays open until the measuring side is done with it
  std::_Exit(0);
}

}  // namespace

ShmRmaFigures MeasureShmRma(int pingpong_rounds, int small_writes, int big_writes,
                            int delivered_writes) {
  ShmRmaFigures figures;
  int to_peer[2], from_peer[2];
  if (pipe(to_peer) != 0 || pipe(from_peer) != 0) {
    figures.error = "pipe failed";
    return figures;
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    figures.error = "fork failed";
    return figures;
  }
  if (child == 0) {
    close(to_peer[1]);
    close(from_peer[0]);
    RunPeer(to_peer[0], from_peer[1], pingpong_rounds);
  }
  close(to_peer[0]);
  close(from_peer[1]);
  {
    Side side;
    Card theirs{}, mine{};
    if (!side.Open()) {
      figures.error = side.error;
    } else if (mine = side.MyCard(); !ReadAll(from_peer[0], &theirs, sizeof(theirs)) ||
                                     !WriteAll(to_peer[1], &mine, sizeof(mine))) {
      figures.error = "the peer process failed to open its shm endpoint";
    } else if (!side.Meet(theirs)) {
      figures.error = side.error;
    } else {
      auto start = std::chrono::steady_clock::now();
      for (int i = 1; i <= pingpong_rounds && side.error.empty(); ++i) {
        *side.Word(kSlotSource) = static_cast<uint64_t>(i);
        if (!side.Write(kSlotSource, kSlot, sizeof(uint64_t))) break;
        side.AwaitWord(kSlot, static_cast<uint64_t>(i));  // the peer's answer
      }
      figures.write_pingpong_us = std::chrono::duration<double, std::micro>(
                                      std::chrono::steady_clock::now() - start)
                                      .count() /
                                  pingpong_rounds / 2;
      const double small = side.Stream(small_writes, 64);
      const double big = side.Stream(big_writes, kBig);
      // Its own figure: a provider that refuses FI_DELIVERY_COMPLETE loses only this one.
      if (side.error.empty()) {
        figures.delivered_write_us = side.DeliveredWrites(delivered_writes);
        if (figures.delivered_write_us <= 0) {
          figures.delivered_error = side.error;
          side.error.clear();
        }
      }
      *side.Word(kDoneSource) = 1;
      side.Write(kDoneSource, kDone, sizeof(uint64_t));
      char byte;
      while (side.error.empty()) {  // the last write's completion, and the peer's word
        side.Progress();
        pollfd pfd{from_peer[0], POLLIN, 0};
        if (poll(&pfd, 1, 0) > 0) break;
      }
      ReadAll(from_peer[0], &byte, 1);
      if (side.error.empty() && small > 0 && big > 0) {
        figures.small_writes_mops = small_writes / small / 1e6;
        figures.big_write_gbs = static_cast<double>(big_writes) * kBig / big / 1e9;
      } else if (figures.error.empty()) {
        figures.error = side.error.empty() ? "a stream failed" : side.error;
      }
    }
    WriteAll(to_peer[1], "b", 1);
  }
  close(to_peer[1]);
  close(from_peer[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return figures;
}

}  // namespace softrpma::bench
