// Where the two ends of a pipe ping-pong run, chunk by chunk, and what each chunk costs: the
// experiment behind the switch.process.pipe.unpinned paragraph of docs/agreement.md.
//
// Usage: pipe_regime once ROUND_TRIPS CHUNK     one fork, then the loop (perf bench sched pipe)
//        pipe_regime fresh BATCHES ROUND_TRIPS [BEFORE_MS]
//                                               a fresh child per batch (threadlab's batches)
// Both ends do perf's work per round trip: the parent writes then reads, the child reads then
// writes, 4 bytes, blocking. Run it under `taskset -c 0,1`.
// once:  per chunk, usecs per round trip, the CPU of each end at the chunk's end, the time a
//        fixed compute loop takes right after it (clock speed), and per round trip the
//        rescheduling and function-call interrupts and idle-state entries of the machine; then
//        the whole loop's usecs/op (perf's figure).
// fresh: per batch the same, after one untimed round trip (as the lab did). BEFORE_MS > 0: both
//        CPUs spin that long before each batch; < 0: sleep that long.
// Environment: PIN=1 parent on CPU 0, child on CPU 1 (the lab's cross_cpu placement); WARM=N
// N more untimed round trips before each fresh batch; ALT=1 the WARM round trips only before
// every other batch, so that settled and fresh batches share the same minute.
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// The child's CPU, written after every round trip it answers (a vDSO call and a store).
static _Atomic int *child_cpu;

static void child_loop(int rd, int wr) {
    int m;
    while (read(rd, &m, sizeof m) == sizeof m) {
        atomic_store_explicit(child_cpu, sched_getcpu(), memory_order_relaxed);
        if (write(wr, &m, sizeof m) != sizeof m) break;
    }
    _exit(0);
}

// Machine-wide counts read between chunks: rescheduling and function-call interrupts, and
// entries into the POLL and halt idle states, summed over the CPUs.
enum { RES, CAL, POLL, HALT, NSTAT };

static void stats(long long s[NSTAT]) {
    memset(s, 0, NSTAT * sizeof s[0]);
    char line[4096];
    FILE *f = fopen("/proc/interrupts", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ') p++;
        int k = !strncmp(p, "RES:", 4) ? RES : !strncmp(p, "CAL:", 4) ? CAL : -1;
        if (k < 0) continue;
        p += 4;
        for (char *e; ; p = e) {
            long long v = strtoll(p, &e, 10);
            if (e == p) break;
            s[k] += v;
        }
    }
    if (f) fclose(f);
    for (int cpu = 0; cpu < 64; cpu++)
        for (int st = 0; st < 2; st++) {
            char path[128];
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/usage", cpu, st);
            FILE *u = fopen(path, "r");
            long long v = 0;
            if (!u) continue;
            if (fscanf(u, "%lld", &v) == 1) s[st == 0 ? POLL : HALT] += v;
            fclose(u);
        }
}

static void print_stats(long long a[NSTAT], long long b[NSTAT], long n) {
    printf(" per op: RES %.2f CAL %.2f poll %.2f halt %.2f\n", (double)(b[RES] - a[RES]) / n,
           (double)(b[CAL] - a[CAL]) / n, (double)(b[POLL] - a[POLL]) / n, (double)(b[HALT] - a[HALT]) / n);
}

struct pair { int there, back; pid_t pid; };

// Microseconds a fixed chain of dependent multiplies takes now: it scales with the clock speed
// the vCPU gets, while the TSC behind CLOCK_MONOTONIC does not.
static double compute_us(void) {
    volatile unsigned long sink;
    unsigned long x = 1;
    double t = now_us();
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
    (void)sink;
    return now_us() - t;
}

// PIN=1 in the environment: parent on CPU 0, child on CPU 1 (the lab's cross_cpu row).
static int pinned;

static void pin(int cpu) {
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static struct pair start(void) {
    int a[2], b[2];
    if (pipe(a) || pipe(b)) { perror("pipe"); exit(2); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(2); }
    if (pid == 0) {
        if (pinned) pin(1);
        close(a[1]); close(b[0]); child_loop(a[0], b[1]);
    }
    close(a[0]); close(b[1]);
    return (struct pair){a[1], b[0], pid};
}

static void stop(struct pair p) {
    close(p.there); close(p.back);
    waitpid(p.pid, NULL, 0);
}

static void round_trips(struct pair p, long n) {
    int m = 0;
    for (long i = 0; i < n; i++) {
        if (write(p.there, &m, sizeof m) != sizeof m || read(p.back, &m, sizeof m) != sizeof m) {
            perror("pipe"); exit(1);
        }
    }
}

// Before a batch: both CPUs busy for `ms` milliseconds (ms > 0, one spinning process pinned
// to each), or both idle for -ms milliseconds (ms < 0), as the rows measured before a batch
// leave them.
/* One timed stretch of y round trips: its cost per round trip, the guest's counters around
 * it (s0 before, s1 after) and where each end ran at its end. */
struct timed { double us; int here, there; long long s0[NSTAT], s1[NSTAT]; };

static struct timed time_round_trips(struct pair p, long y) {
    struct timed r;
    stats(r.s0);
    double t = now_us();
    round_trips(p, y);
    r.us = (now_us() - t) / y;
    r.here = sched_getcpu();
    r.there = atomic_load(child_cpu);
    stats(r.s1);
    return r;
}

static double same_us, cross_us;
static long same_n, cross_n;

/* Prints a stretch's counters and adds it to the one-CPU or the two-CPU total. */
static void tally(struct timed r, long y) {
    print_stats(r.s0, r.s1, y);
    if (r.here == r.there) { same_us += r.us * y; same_n += y; } else { cross_us += r.us * y; cross_n += y; }
}

static void before_batch(int ms) {
    if (ms < 0) { usleep(-ms * 1000); return; }
    if (ms == 0) return;
    pid_t k[2];
    for (int cpu = 0; cpu < 2; cpu++) {
        k[cpu] = fork();
        if (k[cpu] == 0) {
            pin(cpu);
            double end = now_us() + ms * 1000.0;
            while (now_us() < end) {}
            _exit(0);
        }
    }
    for (int cpu = 0; cpu < 2; cpu++) waitpid(k[cpu], NULL, 0);
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "once") && strcmp(argv[1], "fresh"))) {
        fprintf(stderr, "usage: %s once ROUND_TRIPS CHUNK | fresh BATCHES ROUND_TRIPS [BUSY_MS]\n", argv[0]);
        return 2;
    }
    int busy_ms = argc > 4 ? atoi(argv[4]) : 0;
    pinned = getenv("PIN") && !strcmp(getenv("PIN"), "1");
    // WARM=N: N untimed round trips before each fresh batch (a pair already in its steady state).
    long warm = getenv("WARM") ? atol(getenv("WARM")) : 0;
    int alt = getenv("ALT") && !strcmp(getenv("ALT"), "1");
    child_cpu = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    long x = atol(argv[2]), y = atol(argv[3]);
    if (!strcmp(argv[1], "once")) {
        if (pinned) pin(0);
        struct pair p = start();
        double t0 = now_us();
        for (long done = 0; done < x; done += y) {
            struct timed r = time_round_trips(p, y);
            printf("chunk %ld %.2f us/op parent cpu %d child cpu %d compute %.1f us", done / y, r.us, r.here, r.there, compute_us());
            tally(r, y);
        }
        double total = (now_us() - t0) / x;
        stop(p);
        printf("whole loop %.3f usecs/op\n", total);
    } else {
        for (long b = 0; b < x; b++) {
            before_batch(busy_ms);
            if (pinned) pin(0);
            struct pair p = start();
            // ALT=1: the warm-up only before every other batch, so both kinds share the minute.
            long w = alt && b % 2 == 0 ? 0 : warm;
            round_trips(p, 1 + w);
            struct timed r = time_round_trips(p, y);
            stop(p);
            printf("batch %ld %.2f us/op parent cpu %d child cpu %d warm %ld", b, r.us, r.here, r.there, w);
            tally(r, y);
        }
    }
    printf("one CPU: %ld round trips, %.2f us/op; two CPUs: %ld round trips, %.2f us/op\n",
           same_n, same_n ? same_us / same_n : 0, cross_n, cross_n ? cross_us / cross_n : 0);
    return 0;
}
