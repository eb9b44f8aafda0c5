package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/tetherd/tether/sampler/sim"
)

// Run runs the bench described by cfg against the server at cfg.URL and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ep, err := parseEndpoints(cfg.URL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	b := &bencher{cfg: cfg, ep: ep, prog: newProgress(cfg.Progress)}
	defer b.prog.done()
	if cfg.Realtime {
		b.speed = cfg.RealtimeSpeed
	}
	if cfg.PID > 0 {
		if _, err := readCPU(cfg.PID); err != nil {
			return nil, fmt.Errorf("bench: server CPU: %w", err)
		}
		b.cpu = true
	}
	echo, err := startEcho()
	if err != nil {
		return nil, err
	}
	defer echo.close()
	if b.floor, err = echo.dial(ctx); err != nil {
		return nil, err
	}
	defer b.floor.close()

	for _, t := range cfg.Transports {
		cnt := &counter{}
		b.clients = append(b.clients, &transportClient{name: t, cnt: cnt, http: newHTTPClient(cnt)})
	}
	defer func() {
		for _, c := range b.clients {
			c.http.CloseIdleConnections()
		}
	}()
	b.model = cfg.Model
	if b.model == "" {
		if b.model, err = detectModel(ctx, b.clients[0].http, ep.base, cfg.APIKey); err != nil {
			return nil, err
		}
	}
	b.engine = b.model != defaultModel || cfg.Engine != ""
	if b.engine && cfg.Realtime {
		return nil, fmt.Errorf("bench: -realtime paces the sim; the model %q is not the sim", b.model)
	}
	cfg.modeDefaults(b.engine)
	b.cfg = cfg

	rep := &Report{
		Version:   ReportVersion,
		StartedAt: time.Now().UTC().Format(time.RFC3339),
		Machine:   Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
		Server:    ServerInfo{URL: ep.base, Spawned: cfg.Spawned, CPUMeasured: b.cpu, ClockTicks: clockTicks, GOMAXPROCS: cfg.ServerCPUs},
		Mode:      "instant",
		Workload: Workload{Rollouts: cfg.Rollouts, Calls: cfg.Calls, Turns: cfg.Calls + 1,
			ToolOutputBytes: cfg.ToolOutputBytes, WarmupCalls: max(cfg.WarmupCalls, 0)},
	}
	if b.cpu {
		rep.Server.PID = cfg.PID
	}
	if cfg.Realtime {
		rep.Mode = "realtime"
		rep.RealtimeSpeed = cfg.RealtimeSpeed.String()
	}
	rep.Workload.Model = b.model
	if b.engine {
		rep.Mode = "engine"
		rep.Server.Engine = cfg.Engine
		rep.Workload.MaxOutputTokens = cfg.MaxOutputTokens
	}
	run := b.rollout
	if b.engine {
		run = b.engineRollout
	}

	// Warm-up: one short rollout per transport, discarded (connections, code paths, the
	// tokenizer's tables on both sides).
	if cfg.WarmupCalls > 0 {
		for _, tc := range b.clients {
			b.prog.set("warm-up %s", tc.name)
			if _, err := run(ctx, tc, -1, cfg.WarmupCalls); err != nil {
				return nil, fmt.Errorf("bench: warm-up %s: %w", tc.name, err)
			}
		}
	}
	// The rollouts, interleaved across transports so that a slow moment of a shared machine
	// does not fall on one transport only.
	samples := make(map[string][]TurnSample)
	cpuTotal := make(map[string]time.Duration)
	for r := 0; r < cfg.Rollouts; r++ {
		for _, tc := range b.clients {
			var c0 time.Duration
			if b.cpu {
				c0, _ = readCPU(cfg.PID)
			}
			s, err := run(ctx, tc, r, cfg.Calls)
			if err != nil {
				return nil, fmt.Errorf("bench: %s rollout %d: %w", tc.name, r+1, err)
			}
			if b.cpu {
				c1, _ := readCPU(cfg.PID)
				cpuTotal[tc.name] += c1 - c0
			}
			samples[tc.name] = append(samples[tc.name], s...)
		}
	}
	for _, tc := range b.clients {
		rep.Transports = append(rep.Transports, summarize(tc.name, samples[tc.name], cpuTotal[tc.name], b.cpu, cfg, b.engine))
	}
	finishRatios(rep)

	if b.engine { // the throughput measurements drive the sim (its metadata)
		rep.ElapsedS = time.Since(b.prog.start).Seconds()
		return rep, nil
	}
	if cfg.StreamTokens > 0 {
		b.prog.set("events/s: one rollout, %d tokens", cfg.StreamTokens)
		ev, err := b.events(ctx, 1, cfg.StreamTokens)
		if err != nil {
			return nil, fmt.Errorf("bench: events/s: %w", err)
		}
		rep.Events.Single = ev
	}
	if cfg.Concurrent > 0 {
		b.prog.set("events/s: %d concurrent rollouts, %d tokens each", cfg.Concurrent, cfg.ConcurrentTokens)
		ev, err := b.events(ctx, cfg.Concurrent, cfg.ConcurrentTokens)
		if err != nil {
			return nil, fmt.Errorf("bench: events/s, %d concurrent: %w", cfg.Concurrent, err)
		}
		rep.Events.Concurrent = ev
	}
	if cfg.Concurrent > 0 && cfg.ConcurrentCalls > 0 {
		b.prog.set("turns/s: %d concurrent rollouts, %d calls each", cfg.Concurrent, cfg.ConcurrentCalls)
		tr, err := b.turns(ctx, cfg.Concurrent, cfg.ConcurrentCalls)
		if err != nil {
			return nil, fmt.Errorf("bench: turns/s, %d concurrent: %w", cfg.Concurrent, err)
		}
		rep.Events.Turns = tr
	}
	rep.ElapsedS = time.Since(b.prog.start).Seconds()
	return rep, nil
}

type bencher struct {
	cfg     Config
	ep      endpoints
	model   string    // the model of every request
	engine  bool      // engine mode (engine.go)
	speed   sim.Speed // the sim speed the rollouts request (instant unless realtime)
	cpu     bool      // server CPU is read from /proc
	floor   *echoClient
	clients []*transportClient
	prog    *benchProgress
}

// transportClient is the client side of one transport, kept across its rollouts.
type transportClient struct {
	name string
	cnt  *counter
	http *http.Client // HTTP transports; also dials the WebSockets, so bytes are counted
}

func (b *bencher) driver(ctx context.Context, tc *transportClient) (driver, error) {
	switch tc.name {
	case Engine:
		return &engineDriver{client: tc.http, url: chatURL(b.cfg.Engine), apiKey: b.cfg.EngineAPIKey}, nil
	case HTTP, HTTPPrev:
		return &httpDriver{client: tc.http, url: b.ep.responses, apiKey: b.cfg.APIKey, engine: b.engine}, nil
	}
	c, err := dialWS(ctx, b.ep.ws, b.cfg.APIKey, tc.name == Append, tc.http)
	if err != nil {
		return nil, err
	}
	return &wsDriver{c: c, isAppend: tc.name == Append, engine: b.engine}, nil
}

// request is the body of a create (POST body, or the WebSocket frame with "type").
type request struct {
	Type               string            `json:"type,omitempty"`
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	MaxOutputTokens    *int              `json:"max_output_tokens,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Store              *bool             `json:"store,omitempty"`
	Stream             bool              `json:"stream,omitempty"`
}

type appendFrame struct {
	Type       string          `json:"type"`
	ResponseID string          `json:"response_id"`
	Input      json.RawMessage `json:"input"`
}

// rollout runs one rollout of calls tool calls over tc; rollout -1 is a warm-up (its samples
// are returned but not kept). It returns one sample per turn.
func (b *bencher) rollout(ctx context.Context, tc *transportClient, rollout, calls int) ([]TurnSample, error) {
	d, err := b.driver(ctx, tc)
	if err != nil {
		return nil, err
	}
	defer d.close()
	md := metadata(calls, b.speed)
	tools := []json.RawMessage{shellTool}
	var (
		samples  []TurnSample
		history  []json.RawMessage // http: the whole conversation so far
		prevID   string
		nCalls   int
		in       = userInput()
		cpuPrev  time.Duration
		bytesPrv = tc.cnt.n.Load()
	)
	if b.cpu {
		cpuPrev, _ = readCPU(b.cfg.PID)
	}
	seed := rollout
	if seed < 0 {
		seed = 1 << 20 // warm-up outputs differ from every measured rollout's
	}
	for turn := 1; ; turn++ {
		if turn > calls+1 {
			return nil, fmt.Errorf("turn %d: the rollout did not end after %d tool calls", turn, calls)
		}
		var payload []byte
		var err error
		f, t := false, true
		switch tc.name {
		case HTTP:
			history = append(history, in.wire...)
			payload, err = json.Marshal(request{Model: "sim", Input: joinRaw(nil, history), Tools: tools,
				Metadata: md, Store: &f, Stream: true})
		case HTTPPrev:
			payload, err = json.Marshal(request{Model: "sim", Input: joinRaw(nil, in.wire), Tools: tools,
				Metadata: md, PreviousResponseID: prevID, Store: &t, Stream: true})
		case WS:
			payload, err = json.Marshal(request{Type: "response.create", Model: "sim", Input: joinRaw(nil, in.wire),
				Tools: tools, Metadata: md, PreviousResponseID: prevID, Store: &f})
		case Append:
			if turn == 1 {
				payload, err = json.Marshal(request{Type: "response.create", Model: "sim", Input: joinRaw(nil, in.wire),
					Tools: tools, Metadata: md})
			} else {
				payload, err = json.Marshal(appendFrame{Type: "response.append", ResponseID: prevID, Input: joinRaw(nil, in.wire)})
			}
		}
		if err != nil {
			return nil, err
		}
		b.prog.turn(tc.name, rollout, b.cfg.Rollouts, turn, calls+1)

		res, err := d.turn(ctx, payload)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", turn, err)
		}
		if res.overhead == 0 {
			return nil, fmt.Errorf("turn %d: no response.output_item.added", turn)
		}
		s := TurnSample{
			Rollout:      rollout + 1,
			Turn:         turn,
			OverheadMS:   ms(res.overhead),
			TurnMS:       ms(res.total),
			FrameBytes:   len(payload),
			BytesSent:    tc.cnt.n.Load() - bytesPrv,
			ServerCPUMS:  -1,
			InputTokens:  res.usage.Input,
			CachedTokens: res.usage.Details.Cached,
			OutputTokens: res.usage.Output,
			Events:       res.events,
		}
		s.PrefillTokens = s.InputTokens - s.CachedTokens
		bytesPrv = tc.cnt.n.Load()
		if b.cpu {
			c, _ := readCPU(b.cfg.PID)
			s.ServerCPUMS = ms(c - cpuPrev)
			cpuPrev = c
		}
		// The floor: the same frame echoed on a raw loopback WebSocket, and one tokenization
		// of the new input.
		echoDur, err := b.floor.echo(ctx, payload)
		if err != nil {
			return nil, fmt.Errorf("floor echo: %w", err)
		}
		t0 := time.Now()
		toks := sim.RenderItems(nil, in.items)
		tokDur := time.Since(t0)
		s.FloorEchoMS, s.FloorTokenizeMS = ms(echoDur), ms(tokDur)
		s.FloorMS = s.FloorEchoMS + s.FloorTokenizeMS
		s.NewInputTokens = len(toks)
		samples = append(samples, s)
		if b.cfg.OnTurn != nil {
			b.cfg.OnTurn(tc.name, s)
		}

		if res.final {
			if turn != calls+1 {
				return nil, fmt.Errorf("the rollout answered at turn %d, want %d", turn, calls+1)
			}
			return samples, nil
		}
		if len(res.calls) == 0 {
			return nil, errors.New("turn ended without tool calls or answer")
		}
		if tc.name == HTTP {
			for _, c := range res.calls {
				history = append(history, c.item)
			}
		}
		if tc.name != Append || turn == 1 {
			prevID = res.responseID
		}
		in = outputsFor(seed, &nCalls, res.calls, b.cfg.ToolOutputBytes)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
