package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestDemoCommand runs tether demo against an in-process server: two suspensions answered by
// appends, one Response, the answer quoting both tool outputs.
func TestDemoCommand(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"demo", "-url", base + "/v1"}, &stdout, &stderr); err != nil {
		t.Fatalf("demo: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"(OpenAI-Beta: responses_append=v1)", "→ {\"input\":[{\"type\":\"message\"",
		"→ {\"input\":[{\"type\":\"function_call_output\"", "← [0] {\"type\":\"response.created\"", "tether-call-2", " completed, usage {\"input_tokens\":"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "... suspended;"); n != 2 {
		t.Errorf("%d suspensions, want 2:\n%s", n, out)
	}
}

// TestDemoURLForms runs 'tether demo' with each -url form against an in-process server.
func TestDemoURLForms(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	host := strings.TrimPrefix(base, "http://")
	for _, u := range []string{base + "/v1", base, host, "ws://" + host + "/v1/responses"} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"demo", "-url", u, "-calls", "1"}, &stdout, &stderr); err != nil {
			t.Fatalf("demo -url %s: %v\n%s", u, err, stderr.String())
		}
		if out := stdout.String(); !strings.Contains(out, "appends the output") || !strings.Contains(out, " completed, usage ") {
			t.Errorf("demo -url %s:\n%s", u, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"demo", "-url", base + "/api"}, &stdout, &stderr); err == nil || exitCode(err) != 2 {
		t.Errorf("demo -url %s/api: %v, want a usage error", base, err)
	}
}

// TestDemoIncomplete runs 'tether demo' with a max_output_tokens the rollout cannot finish in:
// the rollout ends incomplete and demo exits non-zero, naming the reason.
func TestDemoIncomplete(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"demo", "-url", base + "/v1", "-calls", "0", "-max-output-tokens", "16"}, &stdout, &stderr)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("demo: %v, want exit status 1\n%s", err, stdout.String())
	}
	if !strings.Contains(err.Error(), "ended incomplete: max_output_tokens") {
		t.Errorf("demo error %q does not say why", err)
	}
	if !strings.Contains(stdout.String(), " incomplete, usage ") {
		t.Errorf("demo output:\n%s", stdout.String())
	}
}
