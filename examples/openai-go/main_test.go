package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the example against an in-process server: the continuation takes the hot path
// and the sim's answer quotes the tool's output.
func TestRun(t *testing.T) {
	srv, base := servertest.Start(t, server.Options{})
	hot0 := srv.Counters().Hot.Load()
	answer, err := run(t.Context(), base+"/v1", "unused")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, `tool: "18C, light rain"`) {
		t.Fatalf("answer does not quote the tool output:\n%s", answer)
	}
	if hot := srv.Counters().Hot.Load() - hot0; hot != 1 {
		t.Errorf("hot continuations: %d, want 1", hot)
	}
}
