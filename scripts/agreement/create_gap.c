// Thread creation after a pause: pthread_create + pthread_join in timed loops of N, each
// loop after GAP ms in which only the creator's CPU is busy (a spin; a negative GAP sleeps
// instead) and WARM untimed create+joins. Prints the median, fastest and slowest loop in
// microseconds per thread. Shows the settled and cold figures of create.thread.unpinned
// (docs/agreement.md, "Thread creation, settled and cold"):
//   create_gap 100 50 0      cold: the first 100 threads after 50 ms of one busy CPU
//   create_gap 100 50 1000   the same after 1000 untimed threads (~40 ms)
// Pinned, as create.thread's batches (docs/agreement.md, "Two more checks on the Intel Xeon
// guest"): taskset -c 0 create_gap 150 -3 1000 200 (a 3 ms sleep, then 1000 untimed).
// Build: gcc -O2 -pthread -o create_gap scripts/agreement/create_gap.c
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *nothing(void *a) { return a; }

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int create_join(long n) {
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0) return -1;
        pthread_join(t, NULL);
    }
    return 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: create_gap N GAP_MS [WARM] [LOOPS]\n");
        return 2;
    }
    long n = atol(argv[1]);
    double gap = atof(argv[2]) * 1e6;
    long warm = argc > 3 ? atol(argv[3]) : 0;
    int loops = argc > 4 ? atoi(argv[4]) : 30;
    if (n < 1 || loops < 1) return 2;
    double *r = malloc(sizeof(double) * loops);
    for (int k = 0; k < loops; k++) {
        double g = now_ns();
        if (gap < 0) {
            struct timespec s = {(time_t)(-gap / 1e9), (long)(-gap) % 1000000000L};
            nanosleep(&s, NULL);
        } else {
            while (now_ns() - g < gap) {
            }
        }
        if (create_join(warm) != 0) return 1;
        double t0 = now_ns();
        if (create_join(n) != 0) return 1;
        r[k] = (now_ns() - t0) / n / 1e3;
    }
    qsort(r, loops, sizeof(double), by_value);
    printf("n=%ld gap=%.0fms warm=%ld: median %.2f us (fastest %.2f, slowest %.2f)\n", n,
           gap / 1e6, warm, r[loops / 2], r[0], r[loops - 1]);
    free(r);
    return 0;
}
