package chat_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
)

// toolCreate is the create of the engine's tool rollout (llamatest.ToolPrompt).
func toolCreate() map[string]any {
	return map[string]any{"type": "response.create", "model": llamatest.Model, "input": llamatest.ToolPrompt,
		"tools": []any{llamatest.Tool}, "temperature": 1, "max_output_tokens": 1500}
}

// outputs answers every call of frames.
func outputs(calls []conformance.Frame) []any {
	var in []any
	for _, c := range calls {
		in = append(in, map[string]any{"type": "function_call_output", "call_id": c.Str("call_id"), "output": "sunny"})
	}
	return in
}

// callsOf returns the complete function calls among frames' output_item.done events.
func callsOf(fs []wstest.Frame) []conformance.Frame {
	var calls []conformance.Frame
	for _, f := range fs {
		if f.Type() == "response.output_item.done" && f.Str("item", "type") == "function_call" && f.Str("item", "status") == "completed" {
			calls = append(calls, f.Obj("item"))
		}
	}
	return calls
}

// TestEngineToolRollout runs a tool rollout through a real llama-server on each transport —
// append, public WebSocket, HTTP with previous_response_id: the model calls, the Response
// suspends (or its segment ends) at the calls, the outputs continue it on the same slot, and
// every continuation's cached_tokens are the engine's own cache_n and cover the previous step's
// prompt.
func TestEngineToolRollout(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, Seed: llamatest.ToolSeed})
	front, _, px := engineFront(t, chat.Options{Slots: 2}, eng)
	base := "ws" + strings.TrimPrefix(front, "http") + "/v1/responses"

	t.Run("append", func(t *testing.T) {
		h := http.Header{}
		h.Add("OpenAI-Beta", "responses_append=v1")
		c := wstest.Dial(t, base, h)
		c.Send(toolCreate())
		suspensions := 0
		var all []wstest.Frame
		for step := 0; ; step++ {
			fs := c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
			all = append(all, fs...)
			last := fs[len(fs)-1]
			if last.Type() != "response.done" {
				if last.Type() == "response.failed" {
					t.Fatalf("step %d: %v", step, last.Get("response", "error"))
				}
				break
			}
			suspensions++
			calls := callsOf(fs)
			if len(calls) == 0 || len(last.List("pending_call_ids")) != len(calls) {
				t.Fatalf("step %d suspended with %d pending calls, %d complete calls", step, len(last.List("pending_call_ids")), len(calls))
			}
			c.Send(map[string]any{"type": "response.append", "response_id": last.Str("response_id"), "input": outputs(calls)})
		}
		wstest.CheckGrammar(t, conformance.ShapeAppend, all)
		if suspensions == 0 {
			t.Skip("the model answered without calling the tool (the engine build changed?)")
		}
		steps := px[0].waitSteps(t, suspensions+1)
		for i, st := range steps[1:] {
			prev := steps[i]
			if st.slot != prev.slot || st.cacheN < prev.prompt {
				t.Errorf("step %d: slot %d (before: %d), cache_n %d of the previous step's %d prompt tokens", i+1, st.slot, prev.slot, st.cacheN, prev.prompt)
			}
		}
		t.Logf("append: %d suspensions", suspensions)
	})

	t.Run("ws", func(t *testing.T) {
		c := wstest.Dial(t, base, nil)
		publicToolRollout(t, px[0], func(create map[string]any) conformance.Frame {
			c.Send(create)
			fs := c.Until("response.completed", "response.incomplete", "response.failed")
			return fs[len(fs)-1].Obj("response")
		})
	})
	t.Run("http", func(t *testing.T) {
		publicToolRollout(t, px[0], func(create map[string]any) conformance.Frame {
			delete(create, "type")
			create["store"] = true
			code, r := postJSON(t, front+"/v1/responses", create)
			if code != 200 {
				t.Fatalf("POST: %d %v", code, r)
			}
			return conformance.Frame(r)
		})
	})
}

// publicToolRollout drives the tool rollout on the public shape through turn: each Response that
// ends at complete calls is continued by previous_response_id with their outputs; every
// continuation's cached_tokens are the engine's cache_n and cover the previous step's prompt.
func publicToolRollout(t *testing.T, px *engineProxy, turn func(map[string]any) conformance.Frame) {
	before := len(px.waitSteps(t, 0))
	create := toolCreate()
	segments := 0
	for {
		r := turn(create)
		if r.Str("status") == "failed" {
			t.Fatalf("segment %d failed: %v", segments, r.Get("error"))
		}
		segments++
		steps := px.waitSteps(t, before+segments)
		st := steps[len(steps)-1]
		if got := r.Num("usage", "input_tokens_details", "cached_tokens"); got != st.cacheN {
			t.Errorf("segment %d: cached_tokens %d, the engine's cache_n %d", segments, got, st.cacheN)
		}
		if segments > 1 && st.cacheN < steps[len(steps)-2].prompt {
			t.Errorf("segment %d: cache_n %d of the previous step's %d prompt tokens", segments, st.cacheN, steps[len(steps)-2].prompt)
		}
		var calls []conformance.Frame
		for _, it := range r.List("output") {
			if it := conformance.Frame(it.(map[string]any)); it.Type() == "function_call" && it.Str("status") == "completed" {
				calls = append(calls, it)
			}
		}
		if len(calls) == 0 || r.Str("status") != "completed" {
			break
		}
		create = toolCreate()
		create["previous_response_id"] = r.Str("id")
		create["input"] = outputs(calls)
	}
	if segments < 2 {
		t.Skip("the model answered without calling the tool (the engine build changed?)")
	}
	t.Logf("%d segments", segments)
}

// toolRollouts runs n concurrent append-shape tool rollouts (prompts "weather 0" … "weather 5")
// and counts the resumed steps and those whose cached tokens cover at least 90% of the previous
// step's prompt. Append-shape usage is cumulative: a step's figures are the differences.
func toolRollouts(t *testing.T, front string, n int) (hot, kept int) {
	base := "ws" + strings.TrimPrefix(front, "http") + "/v1/responses"
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := http.Header{}
			h.Add("OpenAI-Beta", "responses_append=v1")
			c := wstest.Dial(t, base, h)
			create := toolCreate()
			create["input"] = fmt.Sprintf("weather %d", r%6)
			c.Send(create)
			var input, cached, prevPrompt int // cumulative input and cached tokens; the last step's prompt
			for step := 0; ; step++ {
				fs := c.Until("response.done", "response.completed", "response.incomplete", "response.failed")
				last := fs[len(fs)-1]
				usage := last.Obj("usage")
				if last.Type() != "response.done" {
					usage = last.Obj("response", "usage")
				}
				stepInput, stepCached := usage.Num("input_tokens")-input, usage.Num("input_tokens_details", "cached_tokens")-cached
				input, cached = usage.Num("input_tokens"), usage.Num("input_tokens_details", "cached_tokens")
				if step > 0 {
					mu.Lock()
					hot++
					if float64(stepCached) >= 0.9*float64(prevPrompt) {
						kept++
					}
					mu.Unlock()
				}
				prevPrompt = stepInput
				if last.Type() != "response.done" {
					return
				}
				c.Send(map[string]any{"type": "response.append", "response_id": last.Str("response_id"), "input": outputs(callsOf(fs))})
			}
		}()
	}
	wg.Wait()
	return hot, kept
}

// TestEngineToolRolloutsKVKept runs 16 concurrent tool rollouts over 4 slots of a llama-server
// without its host-RAM cache: with Tether owning the slots and saving KV, at least 95% of the
// resumed steps find the previous step's prompt cached (TETHER_MEASURE=1 logs the figures
// without saving and with the engine's own slot choice).
func TestEngineToolRolloutsKVKept(t *testing.T) {
	if testing.Short() {
		t.Skip("engine measurement: skipped with -short")
	}
	modes := []struct {
		name  string
		slots int
		save  bool
	}{{"owned+saved", 4, true}}
	if envMeasure() {
		modes = append(modes, struct {
			name  string
			slots int
			save  bool
		}{"owned, no save", 4, false}, struct {
			name  string
			slots int
			save  bool
		}{"engine's choice", 0, false})
	}
	for i, mode := range modes {
		eng := llamatest.Start(t, llamatest.Options{Slots: 4, NoCacheRAM: true, SlotSave: true, Seed: llamatest.ToolSeed})
		opts := chat.Options{Slots: mode.slots}
		if mode.save {
			opts.SlotDir = eng.SlotDir()
		}
		front, m, _ := engineFront(t, opts, eng)
		hot, kept := toolRollouts(t, front, 16)
		t.Logf("%s: %d of %d resumed steps kept >= 90%% of the previous prompt; %s", mode.name, kept, hot, kvCounts(t, m))
		if i == 0 && (hot == 0 || float64(kept) < 0.95*float64(hot)) {
			t.Errorf("%s: %d of %d resumed steps kept the previous prompt, want >= 95%%", mode.name, kept, hot)
		}
		eng.Stop()
	}
}
