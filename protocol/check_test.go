package protocol

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
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
		{"client-side call left open besides the answers", chain, []Item{out("a"), out("b"), call("x")}, ""},
		{"pending call repeated, not answered", chain, []Item{out("a"), call("b")}, CodeMissingToolOutput},
		{"pending call repeated, then answered", chain, []Item{out("a"), call("b"), out("b")}, ""},
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

// checkContinuationMaps is the straightforward form of CheckContinuation (a map of open calls,
// a map of cut-off calls, a slice of their order), kept as the reference the flag-map form
// must agree with.
func checkContinuationMaps(chain, input []Item) error {
	const bad = http.StatusBadRequest
	open := map[string]bool{}
	cutOff := map[string]bool{}
	var order []string
	for i := range chain {
		switch chain[i].Type {
		case ItemFunctionCall:
			if chain[i].Status == StatusIncomplete {
				cutOff[chain[i].CallID] = true
				continue
			}
			if _, seen := open[chain[i].CallID]; !seen {
				order = append(order, chain[i].CallID)
			}
			open[chain[i].CallID] = false
		case ItemFunctionCallOutput:
			open[chain[i].CallID] = true
		}
	}
	var pending []string
	for _, id := range order {
		if !open[id] {
			pending = append(pending, id)
		}
	}
	for i := range input {
		it := &input[i]
		switch it.Type {
		case ItemFunctionCall:
			open[it.CallID] = false
		case ItemFunctionCallOutput:
			answered, ok := open[it.CallID]
			switch {
			case !ok && cutOff[it.CallID]:
				return Errorf(bad, CodeToolCallNotFound, "input",
					"Function call %s was cut off before it was complete (status incomplete): it is not pending and takes no output.", it.CallID)
			case !ok:
				return Errorf(bad, CodeToolCallNotFound, "input",
					"No tool call found for function call output with call_id %s.", it.CallID)
			case answered:
				return Errorf(bad, CodeDuplicateToolOutput, "input",
					"Duplicate tool output for function call %s.", it.CallID)
			}
			open[it.CallID] = true
		}
	}
	for _, id := range pending {
		if !open[id] {
			return Errorf(bad, CodeMissingToolOutput, "input",
				"No tool output found for function call %s.", id)
		}
	}
	return nil
}

// TestCheckContinuationAgreesWithMaps compares CheckContinuation with the map form on random
// chains and inputs over a few call ids (and, for one case in twenty, long chains over many
// ids): calls complete and incomplete, outputs before and after their calls, duplicates,
// messages between.
func TestCheckContinuationAgreesWithMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids, length := 5, 12
	item := func() Item {
		id := fmt.Sprintf("call_%d", rng.IntN(ids))
		switch rng.IntN(6) {
		case 0:
			return Item{Type: ItemMessage, Role: RoleUser}
		case 1:
			return Item{Type: ItemFunctionCall, CallID: id, Status: StatusIncomplete}
		case 2, 3:
			return Item{Type: ItemFunctionCall, CallID: id, Status: StatusCompleted}
		}
		return Item{Type: ItemFunctionCallOutput, CallID: id}
	}
	errs := map[string]int{}
	for n := 0; n < 10000; n++ {
		ids, length = 5, 12
		if n%20 == 0 {
			ids, length = 200, 400
		}
		chain := make([]Item, rng.IntN(length))
		for i := range chain {
			chain[i] = item()
		}
		input := make([]Item, rng.IntN(5))
		for i := range input {
			input[i] = item()
		}
		got, want := CheckContinuation(chain, input), checkContinuationMaps(chain, input)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chain %+v input %+v: got %v, want %v", chain, input, got, want)
		}
		if e, ok := AsError(want); ok {
			errs[e.Code]++
		} else {
			errs["ok"]++
		}
	}
	for _, code := range []string{"ok", CodeToolCallNotFound, CodeDuplicateToolOutput, CodeMissingToolOutput} {
		if errs[code] < 25 {
			t.Fatalf("the random cases rarely give %s: %v", code, errs)
		}
	}
}

// BenchmarkCheckContinuation checks the input of a hot turn against a chain of 200 answered
// calls and one pending call (the end of a 200-call rollout).
func BenchmarkCheckContinuation(b *testing.B) {
	chain := []Item{{Type: ItemMessage, Role: RoleUser}}
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("call_%032x", i)
		chain = append(chain, Item{Type: ItemFunctionCall, CallID: id}, Item{Type: ItemFunctionCallOutput, CallID: id})
	}
	last := fmt.Sprintf("call_%032x", 200)
	chain = append(chain, Item{Type: ItemFunctionCall, CallID: last})
	in := []Item{{Type: ItemFunctionCallOutput, CallID: last}}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckContinuation(chain, in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCallTableGrows fills a table sized for one id with many, then reads every id back.
func TestCallTableGrows(t *testing.T) {
	tab := getCallTable(1)
	defer tab.put()
	for i := 0; i < 1000; i++ {
		*tab.flags(fmt.Sprintf("call_%d", i)) |= uint8(i%7 + 1)
	}
	for i := 0; i < 1000; i++ {
		if got := tab.get(fmt.Sprintf("call_%d", i)); got != uint8(i%7+1) {
			t.Fatalf("call_%d: flags %d, want %d", i, got, i%7+1)
		}
	}
	if tab.get("call_1000") != 0 || tab.n != 1000 {
		t.Fatalf("an unknown id has flags, or %d ids counted", tab.n)
	}
}
