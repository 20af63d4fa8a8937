// The Go peer of threadlab's create and switch experiments: goroutines measured beside kernel
// threads, uthread and Tokio in the same run, interleaved with them round by round.
//
// threadlab builds this program at run time and drives it over its standard input: each line
// "spawn N" or "yield N" runs one batch of N operations, and the program answers with one line,
// the batch's wall time in nanoseconds. Calibration, warm-up, sampling and statistics stay in
// threadlab, so the goroutine rows are sampled exactly like the others.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// spawnBatch: n times, start a goroutine that calls wg.Done, and wait for it.
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

// yieldBatch: two goroutines alternate runtime.Gosched, n switches in all.
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

func main() {
	runtime.GOMAXPROCS(1)
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) != 2 {
			fmt.Fprintln(os.Stderr, "expected 'spawn N' or 'yield N', got", in.Text())
			os.Exit(2)
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "bad batch size", fields[1])
			os.Exit(2)
		}
		var took time.Duration
		switch fields[0] {
		case "spawn":
			took = spawnBatch(n)
		case "yield":
			took = yieldBatch(n)
		default:
			fmt.Fprintln(os.Stderr, "unknown benchmark", fields[0])
			os.Exit(2)
		}
		fmt.Fprintln(out, took.Nanoseconds())
		out.Flush()
	}
}
