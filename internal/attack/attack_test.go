package attack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/responses"
	"github.com/tetherd/tether/session"
)

// childEnv makes the test binary act as a `tether serve` child.
const childEnv = "ATTACK_TEST_CHILD_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(childServe())
	}
	if base := os.Getenv(ProbeEnv); base != "" {
		os.Exit(RunProbe(base, os.Stdin, os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// childServe serves Tether the way `tether serve` does (server.HTTPServer), with the API keys
// of -api-keys if given and small limits, and logs its listen address.
func childServe() int {
	opts := server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: session.Limits{MaxFrame: 1 << 20}, MaxMemory: 64 << 20, ReadTimeout: time.Second}
	arg := func(name string) string {
		if i := slices.Index(os.Args, name); i >= 0 && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
		return ""
	}
	if f := arg("-api-keys"); f != "" {
		keys, err := server.LoadKeys(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.Keys = keys
	}
	var err error
	switch arg("-backend") {
	case "chat":
		// Small bounds on what the engine streams, so that an endless stream ends soon under
		// the race detector.
		opts.Model, err = chat.New(chat.Options{BaseURLs: []string{arg("-upstream")}, Timeout: 10 * time.Second,
			MaxEventBytes: 256 << 10, MaxStepBytes: 1 << 20, MaxArgumentBytes: 256 << 10})
	case "responses":
		opts.Model, err = responses.New(responses.Options{URL: arg("-upstream"), Timeout: 10 * time.Second,
			ReadLimit: 4 << 20, MaxStepBytes: 1 << 20, MaxArgumentBytes: 256 << 10})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := server.New(opts)
	hs, l := s.HTTPServer(ln)
	go func() { _ = hs.Serve(l) }()
	fmt.Fprintf(os.Stderr, "time=now level=INFO msg=\"tether listening\" addr=%s model=sim\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
	_ = hs.Shutdown(ctx)
	return 0
}

// TestRunEveryAttack runs every attack, tiny, against this binary as the server.
func TestRunEveryAttack(t *testing.T) {
	t.Setenv(childEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Run(context.Background(), Config{Exe: exe, Scale: 0.001, SizeScale: 0.02, Hold: 100 * time.Millisecond,
		ServeArgs: []string{"-test.run=^$"}}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(Names) {
		t.Fatalf("%d results, want %d", len(rs), len(Names))
	}
	for _, r := range rs {
		if r.PeakRSS <= 0 || len(r.Outcomes) == 0 || r.HealthzFailed > 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if _, ok := upstreamFaults[r.Name]; !ok {
			continue
		}
		// Every attacker's stream ends with its terminal event (failed, naming the upstream,
		// or incomplete at max_output_tokens), and the victim, whose requests the upstream
		// answers normally, is served.
		for o := range r.Outcomes {
			if o != "terminal response.failed server_error (upstream named)" && o != "terminal response.incomplete max_output_tokens" {
				t.Errorf("%s: an attacker got %q (%v)", r.Name, o, r.Outcomes)
			}
		}
		if r.VictimOK != r.VictimTotal {
			t.Errorf("%s: victim %d/%d: %s", r.Name, r.VictimOK, r.VictimTotal, r.Note)
		}
	}
	// A huge schema is refused, never compiled for long; the sim's answer to a schema asking
	// for 10⁸ values ends at the step's output bound.
	for o := range rs[slices.Index(Names, "schema")].Outcomes {
		if !strings.HasPrefix(o, "400 invalid_json_schema") && !strings.HasPrefix(o, "413 ") {
			t.Errorf("schema: an attacker got %q", o)
		}
	}
	for o := range rs[slices.Index(Names, "sim-schema")].Outcomes {
		if o != "200 incomplete" {
			t.Errorf("sim-schema: an attacker got %q", o)
		}
	}
	starve := rs[slices.Index(Names, "starve")]
	if !strings.Contains(starve.Note, "A's stored response after B's flood: 200") {
		t.Errorf("starve: %s", starve.Note)
	}
}
