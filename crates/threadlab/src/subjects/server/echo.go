// The `go` server design of threadlab's server experiment: a goroutine per connection on Go's
// netpoller, speaking the lab's echo protocol (crates/threadlab/src/subjects/server/protocol.rs).
//
// Started by the lab with its flags; prints "listening ADDR" on stdout, then serves until its
// standard input closes (the lab ends it) or it is killed.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	requestHeader  = 32
	responseHeader = 40
	kindRequest    = 1
	kindResponse   = 2
	kindError      = 3
	kindStats      = 4
	flagCloseAfter = 1
	maxWorkUs      = 1000000
	codeTooLarge   = 1
	codeBadFrame   = 2
	codeDeadline   = 3
	codeBusy       = 4
	codeForbidden  = 5
)

var (
	listen     = flag.String("listen", "127.0.0.1:0", "address to listen on")
	maxPayload = flag.Uint("max-payload", 1<<20, "payload cap, bytes")
	deadlineMs = flag.Int("deadline-ms", 10000, "whole-frame deadline")
	idleMs     = flag.Int("idle-ms", 60000, "idle connection timeout")
	designID   = flag.Uint("design-id", 10, "design id in responses")
	maxConns   = flag.Int64("max-conns", 16384, "connections held at once")
	remoteOK   = flag.Bool("allow-remote-stats", false, "answer STATS to non-loopback peers")

	served, rejected, frameErrors, openConns, connSeq atomic.Int64
)

func main() {
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	go func() {
		// The lab keeps our stdin open while it wants us; EOF means it is done (or gone).
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		if openConns.Load() >= *maxConns {
			writeError(c, codeBusy, 0, 0, 0)
			rejected.Add(1)
			c.Close()
			continue
		}
		openConns.Add(1)
		go serve(c, uint16(connSeq.Add(1)))
	}
}

func writeError(c net.Conn, code uint16, seq uint32, tag uint64, worker uint16) {
	text := map[uint16]string{codeTooLarge: "payload over the server's cap", codeBadFrame: "bad frame",
		codeDeadline: "frame deadline passed", codeBusy: "busy",
		codeForbidden: "stats are served to loopback peers only"}[code]
	f := make([]byte, responseHeader+2+len(text))
	header(f, kindError, worker, seq, uint32(2+len(text)), tag, 0, 0)
	binary.LittleEndian.PutUint16(f[40:], code)
	copy(f[42:], text)
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(f)
}

func header(b []byte, kind byte, worker uint16, seq, n uint32, tag, service, txn uint64) {
	copy(b, "TLB1")
	b[4] = kind
	b[5] = byte(*designID)
	binary.LittleEndian.PutUint16(b[6:], worker)
	binary.LittleEndian.PutUint32(b[8:], seq)
	binary.LittleEndian.PutUint32(b[12:], n)
	binary.LittleEndian.PutUint64(b[16:], tag)
	binary.LittleEndian.PutUint64(b[24:], service)
	binary.LittleEndian.PutUint64(b[32:], txn)
}

func serve(c net.Conn, worker uint16) {
	defer openConns.Add(-1)
	defer c.Close()
	r := bufio.NewReaderSize(c, 4096)
	hdr := make([]byte, requestHeader)
	buf := make([]byte, responseHeader+1024)
	deadline := time.Duration(*deadlineMs) * time.Millisecond
	for {
		if r.Buffered() == 0 {
			c.SetReadDeadline(time.Now().Add(time.Duration(*idleMs) * time.Millisecond))
			if _, err := r.Peek(1); err != nil {
				return
			}
		}
		start := time.Now()
		c.SetReadDeadline(start.Add(deadline))
		if _, err := io.ReadFull(r, hdr); err != nil {
			frameFailed(c, err, 0, 0, worker)
			return
		}
		seq := binary.LittleEndian.Uint32(hdr[8:])
		tag := binary.LittleEndian.Uint64(hdr[24:])
		n := binary.LittleEndian.Uint32(hdr[12:])
		spin := binary.LittleEndian.Uint32(hdr[16:])
		block := binary.LittleEndian.Uint32(hdr[20:])
		kind, flags := hdr[4], hdr[5]
		if string(hdr[:4]) != "TLB1" || (kind != kindRequest && kind != kindStats) ||
			flags&^flagCloseAfter != 0 || binary.LittleEndian.Uint16(hdr[6:]) != 0 ||
			spin > maxWorkUs || block > maxWorkUs || (kind == kindStats && n != 0) {
			frameErrors.Add(1)
			writeError(c, codeBadFrame, seq, tag, worker)
			return
		}
		if n > uint32(*maxPayload) {
			frameErrors.Add(1)
			writeError(c, codeTooLarge, seq, tag, worker)
			return
		}
		if kind == kindStats {
			if !*remoteOK && !loopback(c.RemoteAddr()) {
				frameErrors.Add(1)
				writeError(c, codeForbidden, seq, tag, worker)
				return
			}
			s := stats()
			out := make([]byte, responseHeader+len(s))
			header(out, kindStats, worker, seq, uint32(len(s)), tag, uint64(time.Since(start)), 0)
			copy(out[responseHeader:], s)
			c.SetWriteDeadline(time.Now().Add(deadline))
			if _, err := c.Write(out); err != nil {
				return
			}
			continue
		}
		if int(responseHeader+n) > len(buf) {
			buf = make([]byte, responseHeader+n)
		}
		if _, err := io.ReadFull(r, buf[responseHeader:responseHeader+n]); err != nil {
			frameFailed(c, err, seq, tag, worker)
			return
		}
		if spin > 0 {
			end := time.Now().Add(time.Duration(spin) * time.Microsecond)
			for time.Now().Before(end) {
			}
		}
		if block > 0 {
			time.Sleep(time.Duration(block) * time.Microsecond)
		}
		txn := served.Add(1)
		header(buf, kindResponse, worker, seq, n, tag, uint64(time.Since(start)), uint64(txn))
		c.SetWriteDeadline(time.Now().Add(deadline))
		if _, err := c.Write(buf[:responseHeader+n]); err != nil {
			return
		}
		if flags&flagCloseAfter != 0 {
			return
		}
	}
}

// A frame that did not arrive whole: a deadline is answered, a reset or EOF just closes.
func frameFailed(c net.Conn, err error, seq uint32, tag uint64, worker uint16) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		frameErrors.Add(1)
		writeError(c, codeDeadline, seq, tag, worker)
	}
}

func loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// The STATS payload: 13 little-endian u64 (protocol.rs ServerStats).
func stats() []byte {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) uint64 { return uint64(t.Sec)*1e9 + uint64(t.Usec)*1e3 }
	rss := uint64(0)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			p, _ := strconv.ParseUint(f[1], 10, 64)
			rss = p * uint64(os.Getpagesize())
		}
	}
	threads := uint64(0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Threads:"); ok {
				threads, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	fds := uint64(0)
	if d, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = uint64(len(d))
	}
	v := []uint64{tv(ru.Utime), tv(ru.Stime), 0, rss, threads, 1, fds,
		uint64(served.Load()), uint64(rejected.Load()), uint64(frameErrors.Load()),
		uint64(ru.Nvcsw), uint64(ru.Nivcsw), uint64(openConns.Load())}
	out := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(out[8*i:], x)
	}
	return out
}
