package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveInProcess runs "tether serve" with args on a free loopback port until the test ends and
// returns its base URL.
func serveInProcess(t *testing.T, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "-addr", addr, "-model-speed", "instant", "-shutdown-grace", "1s"}, args...), io.Discard, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve %v: %v", args, err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// postJSON posts body to url and returns the status and the decoded answer.
func postJSON(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestServeCompactionKeyFile: two in-process "tether serve" given the same key file (one by the
// flag, one by TETHER_SERVE_COMPACTION_KEY_FILE) accept each other's compaction items, and a
// server without it answers invalid_compaction_item; a missing, empty or short key file stops
// serve with an error that names the flag.
func TestServeCompactionKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good", strings.Repeat("s", 32)+"\n")
	for _, path := range []string{filepath.Join(dir, "missing"), write("empty", "\n\n"), write("short", strings.Repeat("s", 31)+"\n")} {
		err := run(t.Context(), []string{"serve", "-addr", "127.0.0.1:0", "-compaction-key-file", path}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-compaction-key-file") {
			t.Errorf("%s: %v, want an error naming -compaction-key-file", filepath.Base(path), err)
		}
	}

	a := serveInProcess(t, "-compaction-key-file", good)
	t.Setenv("TETHER_SERVE_COMPACTION_KEY_FILE", good) // after a has parsed its flags
	b := serveInProcess(t)
	os.Unsetenv("TETHER_SERVE_COMPACTION_KEY_FILE")
	c := serveInProcess(t)

	user := func(text string) map[string]any {
		return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
	}
	st, cr := postJSON(t, a+"/v1/responses/compact", map[string]any{"model": "sim", "input": []any{user("one")}})
	out, _ := cr["output"].([]any)
	if st != 200 || len(out) != 1 {
		t.Fatalf("compact on a: %d %v", st, cr)
	}
	next := map[string]any{"model": "sim", "store": false, "input": []any{out[0], user("two")}}
	if st, r := postJSON(t, b+"/v1/responses", next); st != 200 || r["status"] != "completed" {
		t.Fatalf("b, same key file: %d %v", st, r)
	}
	st, r := postJSON(t, c+"/v1/responses", next)
	if e, _ := r["error"].(map[string]any); st != 400 || e["code"] != "invalid_compaction_item" {
		t.Fatalf("c, per-process key: %d %v", st, r)
	}
}
