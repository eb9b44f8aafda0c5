package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetherd/tether/internal/soak"
)

// TestSoakCommand runs a tiny soak through the command (flags, -json -, exit status); the soak
// itself is tested in internal/soak.
func TestSoakCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short soak")
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"soak", "-connections", "4", "-turns", "2", "-duration", "2s", "-warmup", "1s",
		"-suspended", "20", "-quiet", "-json", "-"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("soak: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep soak.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("-json -: %v\n%s", err, stdout.String())
	}
	if !rep.Pass || rep.Connections != 4 || rep.Turns != 2 || rep.Verified == 0 || rep.Suspended == nil || rep.Suspended.Rollouts != 20 {
		t.Fatalf("report: pass %v, %d connections, %d turns, %d verified, suspended %+v", rep.Pass, rep.Connections, rep.Turns, rep.Verified, rep.Suspended)
	}
	if stderr.Len() != 0 {
		t.Errorf("-quiet wrote to stderr: %q", stderr.String())
	}
}

func TestSoakCommandUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"soak", "extra"}, &stdout, &stderr); !errors.Is(err, errUsage) {
		t.Fatalf("soak extra: %v, want a usage error", err)
	}
	if err := run(t.Context(), []string{"soak", "-connections", "1", "-quiet"}, &stdout, &stderr); err == nil {
		t.Fatal("soak -connections 1: no error")
	}
}
