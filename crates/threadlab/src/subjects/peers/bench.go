package main

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
