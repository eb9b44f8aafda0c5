package soak

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Report is the result of a soak. Its JSON keys are stable.
type Report struct {
	Target      string        `json:"target"` // "in-process" or the URL
	Connections int           `json:"connections"`
	Turns       int           `json:"turns"`
	Lanes       int           `json:"lanes"` // named lanes per connection (Config.Lanes; 0: the default lane)
	Duration    time.Duration `json:"duration_ns"`
	Seed        int64         `json:"seed"`
	Rates       Rates         `json:"rates"`
	Elapsed     time.Duration `json:"elapsed_ns"` // the load, grace included
	// Total is the whole run: warm-up, load, settling and the suspended measurement.
	Total time.Duration `json:"total_ns"`
	// Warmup summarises the warm-up burst (its rollouts are verified too).
	Warmup *WarmupReport `json:"warmup,omitempty"`

	// Rollouts by shape ("append", "public") and outcome ("completed", "cancelled", "aborted",
	// "dropped", "refused", "broken", "interrupted").
	Rollouts map[string]map[string]int64 `json:"rollouts"`
	// Verified is the number of rollouts completed or cancelled whose items were verified.
	Verified int64 `json:"rollouts_verified"`
	// Steps is the number of sampling steps seen to their end.
	Steps  int64 `json:"steps"`
	Frames int64 `json:"frames_received"`
	Bytes  int64 `json:"bytes_received"`
	Dials  int64 `json:"dials"`

	Chaos Chaos `json:"chaos"`

	// Errors are the error frames received, by code, and refused upgrades ("upgrade 503 …").
	Errors map[string]int64 `json:"errors"`
	// ServerErrors are the error frames the server counted during the load, by code.
	ServerErrors map[string]int64 `json:"server_errors,omitempty"`
	// ColdContinuations counts public continuations that reported cached_tokens 0.
	ColdContinuations int64 `json:"cold_continuations"`
	// PeersDropped counts the connections the server dropped during the load (a missed pong
	// or a write timeout: stalled readers); DropReasons has the reasons (in-process only).
	PeersDropped int64            `json:"peers_dropped"`
	DropReasons  map[string]int64 `json:"drop_reasons,omitempty"`

	ItemsVerified    int64    `json:"items_verified"`
	ItemsLost        int64    `json:"items_lost"`
	ItemsDuplicated  int64    `json:"items_duplicated"`
	EventsLost       int64    `json:"events_lost"`
	EventsDuplicated int64    `json:"events_duplicated"`
	ErrorsLost       int64    `json:"error_frames_lost"`
	Violations       int64    `json:"violations"`
	Samples          []string `json:"violation_samples,omitempty"`

	Resources Resources        `json:"resources"`
	Suspended *SuspendedReport `json:"suspended,omitempty"`

	Pass     bool     `json:"pass"`
	Failures []string `json:"failures,omitempty"`
}

// WarmupReport is the warm-up burst's verification.
type WarmupReport struct {
	Duration   time.Duration `json:"duration_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"` // its load, grace included
	Verified   int64         `json:"rollouts_verified"`
	Lost       int64         `json:"items_lost"`
	Duplicated int64         `json:"items_duplicated"`
	Violations int64         `json:"violations"`
	Samples    []string      `json:"violation_samples,omitempty"`
}

func warmupReport(st *stats, d, elapsed time.Duration) *WarmupReport {
	st.mu.Lock()
	defer st.mu.Unlock()
	return &WarmupReport{Duration: d, Elapsed: elapsed, Verified: st.completed(), Lost: st.itemsLost.Load() + st.eventsLost.Load() + st.errorsLost.Load(),
		Duplicated: st.itemsDuplicated.Load() + st.eventsDuplicated.Load(), Violations: st.violations.Load(),
		Samples: append([]string(nil), st.samples...)}
}

// Chaos counts the disruptions the clients caused.
type Chaos struct {
	DisconnectsSuspended int64 `json:"disconnects_suspended"`
	DisconnectsSampling  int64 `json:"disconnects_sampling"`
	CancelsSuspended     int64 `json:"cancels_suspended"`
	CancelsSampling      int64 `json:"cancels_sampling"`
	CancelsTooLate       int64 `json:"cancels_too_late"` // the rollout completed first
	BadFrames            int64 `json:"bad_frames"`
	BadAppends           int64 `json:"bad_appends"`
	BadAnswered          int64 `json:"bad_answered"`
	SlowReaders          int64 `json:"slow_readers"`
	SlowDropped          int64 `json:"slow_readers_dropped"`
	StalledReaders       int64 `json:"stalled_readers"`
	StallsNotDropped     int64 `json:"stalls_not_dropped"`
}

// Resources are the server's goroutines and memory before the load, at its peak and after
// it settled.
type Resources struct {
	Source          string        `json:"source"`
	Cold            sample        `json:"cold"` // the server before the warm-up
	Before          sample        `json:"before"`
	Peak            sample        `json:"peak"`
	After           sample        `json:"after"`
	SettledIn       time.Duration `json:"settled_in_ns"`
	Tolerance       float64       `json:"tolerance"`
	GoroutinesLimit int64         `json:"goroutines_limit"`
	// Memory is the figure checked: "rss", or "heap" (after GC) for an in-process server
	// under the race detector, whose shadow memory is never returned to the OS.
	Memory      string `json:"memory_checked"`
	MemoryLimit int64  `json:"memory_limit"`
	OK          bool   `json:"ok"`
}

// SuspendedReport is the memory of K suspended rollouts.
type SuspendedReport struct {
	Rollouts        int   `json:"rollouts"`
	Connections     int   `json:"connections"`
	ContextTokens   int   `json:"context_tokens"` // input tokens of each at its suspension
	ServerSuspended int64 `json:"server_suspended"`
	HeapBefore      int64 `json:"heap_before"`
	HeapHeld        int64 `json:"heap_held"`
	HeapPerRollout  int64 `json:"heap_bytes_per_rollout"`
	RSSBefore       int64 `json:"rss_before"`
	RSSHeld         int64 `json:"rss_held"`
	RSSPerRollout   int64 `json:"rss_bytes_per_rollout"`
	StackPerRollout int64 `json:"stack_bytes_per_rollout"`
	// Resumes appends to one more rollout were timed while the others were held, from the
	// append's write to the next response.done (or terminal event); ResumeP50 is their median.
	Resumes   int           `json:"resumes"`
	ResumeP50 time.Duration `json:"resume_p50_ns"`
	// Requested is -suspended when the server's per-key quota of live rollouts made the soak
	// hold fewer (Rollouts, plus the timed one, fit the quota); 0 otherwise.
	Requested int `json:"requested,omitempty"`
	// Error says why the measurement failed (the soak then fails).
	Error string `json:"error,omitempty"`
}

func newReport(cfg Config, t *target) *Report {
	target := "in-process"
	if cfg.URL != "" {
		target = t.wsURL
	}
	return &Report{Target: target, Connections: cfg.Connections, Turns: cfg.Turns, Lanes: cfg.Lanes, Duration: cfg.Duration,
		Seed: cfg.Seed, Rates: cfg.Rates, Resources: Resources{Source: t.probe.describe(), Tolerance: cfg.Tolerance}}
}

func (rep *Report) fill(st *stats, before, peak, after sample, took time.Duration, settled bool) {
	rep.Rollouts = map[string]map[string]int64{}
	for sh := range st.rollouts {
		m := map[string]int64{}
		for o := range numOutcomes {
			m[o.String()] = st.rollouts[sh][o].Load()
		}
		rep.Rollouts[shape(sh).String()] = m
	}
	rep.Verified = st.completed()
	rep.Steps = st.steps.Load()
	rep.Frames = st.frames.Load()
	rep.Bytes = st.bytes.Load()
	rep.Dials = st.dials.Load()
	rep.Chaos = Chaos{
		DisconnectsSuspended: st.disconnectsSuspended.Load(), DisconnectsSampling: st.disconnectsSampling.Load(),
		CancelsSuspended: st.cancelsSuspended.Load(), CancelsSampling: st.cancelsSampling.Load(), CancelsTooLate: st.cancelRaceLost.Load(),
		BadFrames: st.badFrames.Load(), BadAppends: st.badAppends.Load(), BadAnswered: st.badAnswered.Load(),
		SlowReaders: st.slowReaders.Load(), SlowDropped: st.slowDropped.Load(), StalledReaders: st.stalledReaders.Load(), StallsNotDropped: st.stallsNotDropped.Load(),
	}
	rep.Errors = snapshot(&st.errorCodes)
	rep.ColdContinuations = st.coldContinuations.Load()
	rep.ItemsVerified = st.itemsVerified.Load()
	rep.ItemsLost = st.itemsLost.Load()
	rep.ItemsDuplicated = st.itemsDuplicated.Load()
	rep.EventsLost = st.eventsLost.Load()
	rep.EventsDuplicated = st.eventsDuplicated.Load()
	rep.ErrorsLost = st.errorsLost.Load()
	rep.Violations = st.violations.Load()
	st.mu.Lock()
	rep.Samples = append([]string(nil), st.samples...)
	st.mu.Unlock()
	lg, lm := before.Goroutines+int64(math.Ceil(float64(before.Goroutines)*rep.Resources.Tolerance)), rep.Resources.MemoryLimit
	rep.Resources.Before, rep.Resources.Peak, rep.Resources.After = before, peak, after
	rep.Resources.SettledIn = took
	rep.Resources.GoroutinesLimit = lg
	rep.Resources.OK = settled
	mem := func(s sample) int64 {
		if rep.Resources.Memory == "heap" {
			return s.Heap
		}
		return s.RSS
	}

	if w := rep.Warmup; w != nil && w.Lost+w.Duplicated+w.Violations > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("warm-up: %d lost, %d duplicated, %d violations", w.Lost, w.Duplicated, w.Violations))
	}
	if rep.Verified == 0 {
		rep.Failures = append(rep.Failures, "no rollout completed")
	}
	if n := rep.ItemsLost + rep.ItemsDuplicated; n > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d items lost, %d duplicated", rep.ItemsLost, rep.ItemsDuplicated))
	}
	if n := rep.EventsLost + rep.EventsDuplicated; n > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d events lost, %d duplicated", rep.EventsLost, rep.EventsDuplicated))
	}
	if rep.ErrorsLost > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d bad frames never answered", rep.ErrorsLost))
	}
	if rep.Violations > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d protocol violations", rep.Violations))
	}
	if n := rep.Errors["upgrade 429 quota_exceeded"]; n > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d connections refused by the server's per-key connection quota (quota_exceeded): "+
			"the load held fewer than -connections; start tether serve with -key-connections 0", n))
	}
	if !settled {
		var why []string
		if after.Conns != 0 || after.Live != 0 {
			why = append(why, fmt.Sprintf("%d connections and %d rollouts still open", after.Conns, after.Live))
		}
		if after.Goroutines > lg {
			why = append(why, fmt.Sprintf("goroutines %d > %d", after.Goroutines, lg))
		}
		if mem(after) > lm {
			why = append(why, fmt.Sprintf("%s %s > %s", rep.Resources.Memory, mib(mem(after)), mib(lm)))
		}
		rep.Failures = append(rep.Failures, fmt.Sprintf("resources did not return within %.0f%% of the start in %s: %s",
			rep.Resources.Tolerance*100, took.Round(time.Millisecond), strings.Join(why, ", ")))
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteText writes the report for people.
func (rep *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("soak: %s server, %d connections (%d append, %d public) × %d turns, %s, seed %d",
		rep.Target, rep.Connections, (rep.Connections+1)/2, rep.Connections/2, rep.Turns, rep.Duration, rep.Seed)
	if rep.Lanes > 0 {
		p("lanes: %d named lanes per connection (stream_id lane-0 … lane-%d)", rep.Lanes, rep.Lanes-1)
	}
	p("")
	p("%-8s %10s %10s %8s %8s %8s %7s %12s", "rollouts", "completed", "cancelled", "aborted", "dropped", "refused", "broken", "interrupted")
	for _, sh := range []string{"append", "public"} {
		m := rep.Rollouts[sh]
		p("%-8s %10d %10d %8d %8d %8d %7d %12d", sh, m["completed"], m["cancelled"], m["aborted"], m["dropped"], m["refused"], m["broken"], m["interrupted"])
	}
	secs := rep.Elapsed.Seconds()
	p("verified %d rollouts (%.0f/s), %d sampling steps (%.0f/s), %d frames (%.1f MiB) received, %d connections dialed, load %s",
		rep.Verified, float64(rep.Verified)/secs, rep.Steps, float64(rep.Steps)/secs, rep.Frames, float64(rep.Bytes)/(1<<20), rep.Dials, rep.Elapsed.Round(time.Millisecond))
	c := rep.Chaos
	p("chaos: disconnects %d (suspended %d, sampling %d); cancels %d (suspended %d, sampling %d, of which %d too late); bad frames %d + bad appends %d, %d answered as expected; slow readers %d (%d dropped by the server); stalled readers %d (%d not dropped)",
		c.DisconnectsSuspended+c.DisconnectsSampling, c.DisconnectsSuspended, c.DisconnectsSampling,
		c.CancelsSuspended+c.CancelsSampling, c.CancelsSuspended, c.CancelsSampling, c.CancelsTooLate,
		c.BadFrames, c.BadAppends, c.BadAnswered, c.SlowReaders, c.SlowDropped, c.StalledReaders, c.StallsNotDropped)
	p("errors received by code: %s", counts(rep.Errors))
	if rep.ServerErrors != nil {
		p("errors counted by the server: %s", counts(rep.ServerErrors))
	}
	p("public continuations that reported cached_tokens 0 (cold path): %d", rep.ColdContinuations)
	p("peers dropped by the server: %d%s", rep.PeersDropped, func() string {
		if len(rep.DropReasons) == 0 {
			return ""
		}
		return " (" + counts(rep.DropReasons) + ")"
	}())
	p("")
	p("items verified %d: lost %d, duplicated %d; events lost %d, duplicated %d; bad frames unanswered %d; violations %d",
		rep.ItemsVerified, rep.ItemsLost, rep.ItemsDuplicated, rep.EventsLost, rep.EventsDuplicated, rep.ErrorsLost, rep.Violations)
	for _, s := range rep.Samples {
		p("  violation: %s", s)
	}
	p("")
	r := rep.Resources
	p("resources (%s)", r.Source)
	p("%-12s %12s %12s %12s %12s %12s", "", "cold", "before", "peak", "after", "limit")
	p("%-12s %12d %12d %12d %12d %12d", "goroutines", r.Cold.Goroutines, r.Before.Goroutines, r.Peak.Goroutines, r.After.Goroutines, r.GoroutinesLimit)
	rssLimit, heapLimit := mib(r.MemoryLimit), ""
	if r.Memory == "heap" {
		rssLimit, heapLimit = "(unchecked)", mib(r.MemoryLimit)
	}
	p("%-12s %12s %12s %12s %12s %12s", "RSS", mib(r.Cold.RSS), mib(r.Before.RSS), mib(r.Peak.RSS), mib(r.After.RSS), rssLimit)
	if r.Before.RSSAnon > 0 {
		p("%-12s %12s %12s %12s %12s", " RSS anon", mib(r.Cold.RSSAnon), mib(r.Before.RSSAnon), mib(r.Peak.RSSAnon), mib(r.After.RSSAnon))
		p("%-12s %12s %12s %12s %12s", " RSS file", mib(r.Cold.RSSFile), mib(r.Before.RSSFile), mib(r.Peak.RSSFile), mib(r.After.RSSFile))
	}
	p("%-12s %12s %12s %12s %12s %12s", "heap", mib(r.Cold.Heap), mib(r.Before.Heap), mib(r.Peak.Heap), mib(r.After.Heap), heapLimit)
	if r.Memory == "heap" {
		p("(race detector: its shadow memory is never returned to the OS, so the heap after GC is checked instead of RSS)")
	}
	if len(r.Before.Runtime) > 0 && len(r.After.Runtime) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.After.Runtime) {
			if d := r.After.Runtime[k] - r.Before.Runtime[k]; d != 0 {
				parts = append(parts, fmt.Sprintf("%s %+.1f", k, float64(d)/(1<<20)))
			}
		}
		p("Go runtime memory, after − before (MiB): %s", strings.Join(parts, ", "))
	}
	if w := rep.Warmup; w != nil {
		p("cold: the server just started; before: after a warm-up of %s at the same load (%d rollouts verified: %d lost, %d duplicated, %d violations)",
			w.Duration, w.Verified, w.Lost, w.Duplicated, w.Violations)
		for _, s := range w.Samples {
			p("  warm-up violation: %s", s)
		}
	}
	p("peak: %d connections, %d live rollouts (%d suspended); after settled in %s: %s",
		r.Peak.Conns, r.Peak.Live, r.Peak.Suspended, r.SettledIn.Round(time.Millisecond), okString(r.OK, "within", "NOT within")+fmt.Sprintf(" %.0f%% of the start", r.Tolerance*100))
	if s := rep.Suspended; s != nil {
		if s.Requested > 0 {
			p("suspended rollouts: %d held instead of -suspended %d, to fit the server's quota of live rollouts per key (tether serve -key-rollouts) with the timed one",
				s.Rollouts, s.Requested)
		}
		if s.Error != "" {
			p("suspended rollouts: %d on %d connections: FAILED: %s", s.Rollouts, s.Connections, s.Error)
		} else {
			p("suspended rollouts: %d held on %d connections (%d-token contexts): %s; goroutine stacks %d B per rollout; RSS %s → %s, %s",
				s.Rollouts, s.Connections, s.ContextTokens, heapText(rep.Target == "in-process", s),
				s.StackPerRollout, mib(s.RSSBefore), mib(s.RSSHeld), perRollout(s.RSSPerRollout, "the server returned memory to the OS meanwhile"))
			speed := ""
			if rep.Target != "in-process" {
				speed = ", at the server's model speed"
			}
			p("resume of one more rollout while they are held (append to its next response.done%s): p50 %s over %d appends",
				speed, s.ResumeP50.Round(time.Microsecond), s.Resumes)
		}
	}
	p("total run time %.1fs: warm-up %s, load %.1fs (grace included), settling and the suspended measurement %.1fs",
		rep.Total.Seconds(), warmupString(rep), rep.Elapsed.Seconds(), max(rep.Total-rep.Elapsed-rep.warmupTime(), 0).Seconds())
	p("")
	if rep.Pass {
		p("PASS")
	} else {
		p("FAIL: %s", strings.Join(rep.Failures, "; "))
	}
}

// heapText is the heap part of the suspended measurement. In-process the heap is read after a
// GC; a server's /metrics heap includes garbage, so a collection between the two readings can
// make it shrink while the rollouts are held, which says nothing per rollout.
func heapText(inProcess bool, s *SuspendedReport) string {
	if inProcess {
		return fmt.Sprintf("heap after GC %s → %s, %s", mib(s.HeapBefore), mib(s.HeapHeld),
			perRollout(s.HeapPerRollout, "the heap shrank"))
	}
	return fmt.Sprintf("heap (no GC: includes garbage) %s → %s, %s", mib(s.HeapBefore), mib(s.HeapHeld),
		perRollout(s.HeapPerRollout, "the server collected garbage meanwhile"))
}

// perRollout is "N B per rollout", or, for a figure below zero, that there is none and why.
func perRollout(b int64, why string) string {
	if b < 0 {
		return "no per-rollout figure (" + why + ")"
	}
	return fmt.Sprintf("%d B per rollout", b)
}

func okString(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// warmupTime is how long the warm-up's load ran (0: none).
func (rep *Report) warmupTime() time.Duration {
	if rep.Warmup == nil {
		return 0
	}
	return rep.Warmup.Elapsed
}

func warmupString(rep *Report) string {
	if rep.Warmup == nil {
		return "none"
	}
	return fmt.Sprintf("%.1fs", rep.Warmup.Elapsed.Seconds())
}
