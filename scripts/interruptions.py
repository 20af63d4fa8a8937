#!/usr/bin/env python3
"""Interrupts `threadlab run` (and `run --full`) at random moments and reports, per
interruption, how long the lab took to exit after the signal (sent to its process group, as a
terminal does), whether any process of its process group outlived it, whether a temporary
file or build folder was left, and whether the results file is absent or complete. This is how the interruption figures in the issue notes were taken;
it is a benchmark of the lab's own behaviour, not a test (it times things).

usage: scripts/interruptions.py [--binary PATH] [--count N] [--full] [--max-delay S] [--seed N]
"""
import argparse, json, os, random, signal, subprocess, sys, tempfile, time

def group_alive(pgid):
    left = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        if int(rest[2]) == pgid and rest[0] != "Z":
            left.append(int(p))
    return left

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/threadlab")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--max-delay", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    worst = 0.0
    bad = 0
    for i in range(a.count):
        d = tempfile.mkdtemp(prefix="threadlab-int-")
        out = os.path.join(d, "r.json")
        args = [a.binary, "run", "--json", out] + (["--full"] if a.full else [])
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        delay = rng.uniform(0.2, a.max_delay)
        time.sleep(delay)
        sig = sigs[i % 3]
        if p.poll() is not None:
            print(f"{i:2d}: finished before {delay:.1f} s, not interrupted")
            continue
        t0 = time.monotonic()
        os.killpg(p.pid, sig)
        p.wait()
        took = time.monotonic() - t0
        time.sleep(0.05)
        left = group_alive(p.pid)
        temps = [f for f in os.listdir(d) if f.endswith(".tmp")]
        # Build folders of the Go programs: threadlab-<name>-<pid>-<n> in the temporary folder.
        temps += [f for f in os.listdir(tempfile.gettempdir())
                  if f.startswith("threadlab-") and f"-{p.pid}-" in f]
        state = "absent"
        if os.path.exists(out):
            try:
                r = json.load(open(out))
                state = "complete, interrupted_by " + str(r.get("interrupted_by"))
            except Exception as e:
                state = f"BROKEN ({e})"
        ok = took <= 1.0 and not left and not temps and not state.startswith("BROKEN") \
            and p.returncode == 128 + sig
        bad += not ok
        worst = max(worst, took)
        print(f"{i:2d}: {signal.Signals(sig).name} at {delay:5.1f} s -> exit {p.returncode} "
              f"after {took*1000:6.0f} ms; left {left}; temporaries {temps}; results {state}"
              f"{'' if ok else '   <-- NOT OK'}")
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)
    print(f"worst exit after a signal: {worst*1000:.0f} ms; not ok: {bad}")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
