package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the example against an in-process server: the sim quotes the tool's output.
func TestRun(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	answer, err := run(t.Context(), base+"/v1", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, `tool: "18C, light rain"`) {
		t.Fatalf("answer does not quote the tool output:\n%s", answer)
	}
}
