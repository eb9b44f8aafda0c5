package main

import (
	"bytes"
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
