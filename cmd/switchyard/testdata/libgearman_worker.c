/*
 * A libgearman worker for the end-to-end tests (e2e_libgearman_test.go).
 *
 *   libgearman_worker PORT COUNT
 *
 * Serves "rev" (reverses the workload), "fail" (fails the job) and
 * "progress" (sends data and status, then completes with "done"), prints
 * "<function> <workload>" for each job it takes, and exits 0 after COUNT
 * jobs. Gives up (exit 1) if no job comes for 20 seconds.
 */
#include <libgearman/gearman.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long handled; /* jobs taken so far */

static void log_job(gearman_job_st *job) {
  handled++;
  printf("%s %.*s\n", gearman_job_function_name(job),
         (int)gearman_job_workload_size(job),
         (const char *)gearman_job_workload(job));
  fflush(stdout);
}

static void *rev(gearman_job_st *job, void *context, size_t *size,
                 gearman_return_t *ret) {
  (void)context;
  log_job(job);
  size_t n = gearman_job_workload_size(job);
  const char *in = gearman_job_workload(job);
  char *out = malloc(n + 1);
  for (size_t i = 0; i < n; i++) out[i] = in[n - 1 - i];
  *size = n;
  *ret = GEARMAN_SUCCESS;
  return out;
}

static void *fail(gearman_job_st *job, void *context, size_t *size,
                  gearman_return_t *ret) {
  (void)context;
  log_job(job);
  *size = 0;
  *ret = GEARMAN_WORK_FAIL;
  return NULL;
}

static void *progress(gearman_job_st *job, void *context, size_t *size,
                      gearman_return_t *ret) {
  (void)context;
  log_job(job);
  if ((*ret = gearman_job_send_data(job, "chunk1", 6)) != GEARMAN_SUCCESS ||
      (*ret = gearman_job_send_status(job, 1, 2)) != GEARMAN_SUCCESS ||
      (*ret = gearman_job_send_data(job, "chunk2", 6)) != GEARMAN_SUCCESS ||
      (*ret = gearman_job_send_status(job, 2, 2)) != GEARMAN_SUCCESS)
    return NULL;
  *size = 4;
  return strdup("done");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PORT COUNT\n", argv[0]);
    return 2;
  }
  gearman_worker_st worker;
  if (gearman_worker_create(&worker) == NULL) {
    fprintf(stderr, "gearman_worker_create failed\n");
    return 1;
  }
  gearman_worker_set_timeout(&worker, 20000);
  gearman_return_t ret =
      gearman_worker_add_server(&worker, "127.0.0.1", (in_port_t)atoi(argv[1]));
  if (ret == GEARMAN_SUCCESS)
    ret = gearman_worker_add_function(&worker, "rev", 0, rev, NULL);
  if (ret == GEARMAN_SUCCESS)
    ret = gearman_worker_add_function(&worker, "fail", 0, fail, NULL);
  if (ret == GEARMAN_SUCCESS)
    ret = gearman_worker_add_function(&worker, "progress", 0, progress, NULL);
  if (ret != GEARMAN_SUCCESS) {
    fprintf(stderr, "setup: %s\n", gearman_worker_error(&worker));
    return 1;
  }
  /* Count jobs, not gearman_worker_work calls: after a function fails a
   * job, the call returns GEARMAN_WORK_FAIL and the next one finishes that
   * job's WORK_FAIL and returns GEARMAN_SUCCESS without running anything. */
  long count = atol(argv[2]);
  while (handled < count || ret == GEARMAN_WORK_FAIL) {
    ret = gearman_worker_work(&worker);
    if (ret != GEARMAN_SUCCESS && ret != GEARMAN_WORK_FAIL) {
      fprintf(stderr, "gearman_worker_work: %s (%s)\n", gearman_strerror(ret),
              gearman_worker_error(&worker));
      return 1;
    }
  }
  gearman_worker_free(&worker);
  return 0;
}
