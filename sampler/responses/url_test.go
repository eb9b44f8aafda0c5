package responses_test

import (
	"testing"

	"github.com/tetherd/tether/sampler/responses"
)

func TestWebSocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"ws://127.0.0.1:8788/v1/responses":  "ws://127.0.0.1:8788/v1/responses",
		"wss://api.openai.com/v1/responses": "wss://api.openai.com/v1/responses",
		"http://127.0.0.1:8788/v1":          "ws://127.0.0.1:8788/v1/responses",
		"https://api.openai.com/v1/":        "wss://api.openai.com/v1/responses",
		"http://h/v1/responses":             "ws://h/v1/responses",
	} {
		got, err := responses.WebSocketURL(in)
		if err != nil || got != want {
			t.Errorf("WebSocketURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8788", "ftp://h/v1", "http://"} {
		if _, err := responses.WebSocketURL(bad); err == nil {
			t.Errorf("WebSocketURL(%q): want an error", bad)
		}
	}
}
