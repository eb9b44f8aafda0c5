package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestServeHelpGrouped checks 'tether serve -h': every flag once, in groups with the essentials
// first, then the limits, then the tuning, and no line wider than usageWidth.
func TestServeHelpGrouped(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	out := stderr.String()
	for i, line := range strings.Split(out, "\n") {
		if len(line) > usageWidth {
			t.Errorf("line %d is %d columns wide: %q", i+1, len(line), line)
		}
	}
	if strings.Contains(out, "Other flags:") {
		t.Errorf("a serve flag is in no group:\n%s", out)
	}
	fs := newFlagSet("serve", "", &bytes.Buffer{})
	serveFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if n := strings.Count(out, "\n  -"+f.Name+" "); n != 1 {
			t.Errorf("-%s is listed %d times", f.Name, n)
		}
	})
	order := []string{"Essentials:", "\n  -addr ", "\n  -api-keys ", "\n  -backend ", "\n  -upstream ", "\n  -store ",
		"Limits", "\n  -max-frame ", "Tuning:", "\n  -suspend-timeout "}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		if i < last {
			t.Errorf("%q is not after the previous entry of %q", s, order)
		}
		last = i
	}
}

// TestOtherHelpWrapped checks that every command's -h fits in usageWidth columns.
func TestOtherHelpWrapped(t *testing.T) {
	for _, cmd := range []string{"demo", "conform", "bench", "soak", "attack"} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{cmd, "-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		for _, line := range strings.Split(stderr.String(), "\n") {
			if len(line) > usageWidth {
				t.Errorf("%s -h: %d columns: %q", cmd, len(line), line)
			}
		}
	}
}

// TestVersionHelp checks that 'tether version -h' prints its usage and is not an error.
func TestVersionHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"version", "-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "Usage: tether version") {
		t.Fatalf("version -h: %v\n%s", err, stderr.String())
	}
	if err := run(t.Context(), []string{"version", "-x"}, &stdout, &stderr); !errors.Is(err, errUsage) {
		t.Fatalf("version -x: %v, want a usage error", err)
	}
}

// TestDidYouMean checks the suggestions for a mistyped command, flag and environment variable.
func TestDidYouMean(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"server"}, &stdout, &stderr); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `did you mean "serve"?`) {
		t.Errorf("tether server: %v", err)
	}
	if err := run(t.Context(), []string{"frobnicate"}, &stdout, &stderr); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("tether frobnicate: %v, want no suggestion", err)
	}
	if _, _, err := parseServe(t, "-adr", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "did you mean -addr?") {
		t.Errorf("-adr: %v", err)
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("TETHER_SERVE_API_KEY", "/etc/keys")
		if _, _, err := parseServe(t); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `did you mean "TETHER_SERVE_API_KEYS"?`) {
			t.Errorf("TETHER_SERVE_API_KEY: %v", err)
		}
	})
}

// TestConfigFileErrors checks that each kind of mistake in a -config file names the file, the
// line and the expected 'flag value' form.
func TestConfigFileErrors(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"queue-dept 3", []string{`unknown flag "queue-dept"`, `did you mean "queue-depth"?`, "want 'flag value'"}},
		{"addr=127.0.0.1:1", []string{`"addr=127.0.0.1:1"`, "want 'flag value'", "'addr 127.0.0.1:1'"}},
		{"-addr 127.0.0.1:1", []string{"without a dash", "'addr 127.0.0.1:1'"}},
		{"queue-depth lots", []string{`invalid value "lots" for -queue-depth`, "want 'flag value', e.g. 'queue-depth 16'"}},
		{"max-frame", []string{`"max-frame" has no value`, "e.g. 'max-frame 32MiB'"}},
	} {
		file := filepath.Join(t.TempDir(), "serve.conf")
		if err := os.WriteFile(file, []byte("# tether serve\nwebsocket true\n"+c.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := parseServe(t, "-config", file)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", c.line, err)
			continue
		}
		for _, want := range append(c.want, file+":3: ") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v\nlacks %q", c.line, err, want)
			}
		}
	}
	if _, _, err := parseServe(t, "-config", filepath.Join(t.TempDir(), "missing.conf")); err == nil || !strings.Contains(err.Error(), "-config: open ") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDemoRefusedKey runs 'tether demo' with a wrong key against a server with API keys: the
// error says the key was refused, not that the server may not be running.
func TestDemoRefusedKey(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Keys: server.NewKeys("sk-right")})
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"demo", "-url", base + "/v1", "-api-key", "sk-wrong"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "refused the API key (401 invalid_api_key") || strings.Contains(err.Error(), "running?") {
		t.Fatalf("demo with a wrong key: %v", err)
	}
	if err := run(t.Context(), []string{"demo", "-url", base + "/v1", "-api-key", "sk-right", "-calls", "1"}, &stdout, &stderr); err != nil {
		t.Fatalf("demo with the right key: %v", err)
	}
}

// TestStartupLineBackend checks that the startup line shows model_speed and model_context (the
// sim's window, "none" for 0) only for the sim, and the upstream only for an engine.
func TestStartupLineBackend(t *testing.T) {
	attrs := func(args ...string) map[string]any {
		cfg, _, err := parseServe(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		kv := startupAttrs(cfg, "127.0.0.1:8787")
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	if m := attrs(); m["model_speed"] != "1000" || m["model_context"] != "1048576 tokens" || m["upstream"] != nil {
		t.Errorf("sim: %v", m)
	}
	if m := attrs("-model-context", "0"); m["model_context"] != "none" {
		t.Errorf("sim without a window: %v", m)
	}
	for _, backend := range []string{"chat", "responses"} {
		m := attrs("-backend", backend, "-upstream", "http://127.0.0.1:8080/v1")
		if _, ok := m["model_speed"]; ok || m["model_context"] != nil || m["upstream"] != "http://127.0.0.1:8080/v1" {
			t.Errorf("-backend %s: %v", backend, m)
		}
	}
}
