/* mpi_pingpong.c: a two-rank MPI ping-pong that checks every byte it gets, built by
 * mpi_pingpong_test.sh with Debian's mpicc and run by Open MPI's mpirun over the OFI verbs
 * provider on the verbs shim. For each size, rank 0 sends a pattern of the size and iteration,
 * rank 1 checks it, adds one to every byte and sends it back, and rank 0 checks that.
 * Prints one line per rank ("rank R: N checked messages, 0 data errors") and exits 1 on any
 * data error. */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kIterations = 20 };

static unsigned char Pattern(size_t i, int iteration) {
  return (unsigned char)(i * 7 + (size_t)iteration * 13);
}

/* The number of bytes of buf[0, n) that are not pattern + add. */
static size_t Mismatches(const unsigned char* buf, size_t n, int iteration, int add) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += buf[i] != (unsigned char)(Pattern(i, iteration) + add);
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  static const size_t kSizes[] = {8, 4096, 1 << 20};
  size_t errors = 0, checked = 0;
  for (size_t s = 0; s < sizeof(kSizes) / sizeof(kSizes[0]); ++s) {
    const size_t n = kSizes[s];
    unsigned char* buf = malloc(n);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
    for (int it = 0; it < kIterations; ++it) {
      if (rank == 0) {
        for (size_t i = 0; i < n; ++i) buf[i] = Pattern(i, it);
        MPI_Send(buf, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errors += Mismatches(buf, n, it, 1) != 0;
      } else {
        MPI_Recv(buf, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errors += Mismatches(buf, n, it, 0) != 0;
        for (size_t i = 0; i < n; ++i) buf[i]++;
        MPI_Send(buf, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD);
      }
      ++checked;
    }
    free(buf);
  }
  printf("rank %d: %zu checked messages, %zu data errors\n", rank, checked, errors);
  fflush(stdout);
  MPI_Finalize();
  return errors == 0 ? 0 : 1;
}
