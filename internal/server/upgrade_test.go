package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// upgrade sends a WebSocket upgrade request with the given headers (a valid handshake unless
// they override it) and returns the status, the headers and the decoded JSON error body.
func upgrade(t *testing.T, url string, h http.Header) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http"+strings.TrimPrefix(url, "ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	for k, vs := range h {
		req.Header.Del(k)
		for _, v := range vs {
			if v != "" {
				req.Header.Add(k, v)
			}
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if resp.StatusCode != http.StatusSwitchingProtocols {
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%d answer is not JSON (%v): %q", resp.StatusCode, err, raw)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
	}
	return resp.StatusCode, resp.Header, body
}

// TestUnknownAppendVersion checks that naming a version of the append-shape opt-in that the
// server does not serve is an error before the upgrade, naming the served version.
func TestUnknownAppendVersion(t *testing.T) {
	_, url := testServer(t, Options{})
	for _, tc := range []struct {
		name   string
		url    string
		header http.Header
		param  string
	}{
		{"header v2", url, http.Header{"Openai-Beta": {"responses_append=v2"}}, ""},
		{"header v2 in a list", url, http.Header{"Openai-Beta": {"responses_websockets=2026-02-06, Responses_Append=v2"}}, ""},
		{"header without a version", url, http.Header{"Openai-Beta": {"responses_append"}}, ""},
		{"header v1 and v2", url, http.Header{"Openai-Beta": {"responses_append=v1", "responses_append=v2"}}, ""},
		{"query append.v2", url + "?protocol=append.v2", nil, "protocol"},
		{"query empty", url + "?protocol=", nil, "protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := upgrade(t, tc.url, tc.header)
			e, _ := body["error"].(map[string]any)
			if status != 400 || e["code"] != "invalid_value" || e["type"] != "invalid_request_error" {
				t.Fatalf("got %d %v, want 400 invalid_value", status, body)
			}
			if p, _ := e["param"].(string); p != tc.param {
				t.Errorf("param %q, want %q", p, tc.param)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, AppendBeta) || !strings.Contains(msg, "protocol="+AppendQuery) {
				t.Errorf("message %q does not name the versions served", msg)
			}
		})
	}
	// The served versions still open their shape; other beta tokens alone give the public one.
	for _, tc := range []struct {
		url    string
		header string
		want   string
	}{
		{url + "?protocol=append.v1", "", AppendBeta},
		{url, "responses_websockets=2026-02-06, RESPONSES_APPEND=V1", AppendBeta},
		{url, "responses_websockets=2026-02-06", ""},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("OpenAI-Beta", tc.header)
		}
		c, resp, err := websocket.Dial(t.Context(), tc.url, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("%s %q: %v", tc.url, tc.header, err)
		}
		c.CloseNow()
		if got := resp.Header.Get("OpenAI-Beta"); got != tc.want {
			t.Errorf("%s %q: 101 OpenAI-Beta %q, want %q", tc.url, tc.header, got, tc.want)
		}
	}
}

// TestBadHandshakeJSON checks that an upgrade the WebSocket library would refuse in plain text
// gets the JSON error envelope.
func TestBadHandshakeJSON(t *testing.T) {
	_, url := testServer(t, Options{})
	for _, tc := range []struct {
		name   string
		header http.Header
		msg    string
	}{
		{"no version", http.Header{"Sec-Websocket-Version": {""}}, "no Sec-WebSocket-Version header"},
		{"version 8", http.Header{"Sec-Websocket-Version": {"8"}}, "Unsupported Sec-WebSocket-Version '8'"},
		{"no key", http.Header{"Sec-Websocket-Key": {""}}, "exactly one Sec-WebSocket-Key"},
		{"two keys", http.Header{"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZQ=="}}, "exactly one Sec-WebSocket-Key"},
		{"short key", http.Header{"Sec-Websocket-Key": {"c2hvcnQ="}}, "16 bytes in base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := upgrade(t, url, tc.header)
			e, _ := body["error"].(map[string]any)
			if status != 400 || e["code"] != "invalid_websocket_handshake" || e["param"] != nil {
				t.Fatalf("got %d %v, want 400 invalid_websocket_handshake", status, body)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want it to contain %q", msg, tc.msg)
			}
			if strings.HasPrefix(tc.name, "no version") || strings.HasPrefix(tc.name, "version") {
				if v := h.Get("Sec-WebSocket-Version"); v != "13" {
					t.Errorf("Sec-WebSocket-Version %q on the answer, want 13", v)
				}
			}
		})
	}
}
