/* The exec audit's benchmark driver: N times fork, execve PROGRAM, wait; prints the median and
 * the mean wall time of one round in microseconds. Static, so it runs in any image. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: forkexec N PROGRAM\n");
    return 64;
  }
  int n = atoi(argv[1]);
  double *t = malloc(sizeof(double) * n), sum = 0;
  char *child[] = {argv[2], NULL};
  char *env[] = {NULL};
  for (int i = 0; i < n; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid == 0) {
      execve(argv[2], child, env);
      _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "round %d: the program failed (%d)\n", i, status);
      return 1;
    }
    t[i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
    sum += t[i];
  }
  qsort(t, n, sizeof(double), cmp);
  printf("%.1f %.1f\n", t[n / 2], sum / n);
  return 0;
}
