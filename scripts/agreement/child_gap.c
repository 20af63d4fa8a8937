// Children after a pause: posix_spawn of /bin/true (or fork + _exit) + waitpid in timed loops
// of N, each loop after GAP ms in which the parent spins pinned to CPU 0 (the other CPU idle),
// then, its pin lifted unless PINNED is 1, WARM untimed children. WARM may be a list (0,10):
// the loops then take its values in turn, so that the host's phases fall on each alike. Prints,
// per WARM, the median and the quartiles of its loops in microseconds per child. Shows the
// settled and cold figures of create.process.spawn.unpinned and create.process.fork.unpinned
// (docs/agreement.md, "Children, settled and cold"):
//   child_gap spawn 4 20 0,10   4 spawns after 20 ms of one busy CPU: cold, and after 10
//                               untimed spawns (~5 ms)
//   child_gap spawn 4 0 0       back to back, as hyperfine's loop
// Build: gcc -O2 -o child_gap scripts/agreement/child_gap.c
#define _GNU_SOURCE
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LOOPS 60

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// CPU 0 alone, or every CPU the process started with.
static void place(int only0, const cpu_set_t *all) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(0, &s);
    sched_setaffinity(0, sizeof s, only0 ? &s : all);
}

static int children(int spawn, long n) {
    char *args[] = {"/bin/true", NULL};
    for (long i = 0; i < n; i++) {
        pid_t pid;
        int st;
        if (spawn) {
            if (posix_spawn(&pid, "/bin/true", NULL, NULL, args, environ) != 0) return -1;
        } else {
            pid = fork();
            if (pid == 0) _exit(0);
            if (pid < 0) return -1;
        }
        if (waitpid(pid, &st, 0) != pid) return -1;
    }
    return 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_WARM 4

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "spawn") && strcmp(argv[1], "fork"))) {
        fprintf(stderr, "usage: child_gap spawn|fork N GAP_MS WARM[,WARM...] [PINNED]\n");
        return 2;
    }
    int spawn = !strcmp(argv[1], "spawn");
    long n = atol(argv[2]), gap_ms = atol(argv[3]);
    long warm[MAX_WARM];
    int kinds = 0;
    for (char *w = strtok(argv[4], ","); w && kinds < MAX_WARM; w = strtok(NULL, ","))
        warm[kinds++] = atol(w);
    int pinned = argc > 5 && atoi(argv[5]) == 1;
    int bad = n < 1 || gap_ms < 0 || kinds == 0;
    for (int k = 0; k < kinds; k++) bad |= warm[k] < 0;
    if (bad) {
        fprintf(stderr, "N must be at least 1, GAP_MS and each WARM at least 0 (at most %d)\n",
                MAX_WARM);
        return 2;
    }
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    static double per[MAX_WARM][LOOPS];
    for (int r = 0; r < LOOPS * kinds; r++) {
        int k = r % kinds;
        place(1, &all);
        double t0 = now_us();
        volatile unsigned long spin = 0;
        while (now_us() - t0 < gap_ms * 1000.0) spin++;
        place(pinned, &all);
        if (children(spawn, warm[k]) != 0) {
            perror("child");
            return 1;
        }
        double t = now_us();
        if (children(spawn, n) != 0) {
            perror("child");
            return 1;
        }
        per[k][r / kinds] = (now_us() - t) / n;
    }
    for (int k = 0; k < kinds; k++) {
        qsort(per[k], LOOPS, sizeof per[k][0], by_value);
        printf("%s N=%ld gap=%ld ms warm=%ld%s: median %.1f us (quartiles %.1f, %.1f)\n",
               argv[1], n, gap_ms, warm[k], pinned ? " pinned" : "", per[k][LOOPS / 2],
               per[k][LOOPS / 4], per[k][3 * LOOPS / 4]);
    }
    return 0;
}
