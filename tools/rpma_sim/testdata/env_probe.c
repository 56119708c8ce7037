/*
 * env_probe: prints what `rpma-sim run` gave it (the simulator's variables, the first
 * LD_LIBRARY_PATH directory and whether softrpma's librpma.so.0 is in it, whether address-space
 * randomization is off, its arguments), then ends as argv[1] says: a number is its exit status,
 * "TERM" raises SIGTERM (a signal no sanitizer runtime intercepts).
 *
 *   env_probe STATUS [ARGS...]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>

static void show(const char *name) {
  const char *value = getenv(name);
  printf("%s=%s\n", name, value != NULL ? value : "(unset)");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: env_probe STATUS [ARGS...]\n");
    return 2;
  }
  show("RPMA_BACKEND");
  show("RPMA_SIM_SEED");
  show("RPMA_SIM_FAULTS");
  show("RPMA_SIM_SCENARIO");
  show("RPMA_SIM_TRACE");
  show("RPMA_SIM_DEVICE");
  show("RPMA_SIM_STATS");

  const char *path = getenv("LD_LIBRARY_PATH");
  char first[4096] = "";
  if (path != NULL) {
    size_t n = strcspn(path, ":");
    if (n >= sizeof(first)) n = sizeof(first) - 1;
    memcpy(first, path, n);
    first[n] = '\0';
  }
  printf("LD_LIBRARY_PATH first=%s\n", first);
  char lib[4200];
  struct stat st;
  snprintf(lib, sizeof(lib), "%s/librpma.so.0", first);
  printf("librpma.so.0 there=%s\n", first[0] != '\0' && stat(lib, &st) == 0 ? "yes" : "no");

  int persona = personality(0xffffffff);
  printf("aslr=%s\n", persona != -1 && (persona & ADDR_NO_RANDOMIZE) ? "off" : "on");
  for (int i = 2; i < argc; ++i) printf("arg[%d]=%s\n", i - 1, argv[i]);
  fflush(stdout);

  if (strcmp(argv[1], "TERM") == 0) raise(SIGTERM);
  return atoi(argv[1]);
}
