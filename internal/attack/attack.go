package attack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/bench"
)

// Config configures Run.
type Config struct {
	// Exe is the tether binary to start as the server (os.Executable() when empty).
	Exe string
	// ServeArgs are extra flags of `tether serve` (after -addr 127.0.0.1:0 -model-speed instant).
	ServeArgs []string
	// Scale multiplies each attack's connection and request counts (0 means 0.25).
	Scale float64
	// Attacks names the attacks to run (nil: all, in the order of Names).
	Attacks []string
	// Hold is how long an attack keeps its connections after sending (0 means 5s).
	Hold time.Duration
	// SizeScale multiplies the attacks' frame and body sizes (0 means 1: the sizes);
	// the tests use small sizes.
	SizeScale float64
	// Budget is the server's -max-memory in bytes, which Result.Budget reports for the
	// comparison with the peak RSS (0: unknown).
	Budget int64
}

// Names are the attacks, in the order Run runs them.
var Names = []string{"tools", "store", "decode", "idle-ws", "stalled", "keepalive", "starve",
	"chat-body", "compact-body", "header-only", "get-unread", "unread-ws", "image-outputs", "key-share", "many-ws",
	"schema", "sim-schema", "chat-text", "chat-args", "chat-line", "chat-event", "chat-chunk", "resp-deltas", "resp-huge"}

// Result is one attack's outcome.
type Result struct {
	Name string
	// PeakRSS is the server's VmHWM at the end of the attack, in bytes; EndRSS its VmRSS.
	PeakRSS, EndRSS int64
	// Budget is Config.Budget: the server's -max-memory (0: unknown).
	Budget int64
	// HealthzMax, HealthzP99 and HealthzP50 are the /healthz latencies seen during the attack;
	// HealthzFailed counts probes that got no 200 within 5 s.
	HealthzMax, HealthzP99, HealthzP50 time.Duration
	HealthzFailed                      int
	// VictimOK counts the victim's creates that got 200 during the attack, of VictimTotal
	// (a client making small creates one after another, with key A when the attack uses keys).
	VictimOK, VictimTotal int
	// Outcomes counts what the attack's requests got: "200", "503 server_overloaded",
	// "ws error server_overloaded", "closed", ….
	Outcomes map[string]int
	// Note is an attack-specific finding (e.g. whether key A's response survived).
	Note string
}

// Run runs the attacks one by one, each against a fresh server, and returns their results.
func Run(ctx context.Context, cfg Config, progress io.Writer) ([]Result, error) {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Exe = exe
	}
	if cfg.Scale <= 0 {
		cfg.Scale = 0.25
	}
	if cfg.SizeScale <= 0 {
		cfg.SizeScale = 1
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 5 * time.Second
	}
	names := cfg.Attacks
	if len(names) == 0 {
		names = Names
	}
	var out []Result
	for _, name := range names {
		fn, ok := attacks[name]
		if !ok {
			return out, fmt.Errorf("attack: unknown attack %q (known: %s)", name, strings.Join(Names, ", "))
		}
		fmt.Fprintf(progress, "attack %s …\n", name)
		r, err := runOne(ctx, cfg, name, fn)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// env is what an attack gets: the server's URL, the scale and the hold time, and the tally.
type env struct {
	base  string // http://127.0.0.1:port
	scale float64
	sizes float64
	hold  time.Duration
	mu    sync.Mutex
	tally map[string]int
	note  string
	up    *faultUpstream // the misbehaving upstream of an upstream attack, else nil

	maxAnswer time.Duration // the slowest answer an attack timed (slowest)
}

func (e *env) n(full int) int { return max(1, int(float64(full)*e.scale+0.5)) }

// size scales a frame or body size.
func (e *env) size(full int) int { return max(1024, int(float64(full)*e.sizes)) }

func (e *env) count(outcome string) {
	e.mu.Lock()
	e.tally[outcome]++
	e.mu.Unlock()
}

// slowest records d as the note "slowest answer D" when it is the longest so far.
func (e *env) slowest(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d > e.maxAnswer {
		e.maxAnswer = d
		e.note = "slowest answer " + d.Round(time.Millisecond).String()
	}
}

var attacks = map[string]func(context.Context, *env){
	"tools": attackTools, "store": attackStore, "decode": attackDecode, "idle-ws": attackIdleWS,
	"stalled": attackStalled, "keepalive": attackKeepAlive, "starve": attackStarve,
	"chat-body": attackChatBody, "compact-body": attackCompactBody, "header-only": attackHeaderOnly, "get-unread": attackGetUnread,
	"unread-ws": attackUnreadWS, "image-outputs": attackImageOutputs, "key-share": attackKeyShare,
	"many-ws": attackManyWS, "schema": attackSchema, "sim-schema": attackSimSchema,
}

func init() {
	for name := range upstreamFaults {
		attacks[name] = attackUpstream
	}
}

func runOne(ctx context.Context, cfg Config, name string, fn func(context.Context, *env)) (Result, error) {
	args := append([]string{"serve", "-addr", "127.0.0.1:0", "-model-speed", "instant"}, cfg.ServeArgs...)
	if name == "starve" || name == "key-share" {
		keys, err := keyFile()
		if err != nil {
			return Result{}, err
		}
		defer os.Remove(keys)
		args = append(args, "-api-keys", keys)
	}
	e := &env{scale: cfg.Scale, sizes: cfg.SizeScale, hold: cfg.Hold, tally: map[string]int{}}
	if f, ok := upstreamFaults[name]; ok {
		up, err := startUpstream(f, e.size)
		if err != nil {
			return Result{}, err
		}
		defer up.stop()
		e.up = up
		args = append(args, up.serveArgs()...)
	}
	child, err := bench.Spawn(ctx, cfg.Exe, args...)
	if err != nil {
		return Result{}, err
	}
	defer child.Stop(10 * time.Second)
	e.base = child.URL
	probe, err := startProbe(child.URL)
	if err != nil {
		return Result{}, err
	}
	victimKey := ""
	if name == "starve" || name == "key-share" {
		victimKey = "key-a"
	}
	v := startVictim(ctx, child.URL, victimKey)
	fn(ctx, e)
	ok, total := v.stop()
	lat, failed := probe.stop()
	r := Result{Name: name, Outcomes: e.tally, Note: e.note, HealthzFailed: failed, Budget: cfg.Budget, VictimOK: ok, VictimTotal: total}
	r.PeakRSS, r.EndRSS = memOf(child.PID)
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r.HealthzMax, r.HealthzP50 = lat[len(lat)-1], lat[len(lat)/2]
		r.HealthzP99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	if len(v.failures) > 0 {
		var outs []string
		for o, n := range v.failures {
			outs = append(outs, fmt.Sprintf("%s ×%d", o, n))
		}
		sort.Strings(outs)
		r.Note = strings.TrimPrefix(r.Note+"; victim failures: "+strings.Join(outs, ", "), "; ")
	}
	return r, nil
}

// victimClient is the victim's: it connects from 127.0.0.2, so that on an open server, where
// a client's quotas and shares count by its address, the victim is another client than the
// attacker (127.0.0.1), as it would be on another machine.
var victimClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
	DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}

// victim makes small creates one after another (20 ms apart) during an attack, with key
// ("" for none), and counts how many got 200.
type victim struct {
	cancel    context.CancelFunc
	done      chan struct{}
	ok, total int
	failures  map[string]int // outcome → count, of those that got no 200
}

func startVictim(ctx context.Context, base, key string) *victim {
	ctx, cancel := context.WithCancel(ctx)
	v := &victim{cancel: cancel, done: make(chan struct{}), failures: map[string]int{}}
	go func() {
		defer close(v.done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", strings.NewReader(`{"model":"sim","input":"hi"}`))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			o, _ := outcome(victimClient.Do(req))
			if ctx.Err() != nil {
				return // cut by the end of the attack: not counted
			}
			v.total++
			if o == "200" {
				v.ok++
			} else {
				v.failures[o]++
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return v
}

// stop ends the victim and returns its successes and attempts.
func (v *victim) stop() (ok, total int) {
	v.cancel()
	<-v.done
	return v.ok, v.total
}

// keyFile writes the API keys of the starve and key-share attacks ("key-a", "key-b") to a
// temporary file.
func keyFile() (string, error) {
	f, err := os.CreateTemp("", "tether-attack-keys")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString("key-a\nkey-b\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// memOf reads VmHWM and VmRSS of pid from /proc, in bytes.
func memOf(pid int) (peak, now int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if k == "VmHWM" {
			peak = kb << 10
		} else {
			now = kb << 10
		}
	}
	return peak, now
}
