package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/wsguard"
	"github.com/tetherd/tether/session"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
)

// DensityConfig configures Density.
type DensityConfig struct {
	// Rollouts is how many append-shape rollouts are held suspended (N), DensityPerConn per
	// WebSocket connection.
	Rollouts int
	// InputBytes is the size of each rollout's user input (0: a 14-byte sentence, a context
	// of about 20 tokens at the suspension, as in the 100,000-rollout figure of docs/soak.md).
	InputBytes int
	// Resumes is how many held rollouts are resumed one at a time and timed per tier (0: 200,
	// at most Rollouts).
	Resumes int
	// ParkAfter is the parked tier's -park-after (0: 20ms). Both tiers pause this long and
	// more before each timed resume, so that both resume from an idle process.
	ParkAfter time.Duration
	// PerConn is how many rollouts are held on each WebSocket connection (0: DensityPerConn);
	// the in-process server's -max-suspended is set to allow them. A million rollouts need
	// more than 50 per connection: each connection is two file descriptors in this process.
	PerConn int
	// ParkedOnly skips the live tier (a goroutine per rollout): a million live rollouts need
	// tens of GiB, parked ones a few.
	ParkedOnly bool
	// Progress, when set, hears what the run is doing.
	Progress func(msg string)
}

// DensityPerConn is the default of DensityConfig.PerConn (the server's default
// -max-suspended is 64).
const DensityPerConn = 50

// DensityReport is the result of Density: the same N rollouts held live (a goroutine each)
// and parked (-park-after), each tier against its own in-process server.
type DensityReport struct {
	Rollouts      int         `json:"rollouts"`
	PerConn       int         `json:"per_connection"`
	Connections   int         `json:"connections"`
	ContextTokens int         `json:"context_tokens"` // input tokens of each rollout at its suspension
	Live          DensityTier `json:"live"`           // zero with DensityConfig.ParkedOnly
	Parked        DensityTier `json:"parked"`
}

// DensityTier is one tier's figures. Bytes are this process's (the server and its clients)
// after runtime.GC, held minus before the rollouts were created (the connections were open).
type DensityTier struct {
	HeapPerRollout  int64 `json:"heap_bytes_per_rollout"`  // HeapAlloc
	StackPerRollout int64 `json:"stack_bytes_per_rollout"` // StackInuse
	BytesPerRollout int64 `json:"bytes_per_rollout"`       // the two
	// GoroutinesBefore and GoroutinesHeld are runtime.NumGoroutine with the connections open,
	// before and while the rollouts are held.
	GoroutinesBefore int64 `json:"goroutines_before"`
	GoroutinesHeld   int64 `json:"goroutines_held"`
	// Resumes appends, each to a different held rollout, one at a time: from the write of
	// the append to its response.done.
	Resumes   int           `json:"resumes"`
	ResumeP50 time.Duration `json:"resume_p50_ns"`
	ResumeP99 time.Duration `json:"resume_p99_ns"`
}

// Density holds cfg.Rollouts append-shape rollouts suspended at their first tool call over real
// WebSocket connections to an in-process server, twice: live (no parking), then parked
// (only parked with cfg.ParkedOnly). It
// reports the bytes per rollout, the goroutines, and the time of a resume from each tier.
func Density(ctx context.Context, cfg DensityConfig) (*DensityReport, error) {
	if cfg.Rollouts < 1 {
		return nil, errors.New("soak: density: want at least 1 rollout")
	}
	if cfg.Resumes <= 0 {
		cfg.Resumes = 200
	}
	cfg.Resumes = min(cfg.Resumes, cfg.Rollouts)
	if cfg.ParkAfter <= 0 {
		cfg.ParkAfter = 20 * time.Millisecond
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	if cfg.PerConn <= 0 {
		cfg.PerConn = DensityPerConn
	}
	rep := &DensityReport{Rollouts: cfg.Rollouts, PerConn: cfg.PerConn, Connections: (cfg.Rollouts + cfg.PerConn - 1) / cfg.PerConn}
	tiers := []bool{false, true}
	if cfg.ParkedOnly {
		tiers = tiers[1:]
	}
	for _, parked := range tiers {
		tier, tokens, err := densityTier(ctx, cfg, parked)
		if err != nil {
			return nil, err
		}
		rep.ContextTokens = tokens
		if parked {
			rep.Parked = *tier
		} else {
			rep.Live = *tier
		}
	}
	return rep, nil
}

// heldRollout is a rollout Density holds: its id and pending call_id.
type heldRollout struct{ id, call string }

// densityConn is one client connection of Density.
type densityConn struct {
	ws   *websocket.Conn
	held []heldRollout
}

// densityTier runs one tier (see Density) against a new in-process server.
func densityTier(ctx context.Context, cfg DensityConfig, parked bool) (*DensityTier, int, error) {
	name := "live"
	opts := server.Options{
		Limits: session.Limits{
			MaxSuspended:   cfg.PerConn + 1,
			ShutdownGrace:  time.Second,
			SuspendTimeout: time.Hour,
		},
		KeyConnections: -1,
		KeyRollouts:    -1,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if parked {
		name, opts.ParkAfter = "parked", cfg.ParkAfter
	}
	srv := server.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = hs.Shutdown(sctx)
		_ = hs.Close()
	}()
	url := "ws://" + ln.Addr().String() + "/v1/responses"
	m := srv.Metrics()

	n := (cfg.Rollouts + cfg.PerConn - 1) / cfg.PerConn
	conns := make([]*densityConn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.ws.CloseNow()
			}
		}
	}()
	cfg.Progress(fmt.Sprintf("%s: connecting %d connections", name, n))
	h := http.Header{"Openai-Beta": []string{appendBeta}}
	for i := range conns {
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(nil), CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return nil, 0, fmt.Errorf("density: connect: %w", err)
		}
		ws.SetReadLimit(-1)
		conns[i] = &densityConn{ws: ws}
	}
	before := densitySample()

	cfg.Progress(fmt.Sprintf("%s: holding %d rollouts", name, cfg.Rollouts))
	input := "run the checks"
	if cfg.InputBytes > 0 {
		input = strings.Repeat("check the logs ", cfg.InputBytes/15+1)[:cfg.InputBytes]
	}
	create, _ := json.Marshal(map[string]any{"type": "response.create", "model": "sim", "input": input, "store": false,
		"tools":    []any{map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}},
		"metadata": map[string]string{"sim.calls": "2"}})
	errs := make([]error, n)
	tokens := make([]int, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, c := range conns {
		k := min(cfg.PerConn, cfg.Rollouts-i*cfg.PerConn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for range k {
				if err := c.ws.Write(ctx, websocket.MessageText, create); err != nil {
					errs[i] = err
					return
				}
				d, err := readDone(ctx, c.ws)
				if err != nil {
					errs[i] = err
					return
				}
				c.held = append(c.held, heldRollout{id: d.ResponseID, call: d.Pending[0]})
				tokens[i] = d.Usage.InputTokens
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("density: holding rollouts: %w", err)
	}
	want := int64(cfg.Rollouts)
	gauge := &m.Suspended
	if parked {
		gauge = &m.Parked
	}
	for deadline := time.Now().Add(time.Minute + cfg.ParkAfter); gauge.Load() != want; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, 0, fmt.Errorf("density: the server holds %d %s rollouts, want %d", gauge.Load(), name, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held := densitySample()
	tier := &DensityTier{
		HeapPerRollout:   (held.heap - before.heap) / want,
		StackPerRollout:  (held.stack - before.stack) / want,
		GoroutinesBefore: before.goroutines,
		GoroutinesHeld:   held.goroutines,
	}
	tier.BytesPerRollout = tier.HeapPerRollout + tier.StackPerRollout

	cfg.Progress(fmt.Sprintf("%s: timing %d resumes", name, cfg.Resumes))
	times := make([]time.Duration, 0, cfg.Resumes)
	for j := range cfg.Resumes {
		// Spread over the connections: the j-th connection's first rollout, then its second…
		c := conns[j%n]
		r := c.held[(j/n)%len(c.held)]
		// The previous resumed rollout suspends again and, parked, parks again: wait for it
		// (and as long in the live tier).
		time.Sleep(cfg.ParkAfter + 5*time.Millisecond)
		for deadline := time.Now().Add(10 * time.Second); gauge.Load() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, 0, fmt.Errorf("density: %d %s rollouts before resume %d, want %d", gauge.Load(), name, j, want)
			}
		}
		b, _ := json.Marshal(map[string]any{"type": "response.append", "response_id": r.id,
			"input": []any{map[string]any{"type": "function_call_output", "call_id": r.call, "output": "ok"}}})
		start := time.Now()
		if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
			return nil, 0, err
		}
		if _, err := readDone(ctx, c.ws); err != nil {
			return nil, 0, fmt.Errorf("density: resume: %w", err)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	tier.Resumes = len(times)
	tier.ResumeP50 = times[len(times)/2]
	tier.ResumeP99 = times[min(len(times)-1, len(times)*99/100)]
	return tier, tokens[0], nil
}

// densityDone is what Density reads of a response.done.
type densityDone struct {
	Type       string   `json:"type"`
	ResponseID string   `json:"response_id"`
	Pending    []string `json:"pending_call_ids"`
	Usage      struct {
		InputTokens int `json:"input_tokens"`
	} `json:"usage"`
}

// readDone reads frames up to the next response.done; any terminal or error frame is an error.
func readDone(ctx context.Context, ws *websocket.Conn) (*densityDone, error) {
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		var d densityDone
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, err
		}
		switch d.Type {
		case "response.done":
			if len(d.Pending) == 0 {
				return nil, fmt.Errorf("response.done without pending calls: %.200s", b)
			}
			return &d, nil
		case "error", "response.completed", "response.incomplete", "response.failed":
			return nil, fmt.Errorf("%.300s", b)
		}
	}
}

type densityReading struct{ heap, stack, goroutines int64 }

// densitySample reads this process's heap, stacks and goroutines after a GC.
func densitySample() densityReading {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return densityReading{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), goroutines: int64(runtime.NumGoroutine())}
}

// WriteText writes the report as text.
func (r *DensityReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "density: %d append-shape rollouts suspended at their first tool call (%d-token contexts), %d per connection over %d connections\n",
		r.Rollouts, r.ContextTokens, r.PerConn, r.Connections)
	fmt.Fprintf(w, "%-7s %10s %10s %10s %12s %12s %10s %10s\n", "tier", "B/rollout", "heap B", "stack B", "goroutines", "(no rollouts)", "resume p50", "resume p99")
	for _, t := range []struct {
		name string
		t    DensityTier
	}{{"live", r.Live}, {"parked", r.Parked}} {
		if t.t.Resumes == 0 {
			continue // the tier did not run
		}
		fmt.Fprintf(w, "%-7s %10d %10d %10d %12d %12d %10s %10s\n", t.name, t.t.BytesPerRollout, t.t.HeapPerRollout, t.t.StackPerRollout,
			t.t.GoroutinesHeld, t.t.GoroutinesBefore, t.t.ResumeP50.Round(time.Microsecond), t.t.ResumeP99.Round(time.Microsecond))
	}
	if r.Live.ResumeP50 > 0 {
		fmt.Fprintf(w, "resume from parked / from live at p50: %.2f×\n", float64(r.Parked.ResumeP50)/float64(r.Live.ResumeP50))
	}
}
