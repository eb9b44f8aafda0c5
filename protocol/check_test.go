package protocol

import (
	"errors"
	"fmt"
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
		{"background on a public ws", CreateParams{Background: &yes}, PublicWebSocket, "background"},
		{"background on append", CreateParams{Background: &yes}, AppendWebSocket, "background"},
		{"background over http", CreateParams{Background: &yes}, PublicHTTP, ""},
		{"background false on a ws", CreateParams{Background: &no}, PublicWebSocket, ""},
		{"stream_id over http", CreateParams{StreamID: &lane}, PublicHTTP, "stream_id"},
		{"stream_id on a websocket", CreateParams{StreamID: &lane}, AppendWebSocket, ""},
		{"stream_id and warm-up on append", CreateParams{StreamID: &lane, Generate: &no}, AppendWebSocket, "generate"},
		{"warm-up on append", CreateParams{Generate: &no}, AppendWebSocket, "generate"},
		{"warm-up on public ws", CreateParams{Generate: &no}, PublicWebSocket, ""},
		{"generate over http", CreateParams{Generate: &yes}, PublicHTTP, "generate"},
	}
	if err := CheckCreate(&CreateParams{Background: &yes, Store: &no}, PublicHTTP); !isErr(err, CodeInvalidValue, "store") {
		t.Errorf("background without store: %v, want invalid_value on store", err)
	}
	for _, c := range cases {
		err := CheckCreate(&c.p, c.where)
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.param != "" && !isErr(err, CodeUnsupportedParameter, c.param):
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
		case c.code != "" && !isErr(err, c.code, "input"):
			t.Errorf("%s: %v, want %s on input", c.name, err, c.code)
		}
	}
}

// isErr reports whether err is an *Error with code and param.
func isErr(err error, code, param string) bool {
	e, ok := AsError(err)
	return ok && e.Code == code && e.Param == param
}

func TestErrorKinds(t *testing.T) {
	payload := Errorf(413, CodeMessageTooLarge, "", "too large")
	var err error = &ConnectionError{Err: payload, Code: CloseMessageTooBig, Reason: "frame too large"}
	if ce, ok := AsConnectionError(err); !ok || ce.Code != 1009 {
		t.Fatalf("AsConnectionError: %v %v", ce, ok)
	}
	if e, ok := AsError(err); !ok || e != payload {
		t.Fatalf("AsError of a ConnectionError: %v %v", e, ok)
	}
	if _, ok := AsConnectionError(payload); ok {
		t.Fatal("a request-scoped *Error is not connection-fatal")
	}
	if e := ErrorOf(errors.New("boom")); e.Code != CodeServerError || e.Status != 500 {
		t.Fatalf("ErrorOf(other) = %+v, want server_error", e)
	}
	if ErrorOf(fmt.Errorf("wrapped: %w", payload)) != payload {
		t.Fatal("ErrorOf does not unwrap")
	}
}
