// The Go peer of threadlab's create and switch experiments: goroutines measured beside kernel
// threads, uthread and Tokio in the same run, interleaved with them round by round.
//
// threadlab builds this program at run time and drives it over its standard input: each line
// "spawn N", "yield N", "chan N" or "burst N" runs one batch of N operations, and the program
// answers with one line, the batch's wall time in nanoseconds. Calibration, warm-up, sampling
// and statistics stay in threadlab, so the goroutine rows are sampled exactly like the others.
// "burst N" runs one burst of N goroutines, "tree D" one fan-out/fan-in tree of depth D, both
// with GOMAXPROCS=2 (the others run with 1). Every batch ends with a full collection before the
// answer, so that no garbage-collector work runs on into the next row's batch.
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

// chanBatch: two goroutines pass a value back and forth over two unbuffered channels, n
// messages in all (one message: one send received).
func chanBatch(n int64) time.Duration {
	rounds := (n + 1) / 2
	ping := make(chan int64)
	pong := make(chan int64)
	done := make(chan struct{})
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(done)
	}()
	t := time.Now()
	for i := int64(0); i < rounds; i++ {
		ping <- i
		<-pong
	}
	took := time.Since(t)
	close(ping)
	<-done
	return time.Duration(float64(took) * float64(n) / float64(2*rounds))
}

// WorkSteps is the length of each burst goroutine's work; it matches threadlab's uthread and
// Tokio burst rows (experiments/create/balance.rs).
const WorkSteps = 300

// work is the body of every goroutine of a burst: a dependent multiply-xorshift chain.
//
//go:noinline
func work(seed uint64) uint64 {
	x := seed | 1
	for i := 0; i < WorkSteps; i++ {
		x *= 0x2545F4914F6CDD1D
		x ^= x >> 29
	}
	return x
}

var burstSink uint64

// burstBatch: one goroutine (on one of GOMAXPROCS=2 Ps) starts n goroutines, each computing
// work(i) into its slot, then waits for them all and sums the slots.
func burstBatch(n int64) time.Duration {
	runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(1)
	results := make([]uint64, n)
	took := make(chan time.Duration)
	go func() {
		var wg sync.WaitGroup
		t := time.Now()
		wg.Add(int(n))
		for i := int64(0); i < n; i++ {
			go func(i int64) {
				results[i] = work(uint64(i))
				wg.Done()
			}(i)
		}
		wg.Wait()
		var sum uint64
		for _, r := range results {
			sum += r
		}
		burstSink += sum
		took <- time.Since(t)
	}()
	return <-took
}

// treeNode: a leaf computes work(seed); an inner node starts two children and waits for both.
func treeNode(depth int64, seed uint64) uint64 {
	if depth == 0 {
		return work(seed)
	}
	var a, b uint64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		a = treeNode(depth-1, seed*2)
		wg.Done()
	}()
	go func() {
		b = treeNode(depth-1, seed*2+1)
		wg.Done()
	}()
	wg.Wait()
	return a + b
}

// treeBatch: one tree of depth d, rooted in a goroutine, with GOMAXPROCS=2.
func treeBatch(d int64) time.Duration {
	runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(1)
	took := make(chan time.Duration)
	go func() {
		t := time.Now()
		burstSink += treeNode(d, 1)
		took <- time.Since(t)
	}()
	return <-took
}

func main() {
	runtime.GOMAXPROCS(1)
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) != 2 {
			fmt.Fprintln(os.Stderr, "expected 'spawn N', 'yield N', 'chan N', 'burst N' or 'tree D', got", in.Text())
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
		case "chan":
			took = chanBatch(n)
		case "burst":
			took = burstBatch(n)
		case "tree":
			took = treeBatch(n)
		default:
			fmt.Fprintln(os.Stderr, "unknown benchmark", fields[0])
			os.Exit(2)
		}
		// A full collection before answering, outside the batch's timing: a cycle the batch
		// started would otherwise go on after it, its mark workers taking the CPU this program
		// shares with the lab's next row (switch.green.chan, the first row of the next round,
		// read 20.2-20.8 ns instead of 17.3-18.0 in 3 of 12 runs, and 17.6-18.2 in all 8 runs
		// with the collector off). Collections the batch needs still run inside it.
		runtime.GC()
		fmt.Fprintln(out, took.Nanoseconds())
		out.Flush()
	}
}
