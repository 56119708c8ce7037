// connect_when_listening.c: an LD_PRELOAD library for perftest_test (not part of the shim).
//
// perftest 4.5 with -R connects twice: once for its exchange of parameters, then the test QPs,
// to a listener its server makes only after that exchange. A client whose second rdma_connect
// comes first is rejected (IB_CM_REJ_INVALID_SERVICE_ID), and perftest's own retry then reuses
// the ids it destroyed: perftest's race, not the shim's. On the simulated fabric the server's
// side of the exchange (its SEND's ACK crosses two fabric threads) can lose it every time on a
// loaded machine, which a NIC's ACK in hardware and slower address resolution make rare.
//
// This rdma_connect waits (at most 10 s) until the simulated listener of its destination port
// listens, then calls librdmacm's: the abstract socket "@softrpma/<RPMA_SIM_FABRIC>/0.0.0.0:<port>"
// (sim/fabric/host.h) in /proc/net/unix with the listening flag (__SO_ACCEPTCON, 00010000); a
// connection the listener accepted carries the same name, but not the flag.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int Listening(const char* name) {
  FILE* table = fopen("/proc/net/unix", "r");
  if (table == NULL) return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof(line), table) != NULL) {
    char flags[16];
    char path[256];
    // Num RefCount Protocol Flags Type St Inode Path
    if (sscanf(line, "%*s %*s %*s %15s %*s %*s %*s %255s", flags, path) == 2) {
      found = strcmp(flags, "00010000") == 0 && strcmp(path, name) == 0;
    }
  }
  fclose(table);
  return found;
}

int rdma_connect(struct rdma_cm_id* id, struct rdma_conn_param* conn_param) {
  int (*real)(struct rdma_cm_id*, struct rdma_conn_param*) =
      (int (*)(struct rdma_cm_id*, struct rdma_conn_param*))dlsym(RTLD_NEXT, "rdma_connect");
  if (real == NULL) return -1;
  const char* fabric = getenv("RPMA_SIM_FABRIC");
  const struct sockaddr* dst = id != NULL ? rdma_get_peer_addr(id) : NULL;
  if (fabric != NULL && dst != NULL && dst->sa_family == AF_INET) {
    char name[256];
    snprintf(name, sizeof(name), "@softrpma/%s/0.0.0.0:%u", fabric,
             ntohs(((const struct sockaddr_in*)dst)->sin_port));
    const struct timespec pause = {0, 10 * 1000 * 1000};
    for (int tries = 0; tries < 1000 && !Listening(name); tries++) nanosleep(&pause, NULL);
  }
  return real(id, conn_param);
}
