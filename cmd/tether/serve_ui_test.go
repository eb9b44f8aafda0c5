package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeUI runs tether serve -ui, races one transport through the page's API, and shuts
// the server down with the signal's context.
func TestServeUI(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"-ui", "-addr", "127.0.0.1:0", "-log-level", "info"}, pw)
		pw.Close()
	}()
	urlRE := regexp.MustCompile(`msg="live demo page" url=(\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var page string
	select {
	case page = <-found:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no live demo page line in the log")
	}
	if !strings.HasPrefix(page, "http://127.0.0.1:") || !strings.HasSuffix(page, "/ui/") {
		t.Fatalf("page URL %q", page)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(page + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != 200 || !strings.Contains(body, "Tether") {
		t.Fatalf("page: %d", code)
	}
	resp, err := http.Post(page+"api/race", "application/json", strings.NewReader(`{"speed":"4000","calls":1,"transports":["append"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	if code, body := get("api/race/events"); code != 200 || !strings.Contains(body, "event: done") {
		t.Fatalf("events: %d %s", code, body)
	}
	_, body := get("api/race")
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Status != "done" {
		t.Fatalf("race %s (%v)", body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestSelfURL(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 80}, "http://10.0.0.2:80"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8787}, "http://127.0.0.1:8787"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8787}, "http://127.0.0.1:8787"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 1}, "http://[::1]:1"},
	} {
		if got := selfURL(tc.addr); got != tc.want {
			t.Errorf("selfURL(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
