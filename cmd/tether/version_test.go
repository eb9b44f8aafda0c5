package main

import (
	"bytes"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out := stdout.String(); !strings.HasPrefix(out, "tether ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: %q", args, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), nil, &stdout, &stderr); !errors.Is(err, errNoCommand) || exitCode(err) != 2 ||
		!strings.Contains(stderr.String(), "Usage: tether <command>") {
		t.Fatalf("no arguments: %v\n%s", err, stderr.String())
	}
}

// TestVersionBinary builds the command and checks that a built binary reports its version, and
// that 'tether' with no arguments prints only the usage.
func TestVersionBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTether(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("tether version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "tether ") || !strings.Contains(string(out), runtime.Version()) {
		t.Errorf("tether version: %s", out)
	}
	cmd := exec.Command(bin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(stderr.String(), "tether: ") {
		t.Fatalf("tether without arguments: %v\n%s", err, stderr.String())
	}
}
