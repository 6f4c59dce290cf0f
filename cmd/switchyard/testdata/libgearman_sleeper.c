/*
 * A libgearman worker that overruns its CAN_DO_TIMEOUT, as libgearman's own
 * gearman_worker_timeout test does (e2e_libgearman_test.go).
 *
 *   libgearman_sleeper PORT SECONDS TIMEOUT_MS
 *
 * Serves "sleep": sleeps SECONDS, then returns "slept". Registered with
 * TIMEOUT_MS. Prints "run" each time it starts the job; runs until killed.
 */
#include <libgearman/gearman.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned seconds;

static void *sleeper(gearman_job_st *job, void *context, size_t *size,
                     gearman_return_t *ret) {
  (void)job;
  (void)context;
  printf("run\n");
  fflush(stdout);
  sleep(seconds);
  char *out = malloc(5);
  memcpy(out, "slept", 5);
  *size = 5;
  *ret = GEARMAN_SUCCESS;
  return out;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PORT SECONDS TIMEOUT_MS\n", argv[0]);
    return 2;
  }
  seconds = (unsigned)atoi(argv[2]);
  gearman_worker_st worker;
  if (gearman_worker_create(&worker) == NULL) return 1;
  gearman_worker_add_server(&worker, "127.0.0.1", (in_port_t)atoi(argv[1]));
  if (gearman_worker_add_function(&worker, "sleep", (uint32_t)atoi(argv[3]),
                                  sleeper, NULL) != GEARMAN_SUCCESS) {
    fprintf(stderr, "add_function: %s\n", gearman_worker_error(&worker));
    return 1;
  }
  for (;;) gearman_worker_work(&worker); /* errors included: keep going */
}
