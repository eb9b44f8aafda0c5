package protocol

import (
	"context"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeavyBytes is the size of a JSON text (1 MiB) from which decoding or encoding it is heavy
// work, done in one of the process's heavy-work slots (CPUSlot).
const HeavyBytes = 1 << 20

// heavySlots holds one token per heavy decode or encode running. There is one slot fewer
// than the Go scheduler's processors (at least one): Go runs every goroutine alike, so when
// as many 30 MiB decodes as processors ran at once, a request of a few hundred bytes and
// /healthz waited in the run queue behind all of them, hundreds of milliseconds on a 2-core
// machine. With a processor left over, small requests are served while the large ones take
// their turns.
var heavySlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// CPUSlot returns at once with a no-op release for n < HeavyBytes. For a larger n it waits
// for a heavy-work slot and returns the function that gives the slot back; the caller
// decodes or encodes n bytes of JSON in between and must not ask for another slot until it
// has released this one (a slot is never taken twice by one piece of work). It applies to
// the work of one request or frame: the request bodies and client frames this package
// decodes (DecodeCreateParams, DecodeClientEvent, DecodeSteer, StreamIDOf), and the answers
// and upstream events of other packages that are at least HeavyBytes long.
//
// ctx is the context of the request or connection the work is for: when it is done before
// a slot is free (its client went away), CPUSlot stops waiting at once and returns ctx's
// error and a no-op release, having taken no slot, so that work nobody waits for any more
// never runs. A ctx already done gets its error even when a slot is free. Every wait for a
// slot is counted in SlotWaits.
func CPUSlot(ctx context.Context, n int) (release func(), err error) {
	if n < HeavyBytes {
		return noRelease, nil
	}
	if err := ctx.Err(); err != nil {
		slotStats.abandon(0)
		return noRelease, err
	}
	select {
	case heavySlots <- struct{}{}:
		slotStats.acquire(0)
		return releaseSlot, nil
	default:
	}
	start := time.Now()
	slotStats.waiting.Add(1)
	defer slotStats.waiting.Add(-1)
	select {
	case heavySlots <- struct{}{}:
		slotStats.acquire(time.Since(start))
		return releaseSlot, nil
	case <-ctx.Done():
		slotStats.abandon(time.Since(start))
		return noRelease, ctx.Err()
	}
}

// CPUSlots returns the number of heavy-work slots: one fewer than GOMAXPROCS at the start of
// the process, at least one.
func CPUSlots() int { return cap(heavySlots) }

func noRelease() {}

func releaseSlot() { <-heavySlots }

// SlotWaitBuckets are the upper bounds, in seconds, of the histogram of waits for a
// heavy-work slot (SlotWaits). It is a copy: changing it changes nothing that is counted.
var SlotWaitBuckets = slices.Clone(slotWaitBounds[:])

var slotWaitBounds = [...]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// SlotWaitStats is a snapshot of the process's waits for heavy-work slots (CPUSlot with n
// at least HeavyBytes), as SlotWaits returns it.
type SlotWaitStats struct {
	// Count is the number of waits ended, with a slot or abandoned; a slot that was free
	// counts as a wait of 0 s.
	Count int64
	// Sum is the total time of those waits, in seconds.
	Sum float64
	// Cumulative holds, for each bound of SlotWaitBuckets, the number of waits of at most
	// that many seconds.
	Cumulative []int64
	// Abandoned is the number of waits (of Count) whose context ended before a slot was free:
	// their work never ran.
	Abandoned int64
	// Waiting is the number of callers waiting for a slot now.
	Waiting int64
}

// SlotWaits returns the statistics of the process's waits for heavy-work slots.
func SlotWaits() SlotWaitStats {
	s := &slotStats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := SlotWaitStats{Count: s.count, Sum: s.sum, Abandoned: s.abandoned,
		Cumulative: make([]int64, len(slotWaitBounds)), Waiting: s.waiting.Load()}
	run := int64(0)
	for i := range slotWaitBounds {
		run += s.n[i]
		out.Cumulative[i] = run
	}
	return out
}

// slotStats counts the waits for heavy-work slots (a few per second at most: each is for
// a MiB of work, so a mutex costs nothing that matters).
var slotStats waitStats

type waitStats struct {
	waiting atomic.Int64 // callers blocked in CPUSlot now

	mu        sync.Mutex                     // guards the fields below
	n         [len(slotWaitBounds) + 1]int64 // waits per bucket of slotWaitBounds, +Inf last
	count     int64
	sum       float64
	abandoned int64
}

func (w *waitStats) acquire(d time.Duration) { w.observe(d, false) }

func (w *waitStats) abandon(d time.Duration) { w.observe(d, true) }

func (w *waitStats) observe(d time.Duration, abandoned bool) {
	s := d.Seconds()
	i := sort.SearchFloat64s(slotWaitBounds[:], s)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[i]++
	w.count++
	w.sum += s
	if abandoned {
		w.abandoned++
	}
}

// AppendItems appends src to dst as append does, copying at most 1024 items at a time and
// yielding the CPU in between when src is longer. A slice copy is a step the Go scheduler
// cannot preempt: one copy of a million items (200 MiB of pointers, slower still while the
// GC marks) held a CPU for up to two seconds, and every other goroutine on it waited.
func AppendItems(dst, src []Item) []Item { return appendYielding(dst, src) }

func appendYielding[T any](dst, src []T) []T {
	if len(src) <= arrayChunk {
		return append(dst, src...)
	}
	dst = slices.Grow(dst, len(src))
	for len(src) > 0 {
		n := min(len(src), arrayChunk)
		dst = append(dst, src[:n]...)
		src = src[n:]
		runtime.Gosched()
	}
	return dst
}

// readPiece is the largest piece ReadAll reads into before it starts another.
const readPiece = 1 << 20

// ReadAll reads r until EOF, as io.ReadAll does (a nil error at EOF), into pieces of at most
// 1 MiB that it joins once at the end, yielding the CPU between the copies. io.ReadAll and
// bytes.Buffer grow one buffer by copying it whole, and the zeroing and copying of a buffer
// of tens of MiB are steps the scheduler cannot preempt: reading a 60 MiB upstream frame so
// held a CPU for up to 200 ms at a time.
func ReadAll(r io.Reader) ([]byte, error) {
	var pieces [][]byte
	total, size := 0, 512
	for {
		p := make([]byte, 0, size)
		var err error
		for len(p) < cap(p) && err == nil {
			var n int
			n, err = r.Read(p[len(p):cap(p)])
			p = p[:len(p)+n]
		}
		if len(p) > 0 {
			pieces = append(pieces, p)
			total += len(p)
		}
		if err == io.EOF {
			return join(pieces, total), nil
		}
		if err != nil {
			return join(pieces, total), err
		}
		size = min(2*size, readPiece)
	}
}

// join returns the pieces as one slice of total bytes (the one piece itself when there is
// one), yielding the CPU between the copies of a long text.
func join(pieces [][]byte, total int) []byte {
	switch len(pieces) {
	case 0:
		return []byte{}
	case 1:
		return pieces[0]
	}
	out := make([]byte, 0, total)
	for _, p := range pieces {
		out = append(out, p...)
		if total > readPiece {
			runtime.Gosched()
		}
	}
	return out
}

// bigString is string(b), copied appendRun bytes at a time when b is 1 MiB or more. A string
// of tens of MiB is new memory, and copying into it in one step faults in every page of it
// in a step the scheduler cannot preempt (a 24 MiB tool description held a CPU for 100 ms).
func bigString(b []byte) string {
	if len(b) < HeavyBytes {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	inPieces(b, func(p []byte) { sb.Write(p) })
	return sb.String()
}

// appendYieldingBytes is append(dst, b...), copying appendRun bytes at a time with a yield
// between when b is 1 MiB or more (a 16 MiB image held a CPU while it was copied in one step).
func appendYieldingBytes(dst, b []byte) []byte {
	if len(b) < HeavyBytes {
		return append(dst, b...)
	}
	dst = growYielding(dst, len(b))
	inPieces(b, func(p []byte) { dst = append(dst, p...) })
	return dst
}

// growYielding returns dst with room for at least n more bytes. When it must grow, the new
// buffer is allocated (the runtime zeroes a large one in preemptible steps) and dst is copied
// into it appendRun bytes at a time with a yield between: append's own growth copies and
// zeroes in steps the scheduler cannot preempt.
func growYielding(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, 0, max(2*cap(dst), len(dst)+n))
	inPieces(dst, func(p []byte) { out = append(out, p...) })
	return out
}

// inPieces calls put with b's consecutive pieces of at most appendRun bytes, yielding the CPU
// after each: a copy gives the scheduler no chance to preempt it, so a loop of long copies
// must yield itself.
func inPieces(b []byte, put func([]byte)) {
	for len(b) > 0 {
		k := min(len(b), appendRun)
		put(b[:k])
		b = b[k:]
		runtime.Gosched()
	}
}
