package conformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// The values of Config.Shape and Config.Contract.
const (
	ShapePublic  = "public"
	ShapeAppend  = "append"
	ShapeBoth    = "both"
	ContractSim  = "sim"
	ContractAny  = "any"
	DefaultModel = "sim"
)

// DefaultTimeout is the default of Config.Timeout.
const DefaultTimeout = 10 * time.Second

// Config says which server to test and how. The zero value needs only URL.
type Config struct {
	// URL is the server's API base, e.g. http://127.0.0.1:8787/v1 (ws:// and wss:// are
	// accepted too). WebSockets go to URL/responses, HTTP requests to URL/responses[/…].
	URL string
	// Shape selects the scenarios: ShapePublic, ShapeAppend or ShapeBoth (the default).
	Shape string
	// Contract is ContractSim (the default: the server runs Tether's sim model, whose call
	// counts, quoted answers and context fingerprints are asserted) or ContractAny (only what
	// every conforming server must do; sim-specific checks are skipped with a reason).
	Contract string
	// Run, if set, selects the scenarios whose name ("public/tools-5") it matches.
	Run *regexp.Regexp
	// APIKey, if set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Model is the model of every request; "" means "sim".
	Model string
	// SchemaFile, if set, is the Open Responses OpenAPI file: every event and Response is
	// validated against it.
	SchemaFile string
	// MaxFrame is the server's frame limit in bytes: the oversize scenarios send a frame and
	// an HTTP body of exactly MaxFrame bytes, which must be served, and of MaxFrame+1 bytes,
	// which must be refused. 0 means ask the server, once, when the first of them runs: a
	// POST /responses that declares a body of 2^40 bytes and sends none of it (Expect:
	// 100-continue). Tether refuses it at once with 413 and a message naming its limit ("…
	// exceeds the limit of N bytes"), which bounds its frames too. A server whose answer
	// names no limit, or that asks for the body, leaves it unknown: the oversize scenarios
	// are then skipped, each saying why, and the closing line counts them.
	MaxFrame int64
	// Timeout bounds every wait for the server; 0 means DefaultTimeout.
	Timeout time.Duration
	// SerialLanes says the server runs the lanes (stream_id) of a connection one after another:
	// correct (every lane FIFO, every event attributed) but not concurrent, like a Tether whose
	// responses backend carries a client connection's lanes on its one upstream WebSocket. The
	// checks that a slow lane does not hold another back are then skipped.
	SerialLanes bool
}

// Report is the outcome of Run. It marshals to the -json report.
type Report struct {
	URL      string `json:"url"`
	Shape    string `json:"shape"`
	Contract string `json:"contract"`
	Model    string `json:"model"`
	Schema   string `json:"schema,omitempty"`
	// AppendOptIn is whether the server confirmed the append opt-in on the 101 (nil when the
	// append shape was not tested).
	AppendOptIn *bool `json:"append_opt_in,omitempty"`
	// MaxFrame is the frame limit the oversize scenarios tested, in bytes, and
	// MaxFrameSource where it came from: FrameLimitFlag (Config.MaxFrame) or
	// FrameLimitServer (the server's 413 answer). Both are empty when no oversize scenario
	// ran; MaxFrameUnknown then says why, when they were skipped for it.
	MaxFrame        int64    `json:"max_frame,omitempty"`
	MaxFrameSource  string   `json:"max_frame_source,omitempty"`
	MaxFrameUnknown string   `json:"max_frame_unknown,omitempty"`
	Passed          int      `json:"passed"`
	Failed          int      `json:"failed"`
	Skipped         int      `json:"skipped"`
	DurationMS      float64  `json:"duration_ms"`
	Results         []Result `json:"scenarios"`
	// Excluded lists the cases of the specification that no scenario covers, with the reason.
	Excluded []Exclusion `json:"excluded"`
}

// OK reports whether no scenario failed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Result is the outcome of one scenario in one shape.
type Result struct {
	Name     string `json:"name"`     // "public/tools-5", "append/cancel", "equivalence/tools-5"
	Scenario string `json:"scenario"` // "tools-5"
	Shape    string `json:"shape"`    // "public", "append", or "both" (equivalence/…, cross-shape/…)
	Status   string `json:"status"`   // "pass", "fail" or "skip"
	// Reason is why the scenario was skipped, or the failure's message.
	Reason  string   `json:"reason,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Skipped lists the sim-specific checks not made under -model-contract any.
	SkippedChecks []string `json:"skipped_checks,omitempty"`
	DurationMS    float64  `json:"duration_ms"`
}

// Failure describes why a scenario failed.
type Failure struct {
	Message  string   `json:"message"`
	Expected string   `json:"expected,omitempty"`
	Received string   `json:"received,omitempty"`
	Frames   []string `json:"frames,omitempty"` // the last frames exchanged: "→" sent, "←" received
}

// Exclusion is a case of the specification the suite does not test.
type Exclusion struct {
	Case   string `json:"case"`
	Reason string `json:"reason"`
}

// runner holds what all scenarios of one Run share.
type runner struct {
	cfg      Config
	wsURL    string // ws://host/v1/responses
	httpBase string // http://host/v1
	client   *http.Client
	schema   *schemas
	appendOK bool        // the server confirmed the append opt-in
	appendNo string      // why the append scenarios are skipped, if they are
	limit    *frameLimit // the server's frame limit, once asked (frameLimit)
	noLimit  int         // scenarios skipped because the frame limit is unknown
}

// Run runs the selected scenarios one after the other against cfg.URL and writes one line per
// scenario to out — "pass", "fail" (with the expected and received frames) or "skip" (with the
// reason) — and then the line "N passed, N failed, N skipped", followed, when scenarios were
// skipped because the server's frame limit is unknown, by " (N of them need the frame limit,
// which is unknown: pass -max-frame)".
func Run(ctx context.Context, cfg Config, out io.Writer) Report {
	start := time.Now()
	cfg = cfg.withDefaults()
	rep := Report{URL: cfg.URL, Shape: cfg.Shape, Contract: cfg.Contract, Model: cfg.Model,
		Schema: cfg.SchemaFile, Excluded: Excluded(), Results: []Result{}}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	r := &runner{cfg: cfg, client: &http.Client{Transport: tr}}
	add := func(res Result) {
		rep.Results = append(rep.Results, res)
		switch res.Status {
		case "pass":
			rep.Passed++
		case "fail":
			rep.Failed++
		default:
			rep.Skipped++
		}
		writeResult(out, res)
	}
	if err := r.setup(ctx); err != nil {
		add(Result{Name: "setup", Scenario: "setup", Status: "fail", Reason: err.Error(), Failure: &Failure{Message: err.Error()}})
	} else {
		if cfg.Shape != ShapePublic {
			ok := r.appendOK
			rep.AppendOptIn = &ok
		}
		for _, sc := range scenarios {
			for _, shape := range sc.instances(cfg.Shape) {
				name := sc.fullName(shape)
				if cfg.Run != nil && !cfg.Run.MatchString(name) {
					continue
				}
				if ctx.Err() != nil {
					add(Result{Name: name, Scenario: sc.name, Shape: shape, Status: "skip", Reason: "interrupted: " + ctx.Err().Error()})
					continue
				}
				add(r.run(ctx, sc, shape))
			}
		}
	}
	rep.DurationMS = ms(time.Since(start))
	if r.limit != nil {
		if r.limit.limit > 0 {
			rep.MaxFrame, rep.MaxFrameSource = r.limit.limit, r.limit.source
		} else {
			rep.MaxFrameUnknown = r.limit.unknown
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped", rep.Passed, rep.Failed, rep.Skipped)
	if r.noLimit > 0 {
		fmt.Fprintf(out, " (%d of them %s the frame limit, which is unknown: pass -max-frame)", r.noLimit, plural(r.noLimit, "needs", "need"))
	}
	fmt.Fprintln(out)
	return rep
}

func (c Config) withDefaults() Config {
	if c.Shape == "" {
		c.Shape = ShapeBoth
	}
	if c.Contract == "" {
		c.Contract = ContractSim
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// setup checks the configuration, derives the URLs, loads the schema and asks the server
// whether it speaks the append shape.
func (r *runner) setup(ctx context.Context) error {
	cfg := r.cfg
	switch cfg.Shape {
	case ShapePublic, ShapeAppend, ShapeBoth:
	default:
		return fmt.Errorf("shape %q: want public, append or both", cfg.Shape)
	}
	switch cfg.Contract {
	case ContractSim, ContractAny:
	default:
		return fmt.Errorf("model contract %q: want sim or any", cfg.Contract)
	}
	base := strings.TrimRight(cfg.URL, "/")
	switch {
	case strings.HasPrefix(base, "http://"), strings.HasPrefix(base, "https://"):
		r.httpBase = base
	case strings.HasPrefix(base, "ws://"), strings.HasPrefix(base, "wss://"):
		r.httpBase = "http" + strings.TrimPrefix(base, "ws")
	default:
		return fmt.Errorf("url %q: want http://host/v1 (or https, ws, wss)", cfg.URL)
	}
	r.httpBase = strings.TrimSuffix(r.httpBase, "/responses")
	r.wsURL = "ws" + strings.TrimPrefix(r.httpBase, "http") + "/responses"
	if cfg.SchemaFile != "" {
		s, err := loadSchemas(cfg.SchemaFile)
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		r.schema = s
	}
	if cfg.Shape != ShapePublic {
		r.probeAppend(ctx)
	}
	return nil
}

// probeAppend dials once with the append opt-in and records whether the 101 confirms it.
func (r *runner) probeAppend(ctx context.Context) {
	h := http.Header{}
	h.Set("OpenAI-Beta", appendBeta)
	if r.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, r.wsURL, &websocket.DialOptions{HTTPHeader: h, HTTPClient: r.client})
	if err != nil {
		// Let the scenarios run: each will fail with the dial error.
		r.appendOK = true
		return
	}
	_ = ws.CloseNow()
	r.appendOK = hasToken(resp.Header.Values("OpenAI-Beta"), appendBeta)
	if !r.appendOK {
		r.appendNo = "the server does not confirm the append opt-in (no \"OpenAI-Beta: " + appendBeta + "\" on the 101)"
	}
}

// T is one run of a scenario in one shape: the scenario's handle on the server.
type T struct {
	ctx   context.Context
	cfg   Config
	r     *runner
	shape string // shapePublic or shapeAppend; "" for an equivalence scenario
	ids   idSet
	peers []*Peer
	nconn int

	failure *Failure
	skip    string
	skipped []string // sim-specific checks not made
}

type (
	failNow struct{}
	skipNow struct{}
)

// fail ends the scenario with f (the first failure wins).
func (t *T) fail(f *Failure) {
	if t.failure == nil {
		t.failure = f
	}
	panic(failNow{})
}

// Fatalf ends the scenario with a failure.
func (t *T) Fatalf(format string, args ...any) {
	f := &Failure{Message: fmt.Sprintf(format, args...)}
	if len(t.peers) > 0 {
		f.Frames = t.peers[len(t.peers)-1].recent()
	}
	t.fail(f)
}

// check fails the scenario with the message unless ok.
func (t *T) check(ok bool, format string, args ...any) {
	if !ok {
		t.Fatalf(format, args...)
	}
}

// Skipf ends the scenario as skipped.
func (t *T) Skipf(format string, args ...any) {
	t.skip = fmt.Sprintf(format, args...)
	panic(skipNow{})
}

// sim reports whether sim-specific checks are made (-model-contract sim). Under "any" it
// records the check as skipped and returns false.
func (t *T) sim(check string) bool {
	if t.cfg.Contract == ContractSim {
		return true
	}
	for _, c := range t.skipped {
		if c == check {
			return false
		}
	}
	t.skipped = append(t.skipped, check)
	return false
}

// maxFrame is the server's frame limit (the scenario runs only when it is known).
func (t *T) maxFrame() int64 { return t.r.frameLimit(t.ctx).limit }

// isAppend reports whether the scenario runs in the append shape.
func (t *T) isAppend() bool { return t.shape == shapeAppend }

func (r *runner) run(ctx context.Context, sc *scenario, shape string) (res Result) {
	res = Result{Name: sc.fullName(shape), Scenario: sc.name, Shape: shape}
	switch {
	case sc.sim != "" && r.cfg.Contract == ContractAny:
		res.Status, res.Reason = "skip", "needs the sim model: "+sc.sim
		return res
	case (shape == shapeAppend || shape == ShapeBoth) && !r.appendOK:
		res.Status, res.Reason = "skip", r.appendNo
		return res
	}
	if sc.maxFrame {
		if fl := r.frameLimit(ctx); fl.limit <= 0 {
			r.noLimit++
			res.Status, res.Reason = "skip", "the server's frame limit is unknown ("+fl.unknown+"): pass -max-frame"
			return res
		}
	}
	t := &T{ctx: ctx, cfg: r.cfg, r: r, shape: shape, ids: idSet{}}
	if shape == ShapeBoth {
		t.shape = ""
	}
	start := time.Now()
	func() {
		defer func() {
			if v := recover(); v != nil {
				switch v.(type) {
				case failNow, skipNow:
				default:
					t.failure = &Failure{Message: fmt.Sprintf("panic: %v\n%s", v, debug.Stack())}
				}
			}
		}()
		sc.run(t)
	}()
	for _, p := range t.peers {
		p.close()
	}
	res.DurationMS = ms(time.Since(start))
	res.SkippedChecks = t.skipped
	switch {
	case t.failure != nil:
		res.Status, res.Reason, res.Failure = "fail", t.failure.Message, t.failure
	case t.skip != "":
		res.Status, res.Reason = "skip", t.skip
	default:
		res.Status = "pass"
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// writeResult prints one scenario's line, and for a failure the diff and the last frames.
func writeResult(out io.Writer, res Result) {
	switch res.Status {
	case "pass":
		line := fmt.Sprintf("pass  %-44s %7.0fms", res.Name, res.DurationMS)
		if n := len(res.SkippedChecks); n > 0 {
			line += fmt.Sprintf("  (%d sim-specific %s skipped)", n, plural(n, "check", "checks"))
		}
		fmt.Fprintln(out, line)
	case "skip":
		fmt.Fprintf(out, "skip  %-44s %s\n", res.Name, res.Reason)
	default:
		fmt.Fprintf(out, "FAIL  %-44s %7.0fms\n", res.Name, res.DurationMS)
		f := res.Failure
		if f == nil {
			f = &Failure{Message: res.Reason}
		}
		for _, l := range strings.Split(f.Message, "\n") {
			fmt.Fprintf(out, "        %s\n", l)
		}
		if f.Expected != "" {
			fmt.Fprintf(out, "        expected: %s\n", f.Expected)
		}
		if f.Received != "" {
			fmt.Fprintf(out, "        received: %s\n", f.Received)
		}
		if len(f.Frames) > 0 {
			fmt.Fprintf(out, "        last frames of %s\n", f.Frames[0])
			for _, l := range f.Frames[1:] {
				fmt.Fprintf(out, "          %s\n", l)
			}
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
