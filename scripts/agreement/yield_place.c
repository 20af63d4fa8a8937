// yield_place: where the kernel puts two threads that pass a turn with sched_yield, neither
// pinned, and what a hand-off costs there; the counterpart of switch.thread.yield.unpinned.
//
// Each batch starts a fresh partner thread; the main thread and the partner pass a turn N times
// (each spins on the turn word with sched_yield until it is theirs), and the batch prints the ns
// per hand-off and the share of hand-offs on which the two were on one CPU. With "pinned-first",
// the main thread is pinned to CPU 0 and busy for 2 ms before each batch, then allowed on every
// CPU again before it starts the partner: what the lab's measuring thread does between the rows
// it measures pinned and an unpinned row's batch.
//
//   gcc -O2 -o yield_place yield_place.c -lpthread
//   ./yield_place N BATCHES [pinned-first]
//
// One line per process: "ns/share" for each batch.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long turn;
static atomic_int partner_cpu;
static long rounds;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *partner(void *arg) {
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load(&turn) != 2 * i + 1) sched_yield();
        atomic_store(&partner_cpu, sched_getcpu());
        atomic_store(&turn, 2 * i + 2);
    }
    return NULL;
}

static void set_cpus(int first, int last) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = first; c <= last; c++) CPU_SET(c, &set);
    sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N BATCHES [pinned-first]\n", argv[0]);
        return 2;
    }
    rounds = atol(argv[1]);
    int batches = atoi(argv[2]);
    int pinned_first = argc > 3 && strcmp(argv[3], "pinned-first") == 0;
    int last_cpu = 0;
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) last_cpu = c;
    for (int b = 0; b < batches; b++) {
        if (pinned_first) {
            set_cpus(0, 0);
            double until = now_ns() + 2e6;
            while (now_ns() < until) {
            }
            set_cpus(0, last_cpu);
        }
        atomic_store(&turn, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, partner, NULL) != 0) return 1;
        long same = 0;
        double start = now_ns();
        for (long i = 0; i < rounds; i++) {
            atomic_store(&turn, 2 * i + 1);
            while (atomic_load(&turn) != 2 * i + 2) sched_yield();
            same += atomic_load(&partner_cpu) == sched_getcpu();
        }
        double took = now_ns() - start;
        pthread_join(t, NULL);
        printf("%.0f/%.2f ", took / (2.0 * rounds), (double)same / rounds);
    }
    printf("\n");
    return 0;
}
