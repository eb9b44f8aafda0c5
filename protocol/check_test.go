package protocol

import (
	"regexp"
	"testing"
)

func TestNewIDFormat(t *testing.T) {
	re := regexp.MustCompile(`^resp_[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	a, b := NewID("resp"), NewID("resp")
	if !re.MatchString(a) || a == b {
		t.Fatalf("NewID: %q, %q; want distinct resp_ + 32 hex digits of a v4 UUID", a, b)
	}
}

func TestCheckCreate(t *testing.T) {
	yes, no, lane := true, false, "a"
	cases := []struct {
		name  string
		p     CreateParams
		where Where
		param string // "" for no error
	}{
		{"plain", CreateParams{}, PublicHTTP, ""},
		{"background", CreateParams{Background: &yes}, PublicWebSocket, "background"},
		{"stream_id", CreateParams{StreamID: &lane}, AppendWebSocket, "stream_id"},
		{"warm-up on append", CreateParams{Generate: &no}, AppendWebSocket, "generate"},
		{"warm-up on public ws", CreateParams{Generate: &no}, PublicWebSocket, ""},
		{"generate over http", CreateParams{Generate: &yes}, PublicHTTP, "generate"},
	}
	for _, c := range cases {
		err := CheckCreate(&c.p, c.where)
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.param != "" && (err == nil || err.Code != CodeUnsupportedParameter || err.Param != c.param):
			t.Errorf("%s: %v, want unsupported_parameter on %s", c.name, err, c.param)
		}
	}
}

func TestCheckContinuation(t *testing.T) {
	call := func(id string) Item { return Item{Type: ItemFunctionCall, CallID: id} }
	out := func(id string) Item { return Item{Type: ItemFunctionCallOutput, CallID: id} }
	chain := []Item{call("a"), call("b")}
	cases := []struct {
		name  string
		chain []Item
		input []Item
		code  string // "" for no error
	}{
		{"all answered", chain, []Item{out("a"), out("b")}, ""},
		{"unknown call", chain, []Item{out("a"), out("b"), out("c")}, CodeToolCallNotFound},
		{"twice", chain, []Item{out("a"), out("a"), out("b")}, CodeDuplicateToolOutput},
		{"one open", chain, []Item{out("a")}, CodeMissingToolOutput},
		{"call and output in input", nil, []Item{call("x"), out("x")}, ""},
		{"client-side call left open", nil, []Item{call("x")}, ""},
	}
	for _, c := range cases {
		err := CheckContinuation(c.chain, c.input)
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.code != "" && (err == nil || err.Code != c.code || err.Param != "input"):
			t.Errorf("%s: %v, want %s on input", c.name, err, c.code)
		}
	}
}
