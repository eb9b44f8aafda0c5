package responses

import (
	"errors"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// record is an Output that logs its calls.
type record struct{ calls []string }

func (r *record) Text(d string) error { r.calls = append(r.calls, "text:"+d); return nil }
func (r *record) Call(name, id string) error {
	r.calls = append(r.calls, "call:"+name+":"+id)
	return nil
}
func (r *record) Arguments(d string) error { r.calls = append(r.calls, "args:"+d); return nil }

// TestStreamWithoutDeltas: an upstream that sends only output_item.added and .done (no
// deltas) still streams the text and arguments, once; deltas are not repeated at .done.
func TestStreamWithoutDeltas(t *testing.T) {
	frames := []string{
		`{"type":"response.output_item.added","item":{"type":"reasoning"}}`,
		`{"type":"response.output_item.done","item":{"type":"reasoning"}}`,
		`{"type":"response.output_item.added","item":{"type":"message"}}`,
		`{"type":"response.output_item.done","item":{"type":"message","content":[{"type":"output_text","text":"hi"}]}}`,
		`{"type":"response.output_item.added","item":{"type":"function_call","name":"f","call_id":"call_1"}}`,
		`{"type":"response.output_item.done","item":{"type":"function_call","name":"f","call_id":"call_1","arguments":"{}"}}`,
		`{"type":"response.output_item.added","item":{"type":"function_call","name":"g","call_id":"call_2"}}`,
		`{"type":"response.function_call_arguments.delta","delta":"{\"a\":1}"}`,
		`{"type":"response.output_item.done","item":{"type":"function_call","name":"g","call_id":"call_2","arguments":"{\"a\":1}"}}`,
	}
	out := &record{}
	st := &stream{out: sampler.LimitOutput(out, sampler.OutputLimits{})}
	for _, f := range frames {
		ev, err := decodeEvent(t.Context(), []byte(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := `text:|text:hi|call:f:call_1|args:{}|call:g:call_2|args:{"a":1}`
	if got := strings.Join(out.calls, "|"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if strings.Join(st.calls, ",") != "call_1,call_2" || !st.streamed {
		t.Fatalf("calls %v streamed %v", st.calls, st.streamed)
	}
}

// TestResult maps the terminal events.
func TestResult(t *testing.T) {
	ev, _ := decodeEvent(t.Context(), []byte(`{"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":7},"output_tokens":3}}}`))
	res, err := result(ev.Response, ev.Type)
	if err != nil || res.InputTokens != 10 || res.CachedTokens != 7 || res.OutputTokens != 3 {
		t.Fatalf("completed: %+v %v", res, err)
	}
	ev, _ = decodeEvent(t.Context(), []byte(`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}`))
	if res, err := result(ev.Response, ev.Type); err != nil || res.Incomplete != protocol.ReasonMaxOutputTokens {
		t.Fatalf("incomplete: %+v %v", res, err)
	}
	ev, _ = decodeEvent(t.Context(), []byte(`{"type":"response.failed","response":{"error":{"code":"rate_limit_exceeded","message":"slow down"}}}`))
	_, err = result(ev.Response, ev.Type)
	var ue *UpstreamError
	if !errors.As(err, &ue) || err.Error() != "upstream response.failed rate_limit_exceeded: slow down" {
		t.Fatalf("failed: %v", err)
	}
	ev, _ = decodeEvent(t.Context(), []byte(`{"type":"error","status":401,"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key provided: sk-abc"}}`))
	if e := frameError(ev); strings.Contains(e.Error(), "sk-abc") || e.Status != 401 {
		t.Fatalf("401 frame: %v", e)
	}
}

// TestCallIDMap: when the rollout replaced an upstream call_id, the tool output goes upstream
// with the upstream's id; ids and statuses of items are not sent.
func TestCallIDMap(t *testing.T) {
	s := &session{lastCalls: []string{"call_up1", "call_up2"}}
	s.mapCalls([]protocol.Item{
		{Type: protocol.ItemFunctionCall, ID: "fc_1", CallID: "call_up1"},
		{Type: protocol.ItemFunctionCall, ID: "fc_2", CallID: "call_tether2"}, // replaced
	})
	in := inputItems([]protocol.Item{
		{Type: protocol.ItemFunctionCallOutput, ID: "fco_1", CallID: "call_up1", Output: "a"},
		{Type: protocol.ItemFunctionCallOutput, CallID: "call_tether2", Output: "b", Status: "completed"},
		{Type: protocol.ItemMessage, ID: "msg_1", Role: "user", Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: "hi"}}},
	}, s.callIDs)
	if in[0].CallID != "call_up1" || in[1].CallID != "call_up2" || in[0].ID != "" || in[1].Status != "" || in[2].ID != "" {
		t.Fatalf("converted input: %+v", in)
	}
}
