// create.thread's batches without the lab: 200 batches of 150 pthread_create + pthread_join
// of a thread that returns at once, each batch after `mode`'s pause, and the 10th, 50th and
// 90th percentile of the batches' microseconds per pair. Run pinned, as the pinned row is:
// `taskset -c 0 ./create_batches MODE`, MODE 0: nothing between batches, 1: 3 ms of spinning,
// 2: five forks (as the round's fork row), 3: a 3 ms sleep. docs/agreement.md gives readings.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *nothing(void *a) { return a; }

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double batch_us(int n) {
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0) exit(1);
        pthread_join(t, NULL);
    }
    return (now_ns() - t0) / n / 1e3;
}

static void spin_ms(double ms) {
    double end = now_ns() + ms * 1e6;
    while (now_ns() < end) {
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0;
    enum { BATCHES = 200 };
    double v[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        if (mode == 1) spin_ms(3);
        if (mode == 2) {
            for (int j = 0; j < 5; j++) {
                pid_t p = fork();
                if (p == 0) _exit(0);
                if (p > 0) waitpid(p, NULL, 0);
            }
        }
        if (mode == 3) usleep(3000);
        v[k] = batch_us(150);
    }
    qsort(v, BATCHES, sizeof(double), by_value);
    printf("mode %d: p10 %.2f median %.2f p90 %.2f\n", mode, v[BATCHES / 10], v[BATCHES / 2],
           v[BATCHES * 9 / 10]);
    return 0;
}
