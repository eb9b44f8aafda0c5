package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/peer"
)

// Progress is what Config.Progress receives about once a second while the load runs.
type Progress struct {
	Phase             string // "warm-up" or "load"
	Elapsed, Duration time.Duration
	Connections       int64 // open client connections
	Rollouts          int64 // completed or cancelled and verified
	Steps             int64 // sampling steps seen to their end
	Errors            int64 // error frames received
	Lost, Duplicated  int64 // items
	Violations        int64
	Goroutines, RSS   int64 // the server's (in-process: this process's)
}

// Run runs the soak of cfg and returns its report. The error is for a soak that could not run
// (no server, a failing warm-up); a soak that finds problems returns a Report whose Pass is
// false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	quotaRollouts, quotaConns := t.keyQuotas()
	if quotaConns > 0 && cfg.Connections > quotaConns {
		return nil, fmt.Errorf("soak: -connections %d is more than the server's quota of %d WebSocket connections per key "+
			"(every soak connection counts against one API key or client address): start tether serve with -key-connections 0, or lower -connections",
			cfg.Connections, quotaConns)
	}
	rep := newReport(cfg, t)

	cold, err := t.probe.read(true)
	if err != nil {
		return nil, fmt.Errorf("soak: reading the server's resources: %w", err)
	}
	rep.Resources.Cold = cold

	// Warm up: calm rollouts of each shape, then the same load for cfg.Warmup. The Go runtime
	// keeps span and GC metadata sized by the peak heap, and the binary's pages once touched:
	// "before" is the server warm at this load, so that "after" measures what the soak itself
	// leaves behind.
	wst := &stats{}
	if err := warmUp(ctx, &runner{cfg: cfg, t: t, st: wst}); err != nil {
		return nil, fmt.Errorf("soak: warm-up: %w", err)
	}
	if cfg.Warmup > 0 {
		stop := sampleLoad(t.probe, cold, progress(cfg, "warm-up", cfg.Warmup, wst))
		took := load(ctx, &runner{cfg: cfg, t: t, st: wst}, cfg.Warmup, cfg.Seed+1)
		stop()
		rep.Warmup = warmupReport(wst, cfg.Warmup, took)
	}
	before, err := quiesce(ctx, t.probe, 0, 3*cfg.Settle)
	if err != nil {
		return nil, fmt.Errorf("soak: reading the server's resources: %w", err)
	}
	errsBefore := t.probe.serverErrors()
	dropsBefore := t.drops.snapshot()

	st := &stats{}
	run := &runner{cfg: cfg, t: t, st: st}
	stopSampler := sampleLoad(t.probe, before, progress(cfg, "load", cfg.Duration, st))
	rep.Elapsed = load(ctx, run, cfg.Duration, cfg.Seed)
	pk := stopSampler()

	after, took, settled := settle(ctx, t, before, cfg)
	rep.Resources.Memory = "rss"
	if t.checksHeap() {
		rep.Resources.Memory = "heap"
	}
	_, rep.Resources.MemoryLimit = t.limits(before, cfg.Tolerance)
	rep.fill(st, before, pk, after, took, settled)
	rep.PeersDropped = after.Dropped - before.Dropped
	rep.DropReasons = diffCounts(t.drops.snapshot(), dropsBefore)
	rep.ServerErrors = diffCounts(t.probe.serverErrors(), errsBefore)
	if cfg.Suspended > 0 && ctx.Err() == nil {
		k := suspendedFit(cfg.Suspended, quotaRollouts, quotaConns)
		rep.Suspended = measureSuspended(ctx, &runner{cfg: cfg, t: t, st: &stats{}}, k)
		if k != cfg.Suspended {
			rep.Suspended.Requested = cfg.Suspended
		}
		if e := rep.Suspended.Error; e != "" {
			rep.Failures = append(rep.Failures, "suspended rollouts: "+e)
		}
	}
	if ctx.Err() != nil {
		rep.Failures = append(rep.Failures, "interrupted")
	}
	rep.Pass = len(rep.Failures) == 0
	rep.Total = time.Since(start)
	return rep, nil
}

// progress returns the sampler's tick: Config.Progress with the figures of st.
func progress(cfg Config, phase string, d time.Duration, st *stats) func(sample, time.Duration) {
	return func(s sample, elapsed time.Duration) {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Phase: phase, Elapsed: elapsed, Duration: d, Connections: st.openConns.Load(),
				Rollouts: st.completed(), Steps: st.steps.Load(), Errors: totalCount(&st.errorCodes),
				Lost: st.itemsLost.Load(), Duplicated: st.itemsDuplicated.Load(), Violations: st.violations.Load(),
				Goroutines: s.Goroutines, RSS: s.RSS})
		}
	}
}

// load runs cfg.Connections workers, half of each shape, for d (rollouts running at the end
// may finish within cfg.Grace) and returns how long it took.
func load(ctx context.Context, run *runner, d time.Duration, seed int64) time.Duration {
	start := time.Now()
	hard, cancel := context.WithTimeout(ctx, d+run.cfg.Grace)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range run.cfg.Connections {
		if run.cfg.Lanes > 0 {
			g := &sockGroup{t: run.t, st: run.st, shape: shape(i % 2)}
			for j := range run.cfg.Lanes {
				id := i*run.cfg.Lanes + j
				w := &worker{id: id, shape: g.shape, r: run, rng: rand.New(rand.NewSource(seed*1_000_003 + int64(id))),
					grp: g, lane: fmt.Sprintf("lane-%d", j)}
				wg.Go(func() { w.loop(hard, stop) })
			}
			continue
		}
		w := &worker{id: i, shape: shape(i % 2), r: run, rng: rand.New(rand.NewSource(seed*1_000_003 + int64(i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(hard, stop)
		}()
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	close(stop)
	wg.Wait()
	return time.Since(start)
}

func totalCount(m *sync.Map) int64 {
	var n int64
	for _, v := range snapshot(m) {
		n += v
	}
	return n
}

func diffCounts(after, before map[string]int64) map[string]int64 {
	if after == nil {
		return nil
	}
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// warmUp runs a calm rollout of each shape and sends each bad frame once.
func warmUp(ctx context.Context, run *runner) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, sh := range []shape{appendShape, publicShape} {
		w := &worker{id: -1 - int(sh), shape: sh, r: run, rng: rand.New(rand.NewSource(run.cfg.Seed)), calm: true}
		if !w.connect(ctx) {
			return fmt.Errorf("cannot connect to %s: %v", run.t.wsURL, snapshot(&run.st.errorCodes))
		}
		for range 2 {
			if o := w.rollout(ctx); o != outCompleted {
				w.discard(false)
				return fmt.Errorf("%s rollout: %s: %v", sh, o, run.st.samples)
			}
		}
		for _, b := range badFramesFor(sh) {
			r := w.newRollout()
			var err error
			if b.binary {
				err = w.c.sendBinary(ctx, []byte(b.data))
			} else {
				err = w.c.send(ctx, []byte(b.data))
			}
			if err != nil {
				w.discard(false)
				return err
			}
			w.expect(b.code, "bad frame ("+b.name+")", false)
			if _, ok := w.settleOwed(ctx, r); !ok {
				return fmt.Errorf("%s %s: %v", sh, b.name, run.st.samples)
			}
		}
		w.discard(true)
	}
	if n := run.st.violations.Load(); n > 0 {
		return fmt.Errorf("%d violations: %v", n, run.st.samples)
	}
	return nil
}

// quiesce waits until the server holds exactly conns connections and no rollout, and its
// goroutines and RSS have settled: over the probe's window the goroutine count did not change
// and RSS fell by less than 2% (in-process readings are settled at once by the GC; a remote
// server returns memory at its runtime's pace). limit bounds the wait; the last reading is
// returned then.
func quiesce(ctx context.Context, p probe, conns int64, limit time.Duration) (sample, error) {
	type reading struct {
		at time.Time
		s  sample
	}
	deadline := time.Now().Add(limit)
	var idle []reading
	for {
		s, err := p.read(true)
		if err != nil {
			return s, err
		}
		now := time.Now()
		if s.Conns != conns || s.Live != 0 {
			idle = idle[:0]
		} else {
			idle = append(idle, reading{now, s})
			for len(idle) > 1 && now.Sub(idle[1].at) >= p.window() {
				idle = idle[1:]
			}
			if first := idle[0]; now.Sub(first.at) >= p.window() &&
				first.s.Goroutines == s.Goroutines && float64(first.s.RSS-s.RSS) < 0.02*float64(s.RSS) {
				return s, nil
			}
		}
		if now.After(deadline) || ctx.Err() != nil {
			return s, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sampleLoad reads the server every 200ms until the returned stop is called, which returns
// the peak of every figure. tick is called about once a second.
func sampleLoad(p probe, first sample, tick func(sample, time.Duration)) func() sample {
	var mu sync.Mutex
	peak := first
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s, err := p.read(false)
			if err != nil {
				continue
			}
			mu.Lock()
			peak.Goroutines = max(peak.Goroutines, s.Goroutines)
			if s.RSS > peak.RSS {
				peak.RSS, peak.RSSAnon, peak.RSSFile = s.RSS, s.RSSAnon, s.RSSFile
			}
			peak.Heap = max(peak.Heap, s.Heap)
			peak.Conns = max(peak.Conns, s.Conns)
			peak.Live = max(peak.Live, s.Live)
			peak.Suspended = max(peak.Suspended, s.Suspended)
			mu.Unlock()
			if n++; n%5 == 0 {
				tick(s, time.Since(start))
			}
		}
	}()
	return func() sample {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// memory is the figure the resource check compares: RSS, or the heap after GC when the
// in-process server runs under the race detector (whose shadow memory is never returned).
func (t *target) memory(s sample) int64 {
	if t.checksHeap() {
		return s.Heap
	}
	return s.RSS
}

func (t *target) checksHeap() bool { return raceEnabled && t.srv != nil }

// limits are the resource figures "after" must not exceed.
func (t *target) limits(before sample, tol float64) (goroutines, mem int64) {
	m := t.memory(before)
	margin := int64(float64(m) * tol)
	if !t.checksHeap() {
		margin = max(margin, MinMemoryMargin) // RSS keeps the runtime's metadata; the heap after GC does not
	}
	return before.Goroutines + int64(math.Ceil(float64(before.Goroutines)*tol)), m + margin
}

// MinMemoryMargin is the least RSS margin the settle check allows above "before": the Go
// runtime keeps a few MiB of span and GC metadata after a peak, which a small server without a
// warm-up (tens of MiB) would otherwise report as a leak.
const MinMemoryMargin = 4 << 20

// settle waits, up to cfg.Settle, for the server to close every connection, end every rollout
// and return within the tolerance of before.
func settle(ctx context.Context, t *target, before sample, cfg Config) (sample, time.Duration, bool) {
	p := t.probe
	lg, lm := t.limits(before, cfg.Tolerance)
	start := time.Now()
	for {
		s, err := p.read(true)
		ok := err == nil && s.Conns == 0 && s.Live == 0 && s.Goroutines <= lg && t.memory(s) <= lm
		if ok || time.Since(start) > cfg.Settle || ctx.Err() != nil {
			return s, time.Since(start), ok
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// suspendedPerConn is how many rollouts measureSuspended holds per connection (the server's
// default cap is 64 per connection).
const suspendedPerConn = 50

// suspendedFit returns k lowered so that the suspended measurement fits the server's per-key
// quotas (0: none): k held rollouts plus the timed one within rollouts, and their connections
// (suspendedPerConn each) plus the timing one within conns.
func suspendedFit(k, rollouts, conns int) int {
	if rollouts > 0 {
		k = min(k, rollouts-1)
	}
	if conns > 0 {
		k = min(k, (conns-1)*suspendedPerConn)
	}
	return max(k, 1)
}

// measureSuspended holds k append-shape rollouts suspended at their first tool call, spread
// over connections of at most suspendedPerConn rollouts each, and reports the server's memory
// per rollout.
func measureSuspended(ctx context.Context, run *runner, k int) *SuspendedReport {
	const perConn = suspendedPerConn
	n := (k + perConn - 1) / perConn
	rep := &SuspendedReport{Rollouts: k, Connections: n}
	fail := func(err error) *SuspendedReport {
		rep.Error = err.Error()
		return rep
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(k)*2*time.Millisecond) // 100k: under 6 min
	defer cancel()
	ws := make([]*worker, n)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.discard(false)
			}
		}
	}()
	for i := range ws {
		ws[i] = &worker{id: 100000 + i, shape: appendShape, r: run, rng: rand.New(rand.NewSource(int64(i))), calm: true}
		if !ws[i].connect(ctx) {
			return fail(fmt.Errorf("cannot connect: %v", snapshot(&run.st.errorCodes)))
		}
	}
	base, err := quiesce(ctx, run.t.probe, int64(n), 3*run.cfg.Settle)
	if err != nil {
		return fail(err)
	}
	errs := make([]error, n)
	tokens := make([]int, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		held := min(perConn, k-i*perConn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], errs[i] = w.holdSuspended(ctx, held)
			if errs[i] == nil {
				w.c.c.CloseRead(ctx) // answer pings while held
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	held, err := run.t.probe.read(true)
	if err != nil {
		return fail(err)
	}
	rep.ContextTokens = tokens[0]
	rep.ServerSuspended = held.Suspended
	if held.Suspended-base.Suspended != int64(k) {
		return fail(fmt.Errorf("the server reports %d suspended rollouts, expected %d", held.Suspended-base.Suspended, k))
	}
	rep.HeapPerRollout = (held.Heap - base.Heap) / int64(k)
	rep.RSSPerRollout = (held.RSS - base.RSS) / int64(k)
	rep.StackPerRollout = (held.Stacks - base.Stacks) / int64(k)
	rep.HeapBefore, rep.HeapHeld = base.Heap, held.Heap
	rep.RSSBefore, rep.RSSHeld = base.RSS, held.RSS
	w := &worker{id: 100000 + n, shape: appendShape, r: run, rng: rand.New(rand.NewSource(int64(n))), calm: true}
	if !w.connect(ctx) {
		return fail(fmt.Errorf("cannot connect for the resume timing: %v", snapshot(&run.st.errorCodes)))
	}
	defer w.discard(false)
	times, err := w.timeResumes(ctx)
	if err != nil {
		return fail(fmt.Errorf("resume timing: %w", err))
	}
	slices.Sort(times)
	rep.Resumes, rep.ResumeP50 = len(times), times[len(times)/2]
	return rep
}

// timeResumes starts one rollout, and times each append until the next response.done or the
// terminal event (the server's resume of one rollout while the others stay held).
func (w *worker) timeResumes(ctx context.Context) ([]time.Duration, error) {
	r := w.newRollout()
	if err := w.c.sendJSON(ctx, w.createBody(r, "", r.user)); err != nil {
		return nil, err
	}
	var times []time.Duration
	start := time.Time{}
	for {
		f, err := w.c.read(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case f.typ == "error":
			return nil, fmt.Errorf("%.300s", f.data)
		case peer.IsTerminal(f.typ):
			if !start.IsZero() {
				times = append(times, time.Since(start))
			}
			if len(times) == 0 {
				return nil, fmt.Errorf("the rollout ended before a resume: %.300s", f.data)
			}
			return times, nil
		case f.typ == "response.done":
			if !start.IsZero() {
				times = append(times, time.Since(start))
			}
			ev, err := decodeEvent(f)
			if err != nil {
				return nil, err
			}
			input := make([]any, len(ev.PendingCallIDs))
			for i, id := range ev.PendingCallIDs {
				input[i] = map[string]any{"type": "function_call_output", "call_id": id, "output": "ok"}
			}
			start = time.Now()
			if err := w.c.sendJSON(ctx, map[string]any{"type": "response.append", "response_id": ev.ResponseID, "input": input}); err != nil {
				return nil, err
			}
		}
	}
}

// holdSuspended creates k rollouts one after another, each left suspended at its first call.
// It returns the context size in tokens of the first.
func (w *worker) holdSuspended(ctx context.Context, k int) (int, error) {
	tokens := 0
	for j := range k {
		r := w.newRollout()
		if err := w.c.sendJSON(ctx, w.createBody(r, "", r.user)); err != nil {
			return 0, err
		}
		for {
			f, err := w.c.read(ctx)
			if err != nil {
				return 0, err
			}
			if f.typ == "error" || peer.IsTerminal(f.typ) {
				return 0, fmt.Errorf("rollout %d of %d: %.300s", j+1, k, f.data)
			}
			if f.typ == "response.done" {
				ev, err := decodeEvent(f)
				if err != nil {
					return 0, err
				}
				if ev.Usage != nil && tokens == 0 {
					tokens = ev.Usage.Input
				}
				break
			}
		}
	}
	return tokens, nil
}
