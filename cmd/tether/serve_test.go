package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

// serveProcess is a running 'tether serve' binary whose JSON log lines are read as they come.
type serveProcess struct {
	cmd       *exec.Cmd
	lines     chan map[string]any
	listening map[string]any // the startup line
	addr      string
}

func startServe(t *testing.T, bin string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "-addr", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, lines: make(chan map[string]any, 1000)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				rec = map[string]any{"msg": sc.Text()}
			}
			p.lines <- rec
		}
	}()
	p.listening = p.waitLog(t, "tether listening")
	p.addr, _ = p.listening["addr"].(string)
	return p
}

// waitLog returns the next log record with message msg.
func (p *serveProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case rec, ok := <-p.lines:
			if !ok {
				t.Fatalf("serve ended before logging %q", msg)
			}
			if rec["msg"] == msg {
				return rec
			}
		case <-timeout:
			t.Fatalf("no %q log line", msg)
		}
	}
}

// TestServeStartupLine: the startup line states the effective settings; the append opt-in is
// advertised only when WebSocket is on.
func TestServeStartupLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTether(t)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("sk-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		append bool
		keys   string
	}{
		{[]string{"-websocket=false", "-api-keys", keys}, false, "required"},
		{nil, true, "none"},
	} {
		p := startServe(t, bin, c.args...)
		l := p.listening
		shapes, _ := l["shapes"].(string)
		apiKeys, _ := l["api_keys"].(string)
		if l["backend"] != "sim" || l["model_speed"] != "1000" || strings.Contains(shapes, server.AppendBeta) != c.append ||
			!strings.HasPrefix(apiKeys, c.keys) || !strings.HasPrefix(fmt.Sprint(l["store"]), "memory") ||
			l["log_level"] != "info" || l["log_format"] != "json" || l["version"] == nil {
			t.Errorf("%v: startup line %v", c.args, l)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("%v: exit %v", c.args, err)
		}
	}
}

// drainCheckListener records, when it is first closed, whether the server was already
// draining.
type drainCheckListener struct {
	net.Listener
	srv      *server.Server
	once     sync.Once
	draining chan bool
}

func (l *drainCheckListener) Close() error {
	l.once.Do(func() { l.draining <- l.srv.ShuttingDown() })
	return l.Listener.Close()
}

// TestStopDrainsBeforeClosingListener: stop marks the server draining before it closes the
// listener, so that once new connections are refused /healthz answers 503 on a kept-alive
// connection — a load balancer never sees ok from a stopping server.
func TestStopDrainsBeforeClosingListener(t *testing.T) {
	srv := server.New(server.Options{Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, limited := srv.HTTPServer(ln)
	l := &drainCheckListener{Listener: limited, srv: srv, draining: make(chan bool, 1)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz before stop: %d", resp.StatusCode)
	}
	cfg := &serveConfig{shutdownGrace: time.Second}
	if err := stop(t.Context(), cfg, slog.New(slog.DiscardHandler), srv, hs, l, errc); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !<-l.draining {
		t.Fatal("the listener was closed before the server was marked draining")
	}
}

// TestServeSignals runs the binary: on SIGTERM the listener closes at once, /healthz answers 503
// on a kept-alive connection, a new POST there gets 503, the in-flight rollout keeps streaming;
// a second SIGTERM ends it at once with its terminal event, and the process exits 0.
func TestServeSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	p := startServe(t, buildTether(t), "-model-speed", "65", "-shutdown-grace", "10m")
	base := "http://" + p.addr
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func() (int, string) {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("/healthz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(); code != 200 {
		t.Fatalf("/healthz before the signal: %d", code)
	}
	h := http.Header{}
	h.Set("OpenAI-Beta", server.AppendBeta)
	c := wstest.Dial(t, "ws://"+p.addr+"/v1/responses", h)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "long", "metadata": map[string]string{"sim.answer_tokens": "100000"}})
	c.Until("response.output_text.delta")

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Wait on the state: the listener refuses new connections. The server is marked draining
	// before it closes the listener, so from here /healthz on the kept-alive connection must
	// answer 503 at once (no window where it still says ok).
	for deadline := time.Now().Add(time.Minute); ; {
		conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections a minute after SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := get(); code != 503 || !strings.Contains(body, "shutting_down") {
		t.Fatalf("/healthz during the drain: %d %s", code, body)
	}
	resp, err := client.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"sim","input":"new"}`))
	if err != nil {
		t.Fatalf("POST during the drain: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "server_shutting_down") {
		t.Fatalf("POST during the drain: %d %s", resp.StatusCode, b)
	}
	c.Until("response.output_text.delta") // the in-flight rollout still streams

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fs := c.Until("response.incomplete")
	if r := fs[len(fs)-1].Str("response", "incomplete_details", "reason"); r != "server_shutdown" {
		t.Fatalf("reason %q, want server_shutdown", r)
	}
	if msgs, err := p.exit(t); err != nil || !slices.Contains(msgs, "stopped") {
		t.Fatalf("exit: %v; log lines %q", err, msgs)
	}
}

// exit waits for the process to end (its stderr closes), then returns the messages of the log
// lines not yet read and the exit error.
func (p *serveProcess) exit(t *testing.T) ([]string, error) {
	t.Helper()
	var msgs []string
	timeout := time.After(time.Minute)
	for {
		select {
		case rec, ok := <-p.lines:
			if !ok {
				return msgs, p.cmd.Wait()
			}
			msg, _ := rec["msg"].(string)
			msgs = append(msgs, msg)
		case <-timeout:
			t.Fatalf("serve has not exited a minute after the second signal; log lines %q", msgs)
		}
	}
}
