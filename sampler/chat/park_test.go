package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/chat"
)

// textOut is a sampler.Output that keeps a step's text and calls.
type textOut struct {
	text  strings.Builder
	calls []string
}

func (o *textOut) Text(d string) error { o.text.WriteString(d); return nil }
func (o *textOut) Call(name, id string) error {
	o.calls = append(o.calls, name+" "+id)
	return nil
}
func (o *textOut) Arguments(string) error { return nil }

func userItem(text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: text}}}
}

func assistantItem(text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleAssistant, Status: protocol.StatusCompleted,
		Content: []protocol.ContentPart{{Type: protocol.PartOutputText, Text: text}}}
}

// sample runs one step of s and fails t on an error; it returns the result and the text.
func sample(t *testing.T, s sampler.ModelSession, step *sampler.Step) (sampler.StepResult, string) {
	t.Helper()
	var out textOut
	res, err := s.Sample(t.Context(), step, &out)
	if err != nil {
		t.Fatalf("step %d: %v", step.Index, err)
	}
	return res, out.text.String()
}

// park parks s and closes it, as a rollout that parks does; it returns the state.
func park(t *testing.T, s sampler.ModelSession) []byte {
	t.Helper()
	state, err := s.(sampler.ParkableSession).Park()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return state
}

// kvFile returns the slot file a parked state names ("" for none).
func kvFile(t *testing.T, state []byte) string {
	t.Helper()
	var v struct {
		KV string `json:"kv"`
	}
	if err := json.Unmarshal(state, &v); err != nil {
		t.Fatalf("state %s: %v", state, err)
	}
	return v.KV
}

func unparkSession(t *testing.T, m *chat.Model, info sampler.RolloutInfo, state []byte, fed []protocol.Item) sampler.ModelSession {
	t.Helper()
	if !sampler.CanPark(m) {
		t.Fatal("the chat model cannot park")
	}
	s, err := m.Unpark(t.Context(), info, state, fed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChainParkRebuildsMessages parks a session whose items were converted in pieces — a
// warm-up ending with an assistant message, then a step whose input starts with a
// function_call (sent as its own assistant message, not merged) — and unparks it: the next
// request's messages are exactly those of a session that stayed open, and the state holds no
// message.
func TestChainParkRebuildsMessages(t *testing.T) {
	_, m, p := chain(t, chat.Options{})
	settings := &sampler.Settings{Model: "sim", Instructions: "be brief", Tools: []protocol.Tool{{Type: protocol.ToolFunction,
		Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}}}
	warm := []protocol.Item{userItem("weather in Paris"), assistantItem("let me check")}
	input := []protocol.Item{{Type: protocol.ItemFunctionCall, CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris"}`},
		{Type: protocol.ItemFunctionCallOutput, CallID: "call_1", Output: "sunny"}, userItem("and London?")}
	run := func(id string, parkIt bool) []string {
		info := sampler.RolloutInfo{ID: id, Settings: settings}
		s, err := m.Open(t.Context(), info)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prefill(t.Context(), warm); err != nil {
			t.Fatal(err)
		}
		fed := append(append([]protocol.Item(nil), warm...), input...)
		_, text := sample(t, s, &sampler.Step{Input: input, Context: fed})
		if parkIt {
			state := park(t, s)
			if strings.Contains(string(state), "Paris") || len(state) > 200 {
				t.Fatalf("the parked state holds the conversation: %s", state)
			}
			s = unparkSession(t, m, info, state, fed)
		}
		out := []protocol.Item{assistantItem(text)}
		sample(t, s, &sampler.Step{Index: 1, Output: out, Input: []protocol.Item{userItem("thanks")}})
		s.Close()
		reqs := p.requests()
		return describe(reqs[len(reqs)-1].Messages)
	}
	live, unparked := run("resp_live", false), run("resp_parked", true)
	if strings.Join(live, "\n") != strings.Join(unparked, "\n") {
		t.Fatalf("after unpark:\n%s\nstayed open:\n%s", strings.Join(unparked, "\n"), strings.Join(live, "\n"))
	}
	if len(live) != 8 || !strings.HasPrefix(live[3], "assistant:null:call_1") {
		t.Fatalf("messages:\n%s", strings.Join(live, "\n"))
	}
}

// TestChainUnparkRefusesBadState: a state Park did not write, one that does not fit the items
// given, and one whose file name could leave the slot directory are refused (ErrBadState).
func TestChainUnparkRefusesBadState(t *testing.T) {
	m := newModel(t, chat.Options{BaseURLs: []string{"http://127.0.0.1:1/v1"}, Slots: 1, SlotDir: t.TempDir()})
	info := sampler.RolloutInfo{ID: "resp_x", Settings: &sampler.Settings{Model: "m"}}
	fed := []protocol.Item{userItem("hi")}
	for _, state := range []string{
		`not json`,
		`{"v":2,"items":1}`,
		`{"v":1,"items":2}`,
		`{"v":1,"items":1,"breaks":[2]}`,
		`{"v":1,"items":1,"kv":"../tether-resp_x-0123456789abcdef.bin"}`,
		`{"v":1,"items":1,"kv":"tether-resp_y-0123456789abcdef.bin"}`,
		`{"v":1,"items":1,"kv":"tether-resp_x-0123.bin"}`,
	} {
		if _, err := m.Unpark(context.Background(), info, []byte(state), fed); !errors.Is(err, chat.ErrBadState) {
			t.Errorf("state %s: %v, want ErrBadState", state, err)
		}
	}
}

// dirFiles lists the slot files in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "tether-*.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestChainStalledSlotSaveBounded: an engine that stops answering (kill -STOP) while a
// session parks holds the slot save no longer than Options.Timeout: Park returns, without a
// file, well within the 30 s a save may take on a live engine; the rollout that parks (and a
// response.cancel waiting for it) is not held for those 30 s.
func TestChainStalledSlotSaveBounded(t *testing.T) {
	stalled := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n"+
			"data: [DONE]\n\n")
	})
	mux.HandleFunc("/slots/", func(w http.ResponseWriter, r *http.Request) {
		select { // a stalled engine: no answer until the client gives up
		case <-r.Context().Done():
		case <-stalled:
		}
	})
	es := httptest.NewServer(mux)
	t.Cleanup(func() { close(stalled); es.Close() })
	const timeout = 200 * time.Millisecond
	m := newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}, Slots: 1, SlotDir: t.TempDir(), Timeout: timeout})
	s, err := m.Open(t.Context(), sampler.RolloutInfo{ID: "resp_stalled", Settings: &sampler.Settings{Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	first := []protocol.Item{userItem("hello")}
	sample(t, s, &sampler.Step{Input: first, Context: first})
	start := time.Now()
	state := park(t, s)
	if took := time.Since(start); took > 10*timeout {
		t.Fatalf("the park waited %v for a stalled engine (-upstream-timeout %v)", took, timeout)
	}
	if f := kvFile(t, state); f != "" {
		t.Fatalf("a failed save named a file: %s", f)
	}
}
