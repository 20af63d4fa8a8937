#!/usr/bin/env python3
"""Checks the lab's figures against independent counterparts on this machine, in the same hour.

Builds the minimal C programs beside this script (gcc), then alternates, ROUNDS times: one
`threadlab run create sync switch latency`, then every counterpart (the C programs, `perf bench
sched pipe`, `hyperfine -N`, `cyclictest`), each in the same placement as the lab row it checks.
Prints, per pair, the lab's median and the counterpart's median over the rounds, and their
ratio. Counterparts whose tool is missing are skipped with the reason. docs/agreement.md holds
what it printed on the machine the lab is developed on, and why each pair should agree.

Usage: scripts/agreement/run.py [--rounds N] [--threadlab PATH]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def floats(text):
    return [float(x) for x in re.findall(r"^\s*([0-9.]+)\s*$", text, re.M)]


def build(tmp):
    out = {}
    for name in ["create_join", "mutex_pair", "futex_wake"]:
        exe = os.path.join(tmp, name)
        sh(["gcc", "-O2", "-o", exe, os.path.join(HERE, name + ".c"), "-lpthread"])
        out[name] = exe
    return out


def lab(threadlab, tmp):
    path = os.path.join(tmp, "lab.json")
    subprocess.run(
        [threadlab, "run", "create", "sync", "switch", "latency", "--no-save", "--json", path],
        check=True,
        capture_output=True,
    )
    with open(path) as f:
        r = json.load(f)
    m = {}
    for e in r["experiments"]:
        for x in e["metrics"]:
            m[x["id"]] = x
    return m


def pipe_overhead_ns(metric):
    # The lab's pipe notes say the in-process write+read it subtracted: "(median N ns)".
    found = re.search(r"\(median ([0-9.]+) ns\)", metric["note"]) or re.search(
        r"this \+ ([0-9.]+) ns", metric["note"]
    )
    return float(found.group(1)) if found else 0.0


def counterparts(exe):
    """(lab id, how to turn the lab metric into the counterpart's unit, command, parse)."""
    have = shutil.which
    rows = [
        ("create.thread", "us", ["taskset", "-c", "0", exe["create_join"], "20000"], floats),
        ("create.thread.unpinned", "us", [exe["create_join"], "20000"], floats),
        ("sync.mutex", "ns", ["taskset", "-c", "0", exe["mutex_pair"], "20000000"], floats),
        ("sync.wake.same_cpu", "us", [exe["futex_wake"], "0", "0", "500"], floats),
        ("sync.wake.cross_cpu", "us", [exe["futex_wake"], "0", "1", "500"], floats),
        ("sync.wake.unpinned", "us", [exe["futex_wake"], "-1", "-1", "500"], floats),
    ]
    if have("perf"):
        pipe = lambda t: [float(x) for x in re.findall(r"([0-9.]+) usecs/op", t)]
        rows.append(
            (
                "switch.process.pipe",
                "perf usecs/op",
                ["taskset", "-c", "0", "perf", "bench", "sched", "pipe", "-l", "200000"],
                pipe,
            )
        )
        rows.append(
            (
                "switch.process.pipe.unpinned",
                "perf usecs/op",
                ["taskset", "-c", "0,1", "perf", "bench", "sched", "pipe", "-l", "200000"],
                pipe,
            )
        )
    if have("hyperfine"):

        def mean_ms(t):
            found = re.search(r'"mean":\s*([0-9.e-]+)', t)
            return [float(found.group(1)) * 1e6] if found else []

        for lab_id, prefix in [
            ("create.process.spawn", ["taskset", "-c", "0"]),
            ("create.process.spawn.unpinned", []),
        ]:
            rows.append(
                (
                    lab_id,
                    "us (hyperfine mean)",
                    prefix
                    + ["hyperfine", "-N", "--warmup", "100", "-r", "1000", "--export-json",
                       "/dev/stdout", "--style", "none", "/bin/true"],
                    mean_ms,
                )
            )
    if have("cyclictest"):

        def avg_us(t):
            found = re.search(r"Avg:\s*([0-9]+)", t)
            return [float(found.group(1))] if found else []

        rows.append(
            (
                "latency.wakeup.alone.lateness",
                "us (cyclictest Avg)",
                # --laptop: leave /dev/cpu_dma_latency alone, as the lab does (cyclictest
                # otherwise holds it at 0 and keeps the CPUs out of deep idle states).
                ["cyclictest", "-m", "-i", "1000", "-l", "3000", "-q", "--laptop"],
                avg_us,
            )
        )
    return rows


def lab_value(m, lab_id, unit):
    x = m.get(lab_id)
    if x is None:
        return None
    if unit == "perf usecs/op":
        # perf's usecs/op is a whole round trip with the pipe work: 2 x (switch + overhead).
        return 2 * (x["median"] + pipe_overhead_ns(x)) / 1e3
    return x["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threadlab", default=os.path.join(HERE, "../../target/release/threadlab"))
    a = ap.parse_args()
    if not shutil.which("gcc"):
        sys.exit("gcc is needed to build the C counterparts")
    tmp = tempfile.mkdtemp(prefix="threadlab-agreement-")
    exe = build(tmp)
    rows = counterparts(exe)
    lab_seen = {r[0]: [] for r in rows}
    theirs = {r[0]: [] for r in rows}
    for _ in range(a.rounds):
        m = lab(a.threadlab, tmp)
        for lab_id, unit, cmd, parse in rows:
            v = lab_value(m, lab_id, unit)
            if v is not None:
                lab_seen[lab_id].append(v)
            try:
                theirs[lab_id].extend(parse(sh(cmd)))
            except subprocess.CalledProcessError as e:
                print(f"{lab_id}: {' '.join(cmd)} failed: {e.stderr.strip()[:200]}", file=sys.stderr)
    print(f"{'lab metric':34} {'unit':22} {'lab':>10} {'counterpart':>12} {'ratio':>7}")
    for lab_id, unit, cmd, _ in rows:
        if not lab_seen[lab_id] or not theirs[lab_id]:
            print(f"{lab_id:34} {unit:22} {'-':>10} {'-':>12}    (not measured)")
            continue
        l, t = statistics.median(lab_seen[lab_id]), statistics.median(theirs[lab_id])
        print(f"{lab_id:34} {unit:22} {l:10.3f} {t:12.3f} {l / t:7.2f}")
        print(f"{'':34} lab runs {[round(x, 2) for x in lab_seen[lab_id]]}, "
              f"counterpart {[round(x, 2) for x in theirs[lab_id]]}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
