/*
 * A libgearman client for the end-to-end tests (e2e_libgearman_test.go).
 *
 *   libgearman_client PORT do                 rev "hello", "high", "low" at
 *                                             normal, high, low priority
 *   libgearman_client PORT bg FUNC DATA       background job, then its status
 *   libgearman_client PORT status HANDLE      gearman_client_job_status
 *   libgearman_client PORT fail               a job whose worker fails it
 *   libgearman_client PORT progress           a job sending data and status
 *   libgearman_client PORT tasks N            N concurrent tasks on one
 *                                             connection (add_task/run_tasks)
 *   libgearman_client PORT do1 FUNC DATA      one foreground job
 *
 * Prints one line per result on stdout; anything unexpected goes to stderr
 * with exit status 1.
 */
#include <libgearman/gearman.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gearman_client_st client;

static void die(const char *what, gearman_return_t ret) {
  fprintf(stderr, "%s: %s (%s)\n", what, gearman_strerror(ret),
          gearman_client_error(&client));
  exit(1);
}

static void print_status(const char *handle) {
  bool known = true, running = true;
  uint32_t num = 99, den = 99;
  gearman_return_t ret =
      gearman_client_job_status(&client, handle, &known, &running, &num, &den);
  if (ret != GEARMAN_SUCCESS) die("gearman_client_job_status", ret);
  printf("status: known=%d running=%d %u/%u\n", known, running, num, den);
}

typedef void *(*do_fn)(gearman_client_st *, const char *, const char *,
                       const void *, size_t, size_t *, gearman_return_t *);

static void do_one(const char *label, do_fn fn, const char *func,
                   const char *data) {
  size_t size = 0;
  gearman_return_t ret;
  char *result = fn(&client, func, NULL, data, strlen(data), &size, &ret);
  if (ret != GEARMAN_SUCCESS) {
    printf("%s: %s\n", label, gearman_strerror(ret));
    free(result);
    return;
  }
  printf("%s: %.*s\n", label, (int)size, result ? result : "");
  free(result);
}

/* Task callbacks: the context is the task's index. */
#define MAX_TASKS 1000
static char *results[MAX_TASKS];

static gearman_return_t on_complete(gearman_task_st *task) {
  long i = (long)gearman_task_context(task);
  size_t n = gearman_task_data_size(task);
  results[i] = calloc(1, n + 1);
  memcpy(results[i], gearman_task_data(task), n);
  return GEARMAN_SUCCESS;
}

static gearman_return_t on_fail(gearman_task_st *task) {
  long i = (long)gearman_task_context(task);
  fprintf(stderr, "task %ld failed\n", i);
  return GEARMAN_SUCCESS;
}

/* progress: print every event as it arrives. */
static gearman_return_t p_data(gearman_task_st *task) {
  printf("data: %.*s\n", (int)gearman_task_data_size(task),
         (const char *)gearman_task_data(task));
  return GEARMAN_SUCCESS;
}
static gearman_return_t p_status(gearman_task_st *task) {
  printf("status: %u/%u\n", gearman_task_numerator(task),
         gearman_task_denominator(task));
  return GEARMAN_SUCCESS;
}
static gearman_return_t p_complete(gearman_task_st *task) {
  printf("complete: %.*s\n", (int)gearman_task_data_size(task),
         (const char *)gearman_task_data(task));
  return GEARMAN_SUCCESS;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PORT MODE [ARGS]\n", argv[0]);
    return 2;
  }
  if (gearman_client_create(&client) == NULL) {
    fprintf(stderr, "gearman_client_create failed\n");
    return 1;
  }
  gearman_client_set_timeout(&client, 20000);
  gearman_return_t ret =
      gearman_client_add_server(&client, "127.0.0.1", (in_port_t)atoi(argv[1]));
  if (ret != GEARMAN_SUCCESS) die("gearman_client_add_server", ret);
  const char *mode = argv[2];

  if (strcmp(mode, "do") == 0) {
    do_one("normal", gearman_client_do, "rev", "hello");
    do_one("high", gearman_client_do_high, "rev", "high");
    do_one("low", gearman_client_do_low, "rev", "low");
  } else if (strcmp(mode, "bg") == 0 && argc == 5) {
    gearman_job_handle_t handle;
    ret = gearman_client_do_background(&client, argv[3], NULL, argv[4],
                                       strlen(argv[4]), handle);
    if (ret != GEARMAN_SUCCESS) die("gearman_client_do_background", ret);
    printf("handle: %s\n", handle);
    print_status(handle);
  } else if (strcmp(mode, "do1") == 0 && argc == 5) {
    do_one(argv[3], gearman_client_do, argv[3], argv[4]);
  } else if (strcmp(mode, "status") == 0 && argc == 4) {
    print_status(argv[3]);
  } else if (strcmp(mode, "fail") == 0) {
    do_one("fail", gearman_client_do, "fail", "x");
  } else if (strcmp(mode, "progress") == 0) {
    gearman_client_set_data_fn(&client, p_data);
    gearman_client_set_status_fn(&client, p_status);
    gearman_client_set_complete_fn(&client, p_complete);
    gearman_client_set_fail_fn(&client, on_fail);
    if (gearman_client_add_task(&client, NULL, NULL, "progress", NULL, "x", 1,
                                &ret) == NULL)
      die("gearman_client_add_task", ret);
    ret = gearman_client_run_tasks(&client);
    if (ret != GEARMAN_SUCCESS) die("gearman_client_run_tasks", ret);
  } else if (strcmp(mode, "tasks") == 0 && argc == 4) {
    long n = atol(argv[3]);
    if (n < 1 || n > MAX_TASKS) return 2;
    gearman_client_set_complete_fn(&client, on_complete);
    gearman_client_set_fail_fn(&client, on_fail);
    static char data[MAX_TASKS][32];
    for (long i = 0; i < n; i++) {
      snprintf(data[i], sizeof data[i], "task-%03ld", i);
      gearman_task_st *t;
      /* A mix of priorities on the one connection. */
      switch (i % 3) {
      case 0:
        t = gearman_client_add_task(&client, NULL, (void *)i, "rev", NULL,
                                    data[i], strlen(data[i]), &ret);
        break;
      case 1:
        t = gearman_client_add_task_high(&client, NULL, (void *)i, "rev", NULL,
                                         data[i], strlen(data[i]), &ret);
        break;
      default:
        t = gearman_client_add_task_low(&client, NULL, (void *)i, "rev", NULL,
                                        data[i], strlen(data[i]), &ret);
      }
      if (t == NULL) die("gearman_client_add_task", ret);
    }
    ret = gearman_client_run_tasks(&client);
    if (ret != GEARMAN_SUCCESS) die("gearman_client_run_tasks", ret);
    for (long i = 0; i < n; i++) {
      printf("%s: %s\n", data[i], results[i] ? results[i] : "(none)");
      free(results[i]);
    }
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  gearman_client_free(&client);
  return 0;
}
