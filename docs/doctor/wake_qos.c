/* An independent check of `threadlab doctor`'s idle-latency knob: the cross-CPU futex wake-up
 * with and without /dev/cpu_dma_latency held at 0, phases alternated (off on off on ...).
 *
 * The waker (CPU 0) sleeps GAP_US, stamps CLOCK_MONOTONIC, sets the futex word and calls
 * FUTEX_WAKE; the waiter (CPU 1), blocked in FUTEX_WAIT, stamps the clock as soon as it returns.
 * A phase is WAKES counted wake-ups after 16 uncounted ones; its figure is the mean latency.
 * The knob's effect is the median over rounds of on/off, each round one off phase and one on
 * phase. GAP_US (the third argument, 1000 by default, as doctor's wakeup figure) is how long
 * the woken thread sleeps before each wake-up.
 *
 *   gcc -O2 -pthread -o /tmp/wake_qos docs/doctor/wake_qos.c
 *   /tmp/wake_qos [rounds] [wakes per phase] [gap_us] [park|spin]
 *
 * Needs root (/dev/cpu_dma_latency is mode 0600 on most systems) and two CPUs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long gap_us = 1000;
/* How the waker waits for the woken thread's reply (not timed): parked in FUTEX_WAIT, as
 * doctor's waker does, or spinning, which keeps the waker's vCPU busy. */
static int reply_spins = 0;

static _Atomic uint32_t go, done, stop;
static _Atomic uint64_t stamp, total_ns, not_asleep;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static long futex(_Atomic uint32_t *w, int op, uint32_t v) {
    return syscall(SYS_futex, w, op | FUTEX_PRIVATE_FLAG, v, NULL, NULL, 0);
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof s, &s)) {
        perror("pin");
        exit(2);
    }
}

static void *waiter(void *arg) {
    (void)arg;
    pin(1);
    for (;;) {
        while (atomic_load(&go) == 0) {
            if (atomic_load(&stop)) return NULL;
            if (futex(&go, FUTEX_WAIT, 0) != 0 && errno == EAGAIN) atomic_fetch_add(&not_asleep, 1);
        }
        uint64_t t = now_ns();
        atomic_fetch_add(&total_ns, t - atomic_load(&stamp));
        atomic_store(&go, 0);
        atomic_store(&done, 1);
        if (!reply_spins) futex(&done, FUTEX_WAKE, 1);
    }
}

/* Mean wake-up latency of one phase, ns. The first 16 wake-ups are not counted: after a phase
 * with the limit held, haltpoll keeps polling until idle periods longer than its window have
 * shrunk it (each halves it), and these let it get there. */
static double phase(int wakes) {
    struct timespec gap = {gap_us / 1000000, gap_us % 1000000 * 1000};
    for (int i = 0; i < wakes + 16; i++) {
        if (i == 16) atomic_store(&total_ns, 0);
        nanosleep(&gap, NULL);
        atomic_store(&done, 0);
        atomic_store(&stamp, now_ns());
        atomic_store(&go, 1);
        futex(&go, FUTEX_WAKE, 1);
        while (atomic_load(&done) == 0) {
            if (!reply_spins) futex(&done, FUTEX_WAIT, 0);
        }
    }
    return (double)atomic_load(&total_ns) / wakes;
}

/* Time CPUs 0 and 1 were not halted (busy, or polling in the idle loop), microseconds, from the
 * cpuidle residency counters: states above 0 halt the CPU, state 0 (POLL) spins. The tick-based
 * user/system counters of /proc/stat are not used: a 100 us sleep's expiry coalesces with the
 * tick (timer slack), so the tick always finds the CPU busy and /proc/stat counts it as such. */
static double halted_us(void) {
    double us = 0;
    for (int cpu = 0; cpu <= 1; cpu++) {
        for (int st = 1; st < 10; st++) {
            char p[128];
            snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/time", cpu, st);
            FILE *s = fopen(p, "r");
            unsigned long long t;
            if (!s) break;
            if (fscanf(s, "%llu", &t) == 1) us += (double)t;
            fclose(s);
        }
    }
    return us;
}

static double burned_us(void) { return 2.0 * now_ns() / 1e3 - halted_us(); }

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int wakes = argc > 2 ? atoi(argv[2]) : 400;
    if (argc > 3) gap_us = atol(argv[3]);
    if (argc > 4) reply_spins = argv[4][0] == 's';
    if (rounds < 1 || rounds > 1000 || wakes < 1) {
        fprintf(stderr, "usage: %s [rounds 1..1000] [wakes per phase] [gap_us] [park|spin]\n",
                argv[0]);
        return 2;
    }
    pin(0);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    phase(wakes / 4 + 1); /* warm-up */
    double ratio[1000], off_sum = 0, on_sum = 0, cpu_off = 0, cpu_on = 0, wall_off = 0, wall_on = 0;
    printf("round  off_us  on_us  on/off\n");
    for (int r = 0; r < rounds; r++) {
        double c0 = burned_us(), w0 = now_ns() / 1e3;
        double off = phase(wakes);
        double c1 = burned_us(), w1 = now_ns() / 1e3;
        int fd = open("/dev/cpu_dma_latency", O_RDWR);
        int32_t zero = 0;
        if (fd < 0 || write(fd, &zero, sizeof zero) != sizeof zero) {
            perror("/dev/cpu_dma_latency");
            return 1;
        }
        double c2 = burned_us(), w2 = now_ns() / 1e3;
        double on = phase(wakes);
        double c3 = burned_us(), w3 = now_ns() / 1e3;
        close(fd);
        cpu_off += c1 - c0; wall_off += w1 - w0;
        cpu_on += c3 - c2; wall_on += w3 - w2;
        ratio[r] = on / off;
        off_sum += off;
        on_sum += on;
        printf("%5d %7.2f %6.2f %7.3f\n", r + 1, off / 1e3, on / 1e3, ratio[r]);
    }
    atomic_store(&stop, 1);
    atomic_store(&go, 0);
    futex(&go, FUTEX_WAKE, 1);
    pthread_join(t, NULL);
    qsort(ratio, rounds, sizeof ratio[0], cmp);
    double med = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
    printf("mean off %.2f us, mean on %.2f us, median on/off %.3f (min %.3f, max %.3f)\n",
           off_sum / rounds / 1e3, on_sum / rounds / 1e3, med, ratio[0], ratio[rounds - 1]);
    printf("CPUs busy or polling (CPUs 0-1): off %.2f, on %.2f; wakes that found the waiter awake: %llu\n",
           cpu_off / wall_off, cpu_on / wall_on, (unsigned long long)atomic_load(&not_asleep));
    return 0;
}
