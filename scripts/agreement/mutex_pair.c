// Independent counterpart of sync.mutex: pthread_mutex_lock + unlock of a default mutex in a
// process with a second (sleeping) thread, so glibc takes its atomic path; prints ns per pair
// for five loops. Run it with `taskset -c N`.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *sleeper(void *a) { pause(); return a; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 50000000;
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    for (int rep = 0; rep < 5; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            __asm__ volatile("" ::: "memory");
            pthread_mutex_unlock(&m);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
        printf("%.3f\n", ns / n);
    }
    return 0;
}
