package main

import (
	"errors"
	"testing"
)

func TestParseServerURL(t *testing.T) {
	for in, want := range map[string][3]string{
		"http://127.0.0.1:8787/v1":         {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1", "ws://127.0.0.1:8787/v1/responses"},
		"http://127.0.0.1:8787/v1/":        {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1", "ws://127.0.0.1:8787/v1/responses"},
		"http://127.0.0.1:8787":            {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1", "ws://127.0.0.1:8787/v1/responses"},
		"127.0.0.1:8787":                   {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1", "ws://127.0.0.1:8787/v1/responses"},
		"ws://127.0.0.1:8787/v1/responses": {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1", "ws://127.0.0.1:8787/v1/responses"},
		"wss://example.com/v1":             {"https://example.com", "https://example.com/v1", "wss://example.com/v1/responses"},
		"https://example.com/tether/v1":    {"https://example.com/tether", "https://example.com/tether/v1", "wss://example.com/tether/v1/responses"},
		"http://h:1/tether/v1/responses":   {"http://h:1/tether", "http://h:1/tether/v1", "ws://h:1/tether/v1/responses"},
	} {
		u, err := parseServerURL("-url", in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := [3]string{u.Base(), u.API(), u.WebSocket()}; got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{"", "ftp://h/v1", "http://h/api", "http://h/responses", "http://h/v1?x=1", "http:///v1"} {
		if _, err := parseServerURL("-url", in); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", in, err)
		}
	}
}
