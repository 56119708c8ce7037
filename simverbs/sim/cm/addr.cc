#include "simverbs/sim/cm/addr.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

namespace softrpma::sim {
namespace {

// An rdma_addrinfo and the storage its pointers point into.
struct SimAddrInfo final {
  rdma_addrinfo info;  // FIRST member
  sockaddr_storage src;
  sockaddr_storage dst;
};

// The IPv4 address of a v4 or v4-mapped v6 address, or false.
bool AsIpv4(const sockaddr* addr, in_addr* out) {
  if (addr->sa_family == AF_INET) {
    *out = reinterpret_cast<const sockaddr_in*>(addr)->sin_addr;
    return true;
  }
  const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    std::memcpy(&out->s_addr, &a6.s6_addr[12], 4);
    return true;
  }
  return false;
}

}  // namespace

bool IsIpAddress(const sockaddr* addr) {
  return addr != nullptr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
}

socklen_t AddressLength(const sockaddr* addr) {
  if (addr == nullptr) return 0;
  if (addr->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (addr->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

uint16_t PortOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
}

void SetPort(sockaddr* addr, uint16_t port) {
  if (addr->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(port);
  }
}

bool IsWildcard(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
}

bool SameHost(const sockaddr* a, const sockaddr* b) {
  in_addr a4, b4;
  const bool a_is_v4 = AsIpv4(a, &a4);
  const bool b_is_v4 = AsIpv4(b, &b4);
  if (a_is_v4 || b_is_v4) return a_is_v4 && b_is_v4 && a4.s_addr == b4.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

void CopyAddress(const sockaddr* from, sockaddr* to) {
  std::memset(to, 0, sizeof(sockaddr_storage));
  std::memcpy(to, from, AddressLength(from));
}

std::string AddressToString(const sockaddr* addr) {
  if (!IsIpAddress(addr)) return "(not an IP address)";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", PortOf(addr));
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof(text));
  return absl::StrCat("[", text, "]:", PortOf(addr));
}

namespace {

// Copies `len` bytes of `from` into `storage` and points `*to` / `*to_len` at them (rdma-core's
// ucma_copy_addr copies whatever the caller gave). EINVAL when it does not fit.
int CopyHintAddress(const sockaddr* from, socklen_t len, sockaddr_storage* storage,
                    sockaddr** to, socklen_t* to_len) {
  if (from == nullptr || len > sizeof(sockaddr_storage)) return EINVAL;
  std::memset(storage, 0, sizeof(*storage));
  std::memcpy(storage, from, len);
  *to = reinterpret_cast<sockaddr*>(storage);
  *to_len = len;
  return 0;
}

// node or service given: getaddrinfo(3)'s first IPv4/IPv6 result into `result`.
int Resolve(const char* node, const char* service, const rdma_addrinfo* hints,
            SimAddrInfo* result) {
  const int flags = hints != nullptr ? hints->ai_flags : 0;
  const int family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
  if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6) return EINVAL;
  addrinfo gai_hints;
  std::memset(&gai_hints, 0, sizeof(gai_hints));
  gai_hints.ai_family = family;
  gai_hints.ai_socktype = SOCK_STREAM;
  if ((flags & RAI_PASSIVE) != 0) gai_hints.ai_flags |= AI_PASSIVE;
  if ((flags & RAI_NUMERICHOST) != 0) gai_hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* list = nullptr;
  errno = 0;
  const int gai_error = getaddrinfo(node, service, &gai_hints, &list);
  // As librdmacm: the resolver's own code (EAI_*), not an errno.
  if (gai_error != 0) return GaiError(gai_error);
  const addrinfo* found = nullptr;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (IsIpAddress(ai->ai_addr)) {
      found = ai;
      break;
    }
  }
  if (found == nullptr) {
    freeaddrinfo(list);
    return EADDRNOTAVAIL;
  }
  rdma_addrinfo& info = result->info;
  info.ai_flags = flags;
  info.ai_family = found->ai_family;
  // What the hints leave out follows from what they give, as the resolver's socket type and
  // protocol make it in rdma-core: a UDP port space means UD QPs, UD QPs a UDP port space.
  const int hint_qp_type = hints != nullptr ? hints->ai_qp_type : 0;
  const int hint_ps = hints != nullptr ? hints->ai_port_space : 0;
  const bool datagram = hint_qp_type == IBV_QPT_UD || hint_ps == RDMA_PS_UDP ||
                        hint_ps == RDMA_PS_IPOIB;
  info.ai_qp_type = hint_qp_type != 0 ? hint_qp_type : datagram ? IBV_QPT_UD : IBV_QPT_RC;
  info.ai_port_space = hint_ps != 0 ? hint_ps : datagram ? RDMA_PS_UDP : RDMA_PS_TCP;
  if ((flags & RAI_PASSIVE) != 0) {
    CopyAddress(found->ai_addr, reinterpret_cast<sockaddr*>(&result->src));
    info.ai_src_addr = reinterpret_cast<sockaddr*>(&result->src);
    info.ai_src_len = AddressLength(found->ai_addr);
  } else {
    CopyAddress(found->ai_addr, reinterpret_cast<sockaddr*>(&result->dst));
    info.ai_dst_addr = reinterpret_cast<sockaddr*>(&result->dst);
    info.ai_dst_len = AddressLength(found->ai_addr);
  }
  freeaddrinfo(list);
  return 0;
}

}  // namespace

int GetAddrInfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res) {
  // As rdma-core's addrinfo.c: node, service and hints may not all be NULL; with neither node
  // nor service the result is the hints' flags, family, QP type, port space and addresses.
  if (node == nullptr && service == nullptr && hints == nullptr) return EINVAL;
  SimAddrInfo* result = New<SimAddrInfo>();
  if (result == nullptr) return ENOMEM;
  std::memset(&result->info, 0, sizeof(result->info));
  rdma_addrinfo& info = result->info;
  int error = 0;
  if (node != nullptr || service != nullptr) {
    error = Resolve(node, service, hints, result);
  } else {
    info.ai_flags = hints->ai_flags;
    info.ai_family = hints->ai_family;
    info.ai_qp_type = hints->ai_qp_type;
    info.ai_port_space = hints->ai_port_space;
    if (hints->ai_dst_len != 0) {
      error = CopyHintAddress(hints->ai_dst_addr, hints->ai_dst_len, &result->dst,
                              &info.ai_dst_addr, &info.ai_dst_len);
    }
  }
  // A source address the resolution did not give comes from the hints (both paths).
  if (error == 0 && info.ai_src_len == 0 && hints != nullptr && hints->ai_src_len != 0) {
    error = CopyHintAddress(hints->ai_src_addr, hints->ai_src_len, &result->src,
                            &info.ai_src_addr, &info.ai_src_len);
  }
  if (error != 0) {
    Delete(result);
    return error;
  }
  *res = &info;
  return 0;
}

void FreeAddrInfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    Delete(reinterpret_cast<SimAddrInfo*>(res));
    res = next;
  }
}

}  // namespace softrpma::sim
