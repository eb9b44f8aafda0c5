package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

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
