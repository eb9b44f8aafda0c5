package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "deploy")) }

// startNginx runs nginx with deploy/nginx.conf, its listen port and upstream servers replaced
// by a free port and upstreams, until the test ends. It returns the base URL.
func startNginx(t *testing.T, upstreams []string) string {
	t.Helper()
	bin := os.Getenv("TETHER_NGINX")
	if bin == "" {
		bin, _ = exec.LookPath("nginx")
	}
	if bin == "" {
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			bin = "/usr/sbin/nginx"
		}
	}
	if bin == "" {
		if os.Getenv("TETHER_REQUIRE_NGINX") == "1" {
			t.Fatal("nginx not found (TETHER_REQUIRE_NGINX=1): install the Debian package nginx or set TETHER_NGINX")
		}
		skipnote.Skip(t, "nginx not found (install the Debian package nginx or set TETHER_NGINX)")
	}
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	site := strings.Replace(string(conf), "listen 8080;", "listen "+addr+";", 1)
	servers := regexp.MustCompile(`(?m)^\s*server 127\.0\.0\.1:878\d ([^;]*);\n`)
	opts := servers.FindStringSubmatch(site)
	if opts == nil {
		t.Fatal("nginx.conf: no upstream server lines")
	}
	var lines string
	for _, u := range upstreams {
		lines += fmt.Sprintf("    server %s %s;\n", u, opts[1])
	}
	site = servers.ReplaceAllString(site, "")
	site = strings.Replace(site, "upstream tether {\n", "upstream tether {\n"+lines, 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tether.conf"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/tether.conf;
}
`, dir)
	mainConf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainConf, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", mainConf}
	if out, err := exec.Command(bin, append(args, "-t")...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error.log:\n%s", log)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s: %v", addr, err)
		}
	}
	return "http://" + addr
}

// instances starts n Tether instances sharing the Redis of rs.
func instances(t *testing.T, rs *redistest.Server, n int, keys *server.Keys) ([]*server.Server, []string) {
	t.Helper()
	var srvs []*server.Server
	var addrs []string
	for range n {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, url := servertest.Start(t, server.Options{Store: st, Keys: keys})
		srvs = append(srvs, s)
		addrs = append(addrs, strings.TrimPrefix(url, "http://"))
	}
	return srvs, addrs
}

var shell = map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object",
	"properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}}

func createBody(input any, extra map[string]any) map[string]any {
	m := map[string]any{"model": "sim", "input": input, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func request(t *testing.T, method, url, key string, body any) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// outputsFor answers every function_call of a terminal Response.
func outputsFor(final wstest.Frame) []any {
	var input []any
	out, _ := final.Get("response", "output").([]any)
	for _, it := range out {
		f := wstest.Frame(it.(map[string]any))
		if f.Str("type") == "function_call" {
			input = append(input, map[string]any{"type": "function_call_output", "call_id": f.Str("call_id"), "output": "ok"})
		}
	}
	return input
}

func TestTwoInstancesBehindNginx(t *testing.T) {
	rs := redistest.Start(t)
	srvs, addrs := instances(t, rs, 2, server.NewKeys("key-a", "key-b"))
	base := startNginx(t, addrs)

	// /healthz through nginx, without a key.
	if resp, body := request(t, "GET", base+"/healthz", "", nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}

	// A rollout starts over a WebSocket proxied by nginx (upgrade) and suspends at a tool call.
	ws := wstest.Dial(t, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", http.Header{"Authorization": {"Bearer key-a"}})
	m := createBody("Remember: saffron", map[string]any{"store": true})
	m["type"] = "response.create"
	ws.Send(m)
	fs := ws.Until("response.completed", "response.failed")
	first := fs[len(fs)-1]
	if first.Type() != "response.completed" || len(outputsFor(first)) != 1 {
		t.Fatalf("first segment: %v", first)
	}
	id := first.Str("response", "id")
	started := -1
	for i, s := range srvs {
		if s.Counters().New.Load() == 1 {
			started = i
		}
	}
	if started < 0 {
		t.Fatal("no instance counted the new chain")
	}
	other := srvs[1-started]

	// It continues through nginx over HTTP (SSE) with previous_response_id: nginx spreads the
	// requests, and the other instance rebuilds the chain from Redis (the cold path).
	for attempt := 0; other.Counters().Cold.Load() == 0; attempt++ {
		if attempt == 4 {
			t.Fatal("nginx never sent a continuation to the other instance")
		}
		resp, body := request(t, "POST", base+"/v1/responses", "key-a",
			createBody(outputsFor(first), map[string]any{"previous_response_id": id, "stream": true, "metadata": map[string]string{"sim.calls": "0"}}))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
			!strings.Contains(string(body), "event: response.completed") || !strings.Contains(string(body), "saffron") {
			t.Fatalf("SSE continuation through nginx: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}

	// Per-key isolation across instances: each GET goes to either instance.
	for range 4 {
		if resp, _ := request(t, "GET", base+"/v1/responses/"+id, "key-b", nil); resp.StatusCode != 404 {
			t.Fatalf("GET of key-a's response with key-b: %d, want 404", resp.StatusCode)
		}
		if resp, _ := request(t, "GET", base+"/v1/responses/"+id, "key-a", nil); resp.StatusCode != 200 {
			t.Fatalf("GET with key-a: %d, want 200", resp.StatusCode)
		}
	}

	// Nor can another key continue it, whichever instance its connections reach.
	for range 2 {
		c := wstest.Dial(t, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", http.Header{"Authorization": {"Bearer key-b"}})
		m := createBody(outputsFor(first), map[string]any{"previous_response_id": id})
		m["type"] = "response.create"
		c.Send(m)
		c.ExpectError(400, "previous_response_not_found", "previous_response_id")
	}

	// A draining instance fails /healthz and answers upgrades 503: nginx sends new WebSocket
	// connections to the other one.
	if err := srvs[0].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := request(t, "GET", "http://"+addrs[0]+"/healthz", "", nil); resp.StatusCode != 503 {
		t.Fatalf("/healthz of the draining instance: %d, want 503", resp.StatusCode)
	}
	for range 4 {
		c := wstest.Dial(t, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", http.Header{"Authorization": {"Bearer key-a"}})
		m := createBody("hi", map[string]any{"store": false, "metadata": map[string]string{"sim.calls": "0"}})
		m["type"] = "response.create"
		c.Send(m)
		if fs := c.Until("response.completed", "response.failed"); fs[len(fs)-1].Type() != "response.completed" {
			t.Fatalf("WebSocket through nginx with one instance draining: %v", fs[len(fs)-1])
		}
	}

	// Bodies beyond nginx's default 1 MiB pass (client_max_body_size = -max-frame).
	big := createBody(strings.Repeat("x", 2<<20), map[string]any{"store": false, "metadata": map[string]string{"sim.calls": "0"}})
	if resp, body := request(t, "POST", base+"/v1/responses", "key-a", big); resp.StatusCode != 200 {
		t.Fatalf("2 MiB POST through nginx: %d %.200s", resp.StatusCode, body)
	}
}
