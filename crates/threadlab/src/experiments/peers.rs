//! Peer runtimes measured beside the kernel's threads in the same run: uthread (this workspace's
//! green threads), tokio's current-thread scheduler and Go's goroutines. `create` and `switch`
//! call `create_rows` and `switch_rows` so each table shows kernel and user-level figures side by
//! side, on one CPU, measured the same way (warm-up, calibrated batches, >= 7 samples).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Outcome};
use crate::measure::placement::{home_cpu, PinGuard, Placement};
use crate::measure::sampler::{SamplerConfig, MIN_SAMPLES};
use crate::measure::stats::Summary;
use crate::results::Metric;
use crate::seeds;

/// Appends `create.green`, `create.tokio` and `create.go` (spawn + run + join of an empty task).
pub fn create_rows(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let cpu = home_cpu();
    let _pin = PinGuard::pin(cpu)?;
    let placement = Placement::SameCpu(cpu).to_string();
    let sampler = ctx.sampler();

    ctx.step("create.green")?;
    let rt = uthread::Runtime::new();
    let s = sampler.per_op_ns(|n| Ok(green_spawn_join_batch(&rt, n)))?;
    out.metrics.push(
        Metric::from_summary(
            "create.green",
            "ns",
            &s,
            &placement,
            "uthread::spawn of a closure returning at once + join, one carrier (M:1), default \
             runtime: 256 KiB guarded stacks from the runtime's pool (reused after warm-up), the \
             thread's control block in a page on top of its stack, no heap allocation; timed \
             inside block_on, nothing subtracted",
        )
        .with_historical(seeds::historical("create.green")),
    );

    ctx.step("create.tokio")?;
    let rt = tokio_runtime()?;
    let s = sampler.per_op_ns(|n| Ok(tokio_spawn_join_batch(&rt, n)))?;
    out.metrics.push(Metric::from_summary(
        "create.tokio",
        "ns",
        &s,
        &placement,
        "tokio current_thread runtime: tokio::spawn of an empty async block, then .await on its \
         JoinHandle, one at a time; timed inside block_on, nothing subtracted",
    ));

    ctx.step("create.go")?;
    go_row(
        ctx,
        out,
        GoBench::Spawn,
        "create.go",
        &placement,
        "Go, GOMAXPROCS=1: `go` of a goroutine that calls wg.Done(), then wg.Wait(), one at a \
         time; same method as the lab's sampler (warm-up, calibrated batches >= the minimum \
         batch time), run in a child process built at run time; nothing subtracted",
    )?;
    Ok(())
}

/// Appends `switch.green.yield`, `switch.tokio.yield` and `switch.go.yield` (two tasks on one
/// CPU alternating a cooperative yield; per switch).
pub fn switch_rows(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let cpu = home_cpu();
    let _pin = PinGuard::pin(cpu)?;
    let placement = Placement::SameCpu(cpu).to_string();
    let sampler = ctx.sampler();

    ctx.step("switch.green.yield")?;
    let rt = uthread::Runtime::new();
    let s = sampler.per_op_ns(|n| Ok(green_yield_batch(&rt, n)))?;
    out.metrics.push(
        Metric::from_summary(
            "switch.green.yield",
            "ns",
            &s,
            &placement,
            "two uthread green threads on one carrier alternate uthread::yield_now (no system \
             call); per switch = batch time / number of yields; the spawner is blocked in join \
             meanwhile; nothing subtracted",
        )
        .with_historical(seeds::historical("switch.green.yield")),
    );

    ctx.step("switch.tokio.yield")?;
    let rt = tokio_runtime()?;
    let s = sampler.per_op_ns(|n| Ok(tokio_yield_batch(&rt, n)))?;
    out.metrics.push(Metric::from_summary(
        "switch.tokio.yield",
        "ns",
        &s,
        &placement,
        "two tasks on a tokio current_thread runtime alternate tokio::task::yield_now().await; \
         per switch = batch time / number of yields (includes the waker and run-queue work, \
         nothing subtracted)",
    ));

    ctx.step("switch.go.yield")?;
    go_row(
        ctx,
        out,
        GoBench::Yield,
        "switch.go.yield",
        &placement,
        "Go, GOMAXPROCS=1: two goroutines alternate runtime.Gosched(); per switch = batch time / \
         number of Gosched calls; same method as the lab's sampler, run in a child process built \
         at run time; nothing subtracted",
    )?;
    Ok(())
}

fn green_spawn_join_batch(rt: &uthread::Runtime, n: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for i in 0..n {
            let h = uthread::spawn(move || std::hint::black_box(i));
            std::hint::black_box(h.join());
        }
        t.elapsed()
    })
}

fn green_yield_batch(rt: &uthread::Runtime, n: u64) -> Duration {
    let per_side = n.div_ceil(2).max(1);
    let took = rt.block_on(move || {
        let side = move || {
            for _ in 0..per_side {
                uthread::yield_now();
            }
        };
        let a = uthread::spawn(side);
        let b = uthread::spawn(side);
        // Neither has run yet: they start when this thread blocks in join, then only ping-pong.
        let t = Instant::now();
        a.join();
        b.join();
        t.elapsed()
    });
    took.mul_f64(n as f64 / (2 * per_side) as f64)
}

fn tokio_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::Fail(format!("cannot build a tokio current_thread runtime: {e}")))
}

fn tokio_spawn_join_batch(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    rt.block_on(async move {
        let t = Instant::now();
        for i in 0..n {
            let h = tokio::spawn(async move { std::hint::black_box(i) });
            let _ = std::hint::black_box(h.await);
        }
        t.elapsed()
    })
}

fn tokio_yield_batch(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    let per_side = n.div_ceil(2).max(1);
    let took = rt.block_on(async move {
        let side = move || async move {
            for _ in 0..per_side {
                tokio::task::yield_now().await;
            }
        };
        let a = tokio::spawn(side());
        let b = tokio::spawn(side());
        let t = Instant::now();
        let _ = a.await;
        let _ = b.await;
        t.elapsed()
    });
    took.mul_f64(n as f64 / (2 * per_side) as f64)
}

/// Which benchmark the Go peer program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoBench {
    Spawn,
    Yield,
}

impl GoBench {
    fn arg(self) -> &'static str {
        match self {
            GoBench::Spawn => "spawn",
            GoBench::Yield => "yield",
        }
    }
}

fn go_row(
    ctx: &Ctx,
    out: &mut Outcome,
    bench: GoBench,
    id: &str,
    placement: &str,
    note: &str,
) -> Result<()> {
    match run_go(ctx, bench) {
        Ok(s) => {
            out.metrics
                .push(Metric::from_summary(id, "ns", &s, placement, note));
            Ok(())
        }
        Err(Error::Skip(reason)) => {
            out.skip(id, reason);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The Go peer: the same sampling method as `measure::sampler` (calibration doubles as warm-up,
/// batches of at least min_batch, stop at the sample count or at MIN_SAMPLES once the budget is
/// spent). Prints `batch N` and one `ns X` line per sample.
const GO_PROGRAM: &str = r#"package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func spawnBatch(n int64) time.Duration {
	var wg sync.WaitGroup
	t := time.Now()
	for i := int64(0); i < n; i++ {
		wg.Add(1)
		go func() { wg.Done() }()
		wg.Wait()
	}
	return time.Since(t)
}

func yieldBatch(n int64) time.Duration {
	perSide := (n + 1) / 2
	var wg sync.WaitGroup
	wg.Add(2)
	side := func() {
		for i := int64(0); i < perSide; i++ {
			runtime.Gosched()
		}
		wg.Done()
	}
	t := time.Now()
	go side()
	go side()
	wg.Wait()
	took := time.Since(t)
	return time.Duration(float64(took) * float64(n) / float64(2*perSide))
}

func arg(i int) int64 {
	v, err := strconv.ParseInt(os.Args[i], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad argument", os.Args[i])
		os.Exit(2)
	}
	return v
}

func main() {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: peer spawn|yield samples min_samples warmup_ns min_batch_ns budget_ns")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)
	var batch func(int64) time.Duration
	switch os.Args[1] {
	case "spawn":
		batch = spawnBatch
	case "yield":
		batch = yieldBatch
	default:
		fmt.Fprintln(os.Stderr, "unknown benchmark", os.Args[1])
		os.Exit(2)
	}
	samples, minSamples := arg(2), arg(3)
	warmup, minBatch, budget := time.Duration(arg(4)), time.Duration(arg(5)), time.Duration(arg(6))
	start := time.Now()
	iters := int64(1)
	for {
		took := batch(iters)
		warm := time.Since(start) >= warmup
		if took >= minBatch {
			if warm {
				break
			}
		} else {
			perOp := float64(took) / float64(iters)
			want := iters * 2
			if perOp > 0 {
				want = int64(math.Ceil(float64(minBatch) * 1.2 / perOp))
			}
			if want < iters+1 {
				want = iters + 1
			}
			if want > iters*16 {
				want = iters * 16
			}
			iters = want
		}
	}
	fmt.Printf("batch %d\n", iters)
	if samples < minSamples {
		samples = minSamples
	}
	for k := int64(0); k < samples; k++ {
		took := batch(iters)
		fmt.Printf("ns %.4f\n", float64(took)/float64(iters))
		if k+1 >= minSamples && time.Since(start) > budget {
			break
		}
	}
}
"#;

/// Removes the build directory when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds the Go peer program and runs one benchmark; Err(Skip) when Go is missing or the build
/// fails.
fn run_go(ctx: &Ctx, bench: GoBench) -> Result<Summary> {
    let version = Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output();
    match version {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(Error::Skip(format!(
                "`go version` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )))
        }
        Err(_) => {
            return Err(Error::Skip(
                "no Go toolchain on PATH (install Go >= 1.21 to measure goroutines)".into(),
            ))
        }
    }
    let dir = TempDir(std::env::temp_dir().join(format!("threadlab-go-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0)?;
    std::fs::write(dir.0.join("go.mod"), "module threadlabpeer\n\ngo 1.21\n")?;
    std::fs::write(dir.0.join("main.go"), GO_PROGRAM)?;
    let exe = dir.0.join("peer");
    let mut build = go_command(&dir.0);
    build
        .arg("build")
        .arg("-o")
        .arg(&exe)
        .arg(".")
        .current_dir(&dir.0);
    let built = build
        .output()
        .map_err(|e| Error::Skip(format!("cannot run `go build`: {e}")))?;
    if !built.status.success() {
        return Err(Error::Skip(format!(
            "`go build` of the peer program failed: {}",
            String::from_utf8_lossy(&built.stderr).trim()
        )));
    }
    ctx.cancel.check()?;
    let cfg = ctx.mode.sampler_config();
    let mut child = Command::new(&exe)
        .args(go_args(bench, &cfg))
        .env("GOMAXPROCS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Fail(format!("cannot start the Go peer program: {e}")))?;
    // The child inherits this thread's pin (one CPU). Poll so Ctrl-C can kill it; its output is
    // a few hundred bytes, far below a pipe's buffer, so waiting before reading cannot block.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if ctx.cancel.is_cancelled() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            ctx.cancel.check()?;
            return Err(Error::Fail("the Go peer program ran for over 120 s".into()));
        }
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(Error::Fail(format!(
            "the Go peer program failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    parse_go_output(&String::from_utf8_lossy(&output.stdout))
}

/// `go` with a self-contained, offline environment: the local toolchain only, module mode, and
/// a cache in `dir` when the user has none (no HOME, e.g. under some CI runners).
fn go_command(dir: &Path) -> Command {
    let mut c = Command::new("go");
    c.env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off");
    let has_home =
        std::env::var_os("HOME").is_some() || std::env::var_os("XDG_CACHE_HOME").is_some();
    if std::env::var_os("GOCACHE").is_none() && !has_home {
        c.env("GOCACHE", dir.join("cache"));
    }
    if std::env::var_os("GOPATH").is_none() && !has_home {
        c.env("GOPATH", dir.join("gopath"));
    }
    c
}

fn go_args(bench: GoBench, cfg: &SamplerConfig) -> Vec<String> {
    vec![
        bench.arg().to_string(),
        cfg.samples.to_string(),
        MIN_SAMPLES.to_string(),
        cfg.warmup.as_nanos().to_string(),
        cfg.min_batch.as_nanos().to_string(),
        cfg.budget.as_nanos().to_string(),
    ]
}

/// Parses the Go peer's output (`batch N`, then `ns X` per sample) into a summary.
pub fn parse_go_output(text: &str) -> Result<Summary> {
    let mut batch = None;
    let mut samples = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let bad = || {
            Error::Fail(format!(
                "unexpected line from the Go peer program: {line:?}"
            ))
        };
        match line.split_once(' ') {
            Some(("batch", v)) => batch = Some(v.trim().parse::<u64>().map_err(|_| bad())?),
            Some(("ns", v)) => samples.push(v.trim().parse::<f64>().map_err(|_| bad())?),
            _ => return Err(bad()),
        }
    }
    let batch =
        batch.ok_or_else(|| Error::Fail("the Go peer program printed no batch size".into()))?;
    if samples.len() < MIN_SAMPLES {
        return Err(Error::Fail(format!(
            "the Go peer program printed {} samples, fewer than {MIN_SAMPLES}",
            samples.len()
        )));
    }
    Summary::from_samples(&samples, batch)
        .ok_or_else(|| Error::Fail("the Go peer's samples were not finite numbers".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use crate::experiments::Mode;
    use crate::measure::env::Environment;

    #[test]
    fn parses_go_output() {
        let text = "batch 1000\nns 10.5\nns 11.0\nns 9.5\nns 10.0\nns 12.0\nns 10.2\nns 10.1\n";
        let s = parse_go_output(text).unwrap();
        assert_eq!(s.batch, 1000);
        assert_eq!(s.n, 7);
        assert_eq!(s.min, 9.5);
        assert_eq!(s.max, 12.0);
        assert_eq!(s.median, 10.2);
    }

    #[test]
    fn rejects_malformed_or_short_go_output() {
        assert!(
            parse_go_output("batch 10\nns 1\n").is_err(),
            "too few samples"
        );
        assert!(parse_go_output("ns 1\nns 1\nns 1\nns 1\nns 1\nns 1\nns 1\n").is_err());
        assert!(parse_go_output("batch x\n").is_err());
        assert!(parse_go_output("batch 1\nhello\n").is_err());
        assert!(parse_go_output("batch 1\nns NaN\nns 1\nns 1\nns 1\nns 1\nns 1\nns 1\n").is_err());
    }

    #[test]
    fn go_args_carry_the_sampler_method() {
        let cfg = Mode::Quick.sampler_config();
        let a = go_args(GoBench::Yield, &cfg);
        assert_eq!(a[0], "yield");
        assert_eq!(a[1], cfg.samples.to_string());
        assert_eq!(a[2], MIN_SAMPLES.to_string());
        assert_eq!(a[4], cfg.min_batch.as_nanos().to_string());
    }

    fn tiny_ctx(cancel: &Cancel) -> Ctx<'_> {
        static ENV: std::sync::LazyLock<Environment> =
            std::sync::LazyLock::new(Environment::default);
        Ctx {
            mode: Mode::Tiny,
            cancel,
            progress: &|_| {},
            env: &ENV,
        }
    }

    fn median(out: &Outcome, id: &str) -> f64 {
        out.metrics
            .iter()
            .find(|m| m.id == id)
            .unwrap_or_else(|| panic!("{id} missing"))
            .median
    }

    #[test]
    fn tiny_rows_have_positive_green_and_tokio_medians() {
        let cancel = Cancel::never();
        let ctx = tiny_ctx(&cancel);
        let mut out = Outcome::default();
        create_rows(&ctx, &mut out).unwrap();
        switch_rows(&ctx, &mut out).unwrap();
        for id in [
            "create.green",
            "create.tokio",
            "switch.green.yield",
            "switch.tokio.yield",
        ] {
            assert!(median(&out, id) > 0.0, "{id}");
        }
        // Go rows are either measured or skipped with a reason, never silently missing.
        for id in ["create.go", "switch.go.yield"] {
            let measured = out.metrics.iter().any(|m| m.id == id);
            let skipped = out
                .skipped
                .iter()
                .any(|m| m.id == id && !m.reason.is_empty());
            assert!(measured ^ skipped, "{id}");
        }
        let green = out
            .metrics
            .iter()
            .find(|m| m.id == "switch.green.yield")
            .unwrap();
        assert!(green.historical.is_some());
    }
}
