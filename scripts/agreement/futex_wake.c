// Independent counterpart of sync.wake.*: the latency from just before FUTEX_WAKE to the
// woken thread running, for a waiter verified asleep (procfs state S) before each wake.
// Usage: futex_wake WAKER_CPU WAITER_CPU [wakes]   (-1 for a CPU: not pinned)
// Prints the mean microseconds of each of five loops (the lab's batch figure is a mean too).
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int go, back, tid;
static _Atomic long stamp;
static long lat[100000];
static int nlat;

static long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
static void fwait(_Atomic int *w, int v) { syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, 0, 0, 0); }
static void fwake(_Atomic int *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0); }
static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}
static int waiter_cpu;
static void *waiter(void *a) {
    pin(waiter_cpu);
    tid = syscall(SYS_gettid);
    for (;;) {
        while (go == 0) fwait(&go, 0);
        lat[nlat < 100000 ? nlat : 0] = now() - stamp;
        nlat++;
        go = 0; back = 1; fwake(&back);
    }
    return a;
}
static char state(int t) {
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/self/task/%d/stat", t);
    FILE *f = fopen(p, "r");
    if (!f) return '?';
    size_t k = fread(buf, 1, sizeof buf - 1, f); fclose(f); buf[k] = 0;
    char *c = strrchr(buf, ')');
    return c && c[1] ? c[2] : '?';
}

int main(int argc, char **argv) {
    int waker_cpu = argc > 1 ? atoi(argv[1]) : 0;
    waiter_cpu = argc > 2 ? atoi(argv[2]) : 1;
    int wakes = argc > 3 ? atoi(argv[3]) : 2000;
    pin(waker_cpu);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    while (tid == 0) sched_yield();
    for (int rep = 0; rep < 5; rep++) {
        nlat = 0;
        for (int i = 0; i < wakes; i++) {
            while (state(tid) != 'S') sched_yield();
            back = 0;
            stamp = now();
            go = 1; fwake(&go);
            while (back == 0) fwait(&back, 0);
        }
        double sum = 0;
        for (int i = 0; i < nlat && i < 100000; i++) sum += lat[i];
        printf("%.3f\n", sum / (nlat < 100000 ? nlat : 100000) / 1e3);
    }
    return 0;
}
