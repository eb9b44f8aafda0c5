package client

import "testing"

func TestWSURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8787/v1":               "ws://127.0.0.1:8787/v1/responses",
		"http://127.0.0.1:8787/v1/":              "ws://127.0.0.1:8787/v1/responses",
		"https://api.example.com/v1":             "wss://api.example.com/v1/responses",
		"ws://127.0.0.1:8787/v1/responses":       "ws://127.0.0.1:8787/v1/responses",
		"ws://127.0.0.1:8787":                    "ws://127.0.0.1:8787/v1/responses",
		"ws://h/v1/responses?protocol=append.v1": "ws://h/v1/responses?protocol=append.v1",
	} {
		if got, err := wsURL(in); err != nil || got != want {
			t.Errorf("wsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := wsURL("ftp://x"); err == nil {
		t.Error("wsURL(ftp://x): no error")
	}
}

func TestMentions(t *testing.T) {
	msg := "No tool output found for function call call_ab12."
	if !mentions(msg, "call_ab12") || mentions(msg, "call_ab1") || mentions(msg, "") {
		t.Error("mentions: whole-word match expected")
	}
}
