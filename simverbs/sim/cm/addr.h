// addr.h: socket addresses as the simulated connection manager sees them, and
// rdma_getaddrinfo / rdma_freeaddrinfo.
//
// The simulated device owns every IPv4 and IPv6 address: any literal, or any name getaddrinfo(3)
// resolves, is reachable and is local. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the same
// address as a.b.c.d.

#ifndef SOFTRPMA_SIMVERBS_SIM_CM_ADDR_H_
#define SOFTRPMA_SIMVERBS_SIM_CM_ADDR_H_

#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace softrpma::sim {

// True for AF_INET and AF_INET6 addresses (the only families the simulator knows).
bool IsIpAddress(const sockaddr* addr);
// The length of `addr` by its family (0 when not an IP address).
socklen_t AddressLength(const sockaddr* addr);
// The port, in host order. REQUIRES: IsIpAddress(addr).
uint16_t PortOf(const sockaddr* addr);
void SetPort(sockaddr* addr, uint16_t port);
// True for 0.0.0.0 and ::.
bool IsWildcard(const sockaddr* addr);
// True when a and b name the same host address (ports ignored; v4-mapped v6 == v4).
bool SameHost(const sockaddr* a, const sockaddr* b);
// Copies an IP address into `storage` (which must be at least sockaddr_storage).
void CopyAddress(const sockaddr* from, sockaddr* to);
// "192.0.2.1:7204" / "[::1]:7204", for messages.
std::string AddressToString(const sockaddr* addr);

// rdma_getaddrinfo(node, service, hints, res), as rdma-core's. With node or service: resolves
// with getaddrinfo(3) (RAI_PASSIVE -> AI_PASSIVE, RAI_NUMERICHOST -> AI_NUMERICHOST) and returns
// one rdma_addrinfo (RC, RDMA_PS_TCP unless hints say otherwise) whose ai_src_addr (RAI_PASSIVE)
// or ai_dst_addr (otherwise) is the first IPv4/IPv6 result. With neither: the hints' flags,
// family, QP type, port space and destination address, copied. Either way a source address the
// result lacks is copied from the hints' ai_src_addr (libfabric's verbs provider passes its
// source this way, with NULL node and service). Errors: EINVAL (node, service and hints all
// NULL, a bad family, a hint address longer than sockaddr_storage), GaiError(EAI_*)
// (getaddrinfo failed: an unparsable numeric host or service, a name that does not resolve...;
// backend.h), EADDRNOTAVAIL (no IPv4/IPv6 result), ENOMEM.
int GetAddrInfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res);
// rdma_freeaddrinfo(res) of a list GetAddrInfo made.
void FreeAddrInfo(rdma_addrinfo* res);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_CM_ADDR_H_
