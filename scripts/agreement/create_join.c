// Independent counterpart of create.thread / create.thread.unpinned: pthread_create +
// pthread_join of a thread that returns at once, in a loop; prints microseconds per pair for
// five loops. Pin it with `taskset -c N` for the pinned case; run it bare for the default.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *nothing(void *a) { return a; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    for (int rep = 0; rep < 5; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, nothing, NULL) != 0) return 1;
            pthread_join(t, NULL);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
        printf("%.3f\n", ns / n / 1e3);
    }
    return 0;
}
