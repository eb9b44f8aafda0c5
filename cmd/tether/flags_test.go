package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// parseServe parses args as 'tether serve' would and returns the config.
func parseServe(t *testing.T, args ...string) (*serveConfig, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	fs := newFlagSet("serve", "test", &stderr)
	cfg := serveFlags(fs)
	err := parseFlags(fs, args)
	return cfg, stderr.String(), err
}

func TestFlagPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "serve.conf")
	if err := os.WriteFile(file, []byte("# a comment\naddr 127.0.0.1:3\nqueue-depth 3\nmax-frame 3MiB\nwebsocket false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TETHER_SERVE_ADDR", "127.0.0.1:2")
	t.Setenv("TETHER_SERVE_QUEUE_DEPTH", "2")
	cfg, _, err := parseServe(t, "-config", file, "-addr", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	// flag > env > file > default
	if cfg.addr != "127.0.0.1:1" || cfg.queueDepth != 2 || cfg.maxFrame != 3<<20 || cfg.websocket || cfg.cacheResponses != 128 {
		t.Fatalf("got addr %s, queue %d, max-frame %d, websocket %v, cache %d", cfg.addr, cfg.queueDepth, cfg.maxFrame, cfg.websocket, cfg.cacheResponses)
	}
	// The config file can come from the environment too.
	t.Setenv("TETHER_SERVE_CONFIG", file)
	os.Unsetenv("TETHER_SERVE_ADDR")
	if cfg, _, err = parseServe(t); err != nil || cfg.addr != "127.0.0.1:3" {
		t.Fatalf("TETHER_SERVE_CONFIG: %v, addr %s", err, cfg.addr)
	}
}

func TestFlagEnvPerSubcommand(t *testing.T) {
	// Another subcommand's variable does not change this one.
	t.Setenv("TETHER_BENCH_TIMEOUT", "5s")
	t.Setenv("TETHER_DEMO_TIMEOUT", "7s")
	var stderr bytes.Buffer
	fs := newFlagSet("conform", "test", &stderr)
	timeout := fs.Duration("timeout", time.Minute, "")
	if err := parseFlags(fs, nil); err != nil || *timeout != time.Minute {
		t.Fatalf("conform saw another subcommand's variable: %v, timeout %v", err, *timeout)
	}
}

func TestFlagErrors(t *testing.T) {
	t.Run("bad env names its variable", func(t *testing.T) {
		t.Setenv("TETHER_SERVE_QUEUE_DEPTH", "abc")
		_, _, err := parseServe(t)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `TETHER_SERVE_QUEUE_DEPTH="abc": invalid value for -queue-depth`) {
			t.Fatalf("got %v", err)
		}
		// A flag that overrides it makes the bad value harmless.
		if cfg, _, err := parseServe(t, "-queue-depth", "5"); err != nil || cfg.queueDepth != 5 {
			t.Fatalf("overridden bad env: %v", err)
		}
	})
	t.Run("bad flag names its flag", func(t *testing.T) {
		_, _, err := parseServe(t, "-max-frame", "lots")
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-max-frame") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown variable", func(t *testing.T) {
		t.Setenv("TETHER_SERVE_ADRR", "127.0.0.1:1")
		_, _, err := parseServe(t)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "TETHER_SERVE_ADRR") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("old global name", func(t *testing.T) {
		t.Setenv("TETHER_ADDR", "127.0.0.1:1")
		_, _, err := parseServe(t)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "use TETHER_SERVE_ADDR") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("positional argument", func(t *testing.T) {
		if _, _, err := parseServe(t, "-addr", "127.0.0.1:1", "extra"); !errors.Is(err, errUsage) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown config key", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "c")
		_ = os.WriteFile(file, []byte("adr 1\n"), 0o644)
		if _, _, err := parseServe(t, "-config", file); err == nil || !strings.Contains(err.Error(), `"adr"`) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestFlagHelpListsEnv(t *testing.T) {
	_, out, err := parseServe(t, "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	fs := newFlagSet("serve", "", io.Discard)
	serveFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out, "-"+f.Name+" ") || !strings.Contains(out, "$"+envName("serve", f.Name)+"\n") {
			t.Errorf("-h lacks -%s or its variable:\n%s", f.Name, out)
		}
	})
	if !strings.Contains(out, "$TETHER_SERVE_MAX_FRAME") || !strings.Contains(out, "(default 32MiB)") {
		t.Errorf("-h:\n%s", out)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "256": 256, "1.5MiB": 3 << 19, "32MiB": 32 << 20, "2GiB": 2 << 30, "64 KiB": 64 << 10, "1MB": 1e6, "2kib": 2048} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "1.5XiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
	for n, want := range map[int64]string{0: "0", 100: "100", 2048: "2KiB", 32 << 20: "32MiB", 3 << 30: "3GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %s, want %s", n, got, want)
		}
	}
}
