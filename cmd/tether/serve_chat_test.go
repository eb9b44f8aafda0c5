package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// lockedBuffer is a bytes.Buffer safe for the serve goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeChatBackend runs "tether serve -backend chat" in front of an in-process sim Tether
// and passes two conformance scenarios through it; bad backend flags are refused.
func TestServeChatBackend(t *testing.T) {
	_, up := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("sk-upstream\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var serveErr error
	var logs lockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveErr = run(ctx, []string{"serve", "-addr", addr, "-backend", "chat", "-upstream", up + "/v1",
			"-upstream-slots", "2", "-upstream-api-key-file", keyFile, "-shutdown-grace", "1s"}, io.Discard, &logs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"conform", "-url", "http://" + addr + "/v1", "-model-contract", "any",
		"-run", `^(public|append)/tools-1$`}, &stdout, &stderr)
	cancel()
	<-done
	if err != nil || !strings.HasSuffix(stdout.String(), "2 passed, 0 failed, 0 skipped\n") {
		t.Fatalf("conform through serve -backend chat: %v\n%s\n%s", err, stdout.String(), logs.String())
	}
	if serveErr != nil {
		t.Fatalf("serve: %v", serveErr)
	}
	if !strings.Contains(logs.String(), "backend=chat") {
		t.Errorf("the start log does not name the backend:\n%s", logs.String())
	}

	for _, args := range [][]string{
		{"serve", "-backend", "chat"},
		{"serve", "-backend", "chat", "-upstream", up + "/v1", "-upstream-api-key-file", filepath.Join(t.TempDir(), "missing")},
		{"serve", "-backend", "quantum", "-upstream", up},
	} {
		if err := run(t.Context(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
