package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

func TestConformCommand(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"conform", "-url", base + "/v1", "-run", `^(public|append)/text-turn$`, "-json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("conform: %v\n%s", err, stderr.String())
	}
	var rep conformance.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Passed != 2 || rep.Failed != 0 {
		t.Fatalf("-json report: %v\n%s", err, stdout.String())
	}
	if !strings.HasSuffix(stderr.String(), "2 passed, 0 failed, 0 skipped\n") {
		t.Fatalf("the scenario lines go to stderr with -json: %q", stderr.String())
	}

	// Flags can come from the environment.
	t.Setenv("TETHER_CONFORM_RUN", `^public/text-turn$`)
	stdout.Reset()
	if err := run(t.Context(), []string{"conform", "-url", base + "/v1"}, &stdout, &stderr); err != nil ||
		!strings.HasSuffix(stdout.String(), "1 passed, 0 failed, 0 skipped\n") {
		t.Fatalf("TETHER_CONFORM_RUN: %v\n%s", err, stdout.String())
	}

	// A failure exits with status 1.
	stdout.Reset()
	err = run(t.Context(), []string{"conform", "-url", "http://127.0.0.1:1/v1", "-shape", "public", "-timeout", "2s"}, &stdout, &stderr)
	if !errors.Is(err, errConformance) || exitCode(err) != 1 || !strings.Contains(stdout.String(), "FAIL  public/text-turn") {
		t.Fatalf("a failing run: err %v (exit %d)\n%s", err, exitCode(err), stdout.String())
	}
}

// TestConformTimeout: the default wait for each answer is the sim's 10 s, and longer with
// -model-contract any (a real model); -h says so; an explicit -timeout wins.
func TestConformTimeout(t *testing.T) {
	if got := conformTimeout(conformance.ContractSim, 0); got != conformance.DefaultTimeout {
		t.Errorf("sim default %v, want %v", got, conformance.DefaultTimeout)
	}
	if got := conformTimeout(conformance.ContractAny, 0); got != anyContractTimeout || got <= conformance.DefaultTimeout {
		t.Errorf("any default %v, want %v", got, anyContractTimeout)
	}
	if got := conformTimeout(conformance.ContractAny, 3*time.Second); got != 3*time.Second {
		t.Errorf("explicit -timeout: %v", got)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"conform", "-h"}, &stdout, &stderr); exitCode(err) != 2 {
		t.Fatalf("conform -h: %v", err)
	}
	if !strings.Contains(strings.Join(strings.Fields(stderr.String()), " "), "0 means 10s with -model-contract sim, 2m0s with any") {
		t.Errorf("conform -h does not state the timeouts:\n%s", stderr.String())
	}
	err := run(t.Context(), []string{"conform", "-timeout", "-1s"}, &stdout, &stderr)
	if exitCode(err) != 2 {
		t.Errorf("-timeout -1s: %v, want a usage error", err)
	}
}
