package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
)

// target is the server under load: in-process, or a running one at a URL.
type target struct {
	wsURL    string // ws://host:port/v1/responses
	httpBase string // http://host:port
	apiKey   string
	client   *http.Client // dials the WebSockets
	probe    probe

	// in-process only
	srv   *server.Server
	hs    *http.Server
	ln    net.Listener
	drops *dropLog
}

// sample is one reading of the server's resources.
type sample struct {
	Goroutines int64 `json:"goroutines"`
	RSS        int64 `json:"rss_bytes"`
	RSSAnon    int64 `json:"rss_anon_bytes,omitempty"` // RssAnon of /proc/PID/status, when read
	RSSFile    int64 `json:"rss_file_bytes,omitempty"` // RssFile (mapped files: the binary's pages)
	Heap       int64 `json:"heap_bytes"`               // live heap (after GC in settled in-process readings)
	Stacks     int64 `json:"stack_bytes"`              // goroutine stacks in use
	Conns      int64 `json:"-"`                        // open WebSocket connections
	Live       int64 `json:"-"`                        // rollouts sampling, suspended or queued
	Suspended  int64 `json:"-"`
	Dropped    int64 `json:"-"` // peers the server dropped (missed pong, write timeout) since it started
	// Runtime is the Go runtime's memory by class (runtime/metrics /memory/classes/…), for
	// settled in-process readings.
	Runtime map[string]int64 `json:"runtime_memory,omitempty"`
}

// memoryClasses are the runtime/metrics classes a settled in-process reading reports.
var memoryClasses = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/other:bytes",
}

func runtimeMemory() map[string]int64 {
	samples := make([]metrics.Sample, len(memoryClasses))
	for i, name := range memoryClasses {
		samples[i].Name = name
	}
	metrics.Read(samples)
	out := make(map[string]int64, len(samples))
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			name := strings.TrimSuffix(strings.TrimPrefix(s.Name, "/memory/classes/"), ":bytes")
			out[name] = int64(s.Value.Uint64())
		}
	}
	return out
}

// probe reads the server's resources.
type probe interface {
	// read samples the server. collect first runs the garbage collector and returns freed
	// memory to the OS where it can (in-process only): the settled reading.
	read(collect bool) (sample, error)
	// serverErrors returns the error frames the server counted, by code (nil if unknown).
	serverErrors() map[string]int64
	// describe says where the figures come from.
	describe() string
	// window is how long readings must be steady to count as settled.
	window() time.Duration
}

func newTarget(cfg Config) (*target, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1,
		DisableCompression:  true,
	}
	t := &target{apiKey: cfg.APIKey, client: &http.Client{Transport: tr}}
	if cfg.URL == "" {
		return t, t.startInProcess(cfg)
	}
	u := strings.TrimRight(cfg.URL, "/")
	switch {
	case strings.HasPrefix(u, "ws://"):
		t.httpBase = "http://" + strings.TrimPrefix(u, "ws://")
	case strings.HasPrefix(u, "wss://"):
		t.httpBase = "https://" + strings.TrimPrefix(u, "wss://")
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		t.httpBase = u
	default:
		return nil, fmt.Errorf("soak: -url %q: want ws://host:port/v1/responses or http://host:port", cfg.URL)
	}
	t.httpBase = strings.TrimSuffix(strings.TrimSuffix(t.httpBase, "/v1/responses"), "/v1")
	t.wsURL = "ws" + strings.TrimPrefix(t.httpBase, "http") + "/v1/responses"
	t.probe = &remoteProbe{base: t.httpBase, apiKey: cfg.APIKey, pid: cfg.PID,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	if _, err := t.probe.read(false); err != nil {
		return nil, fmt.Errorf("soak: %s: %w", t.httpBase+"/metrics", err)
	}
	return t, nil
}

// startInProcess starts a server on a loopback port in this process, with the serve
// command's limits (64 live rollouts per connection) and short dead-peer timers.
func (t *target) startInProcess(cfg Config) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	t.ln = ln
	t.drops = &dropLog{reasons: map[string]int64{}}
	t.srv = server.New(server.Options{
		MaxConnections: 0,
		Limits: session.Limits{
			PingInterval:      cfg.PingInterval,
			WriteTimeout:      cfg.WriteTimeout,
			MaxSuspended:      64,
			MaxSuspendedTotal: 1 << 20,
			ShutdownGrace:     time.Second,
		},
		KeyConnections: -1, // every soak client has one address: no per-key quotas
		KeyRollouts:    -1,
		Logger:         slog.New(t.drops),
	})
	t.hs = &http.Server{Handler: t.srv, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: nil}
	go func() { _ = t.hs.Serve(ln) }()
	t.httpBase = "http://" + ln.Addr().String()
	t.wsURL = "ws://" + ln.Addr().String() + "/v1/responses"
	t.probe = &localProbe{srv: t.srv}
	return nil
}

// dropLog is the in-process server's log handler: it keeps the reasons of "dropping peer"
// (a missed pong, a write timeout) and discards the rest.
type dropLog struct {
	mu      sync.Mutex
	reasons map[string]int64
}

func (d *dropLog) Enabled(context.Context, slog.Level) bool { return true }
func (d *dropLog) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *dropLog) WithGroup(string) slog.Handler            { return d }

func (d *dropLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "dropping peer" {
		return nil
	}
	reason := "?"
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			reason = a.Value.String()
			return false
		}
		return true
	})
	d.mu.Lock()
	d.reasons[reason]++
	d.mu.Unlock()
	return nil
}

func (d *dropLog) snapshot() map[string]int64 {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.reasons))
	for k, v := range d.reasons {
		out[k] = v
	}
	return out
}

// close stops the in-process server and the client's idle connections.
func (t *target) close() {
	if t.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = t.srv.Shutdown(ctx)
		_ = t.hs.Shutdown(ctx)
		cancel()
		_ = t.hs.Close()
	}
	t.client.CloseIdleConnections()
}

// keyQuotas reads a running server's per-key quotas from /metrics (tether_key_quota): live
// rollouts and WebSocket connections; 0 means none, or not reported (the in-process server has
// none).
func (t *target) keyQuotas() (rollouts, conns int) {
	p, ok := t.probe.(*remoteProbe)
	if !ok {
		return 0, 0
	}
	m, err := p.scrape()
	if err != nil {
		return 0, 0
	}
	return int(m[`tether_key_quota{limit="key_rollouts"}`]), int(m[`tether_key_quota{limit="key_connections"}`])
}

// localProbe reads this process: the in-process server and the soak's own client.
type localProbe struct{ srv *server.Server }

func (p *localProbe) read(collect bool) (sample, error) {
	if collect {
		runtime.GC()
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := procStatus("self")
	m := p.srv.Metrics()
	var rt map[string]int64
	if collect {
		rt = runtimeMemory()
	}
	return sample{
		Runtime:    rt,
		Goroutines: int64(runtime.NumGoroutine()),
		RSS:        status["VmRSS"],
		RSSAnon:    status["RssAnon"],
		RSSFile:    status["RssFile"],
		Heap:       int64(ms.HeapAlloc),
		Stacks:     int64(ms.StackInuse),
		Conns:      m.AppendConns.Load() + m.PublicConns.Load(),
		Live:       m.Sampling.Load() + m.Suspended.Load() + m.Queued.Load(),
		Suspended:  m.Suspended.Load(),
		Dropped:    m.PeersDropped.Load(),
	}, err
}

func (p *localProbe) window() time.Duration { return 400 * time.Millisecond }

func (p *localProbe) serverErrors() map[string]int64 { return p.srv.Metrics().Errors() }

func (p *localProbe) describe() string {
	return "this process (in-process server and the soak's client): runtime.NumGoroutine, VmRSS of /proc/self/status, HeapAlloc; settled readings after runtime.GC and debug.FreeOSMemory"
}

// procStatus reads the kB fields of /proc/<pid>/status (VmRSS, RssAnon, RssFile …) in bytes.
func procStatus(pid string) (map[string]int64, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = kb << 10
		}
	}
	return out, sc.Err()
}

// remoteProbe reads a running server's /metrics (and /proc/PID/status when PID is known).
type remoteProbe struct {
	base   string
	apiKey string
	pid    int
	client *http.Client
	last   map[string]float64
}

func (p *remoteProbe) scrape() (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, p.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if p.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format into "name{labels}" → value.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

func (p *remoteProbe) read(bool) (sample, error) {
	m, err := p.scrape()
	if err != nil {
		return sample{}, err
	}
	p.last = m
	s := sample{
		Goroutines: int64(m["go_goroutines"]),
		RSS:        int64(m["process_resident_memory_bytes"]),
		Heap:       int64(m["go_memstats_heap_alloc_bytes"]),
		Stacks:     int64(m["go_memstats_stack_inuse_bytes"]),
		Conns:      int64(m[`tether_connections{shape="append"}`] + m[`tether_connections{shape="public"}`]),
		Live:       int64(m[`tether_rollouts{state="sampling"}`] + m[`tether_rollouts{state="suspended"}`] + m[`tether_rollouts{state="queued"}`]),
		Suspended:  int64(m[`tether_rollouts{state="suspended"}`]),
		Dropped:    int64(m["tether_peers_dropped_total"]),
	}
	if _, ok := m["go_goroutines"]; !ok {
		return s, errors.New("GET /metrics has no go_goroutines: is this a Tether server?")
	}
	if p.pid > 0 {
		status, err := procStatus(strconv.Itoa(p.pid))
		if err != nil {
			return s, err
		}
		s.RSS, s.RSSAnon, s.RSSFile = status["VmRSS"], status["RssAnon"], status["RssFile"]
	}
	return s, nil
}

func (p *remoteProbe) window() time.Duration { return 5 * time.Second }

func (p *remoteProbe) serverErrors() map[string]int64 {
	m, err := p.scrape()
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for k, v := range m {
		if code, ok := strings.CutPrefix(k, `tether_errors_total{code="`); ok {
			out[strings.TrimSuffix(code, `"}`)] = int64(v)
		}
	}
	return out
}

func (p *remoteProbe) describe() string {
	rss := "process_resident_memory_bytes"
	if p.pid > 0 {
		rss = "VmRSS of /proc/" + strconv.Itoa(p.pid) + "/status"
	}
	return "the server at " + p.base + ": go_goroutines and go_memstats_heap_alloc_bytes of /metrics, " + rss + " (the server's runtime returns memory to the OS at its own pace)"
}
