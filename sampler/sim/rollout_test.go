package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

func TestTwentySequentialCalls(t *testing.T) {
	set := Settings{Tools: []protocol.Tool{weatherTool, execTool}, Metadata: map[string]string{MetaCalls: "20"}, ParallelToolCalls: true, Model: "sim"}
	ticket := &fakeTicket{}
	r, rec := start(t, Config{Settings: set, Input: []protocol.Item{userMsg("Run the checks")}, Ticket: ticket})
	prevTokens := 0
	for i := 1; i <= 20; i++ {
		s := rec.mustSuspend(t)
		if len(s.PendingCallIDs) != 1 || len(s.Output) != 1 {
			t.Fatalf("suspension %d: pending %v output %d", i, s.PendingCallIDs, len(s.Output))
		}
		call := s.Output[0]
		if call.Name != "exec_command" || call.Arguments != fmt.Sprintf(`{"cmd":"echo tether-call-%d"}`, i) || call.CallID != s.PendingCallIDs[0] {
			t.Fatalf("call %d: %+v", i, call)
		}
		if !strings.HasPrefix(call.ID, "fc_") || !strings.HasPrefix(call.CallID, "call_") || call.Status != protocol.StatusCompleted {
			t.Fatalf("call %d ids/status: %+v", i, call)
		}
		// The step's cached tokens are everything before the new input.
		if s.StepUsage.InputTokensDetails.CachedTokens != prevTokens && i > 1 {
			t.Fatalf("step %d cached %d, want %d", i, s.StepUsage.InputTokensDetails.CachedTokens, prevTokens)
		}
		if i == 1 && s.StepUsage.InputTokensDetails.CachedTokens != 0 {
			t.Fatalf("first step cached %d", s.StepUsage.InputTokensDetails.CachedTokens)
		}
		prevTokens = len(RenderItems(&set, s.Context))
		if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(call.CallID, fmt.Sprintf("out-%d", i))}, Ticket: ticket}); err != nil {
			t.Fatal(err)
		}
	}
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseCompleted || len(e.Output) != 21 || !e.Sampling {
		t.Fatalf("ending %s, %d outputs, sampling %v", e.Status, len(e.Output), e.Sampling)
	}
	answer := answerText(e.Output)
	for i := 1; i <= 20; i++ {
		if !strings.Contains(answer, fmt.Sprintf("tool: \"out-%d\"\n", i)) {
			t.Fatalf("answer does not quote out-%d:\n%s", i, answer)
		}
	}
	// The fingerprint is that of the full render of the context the answer was sampled from:
	// the incremental buffer equals the full render.
	ctxItems := e.Context[:len(e.Context)-1]
	if !strings.HasSuffix(answer, Fingerprint(RenderItems(&set, ctxItems))) {
		t.Fatalf("fingerprint mismatch: %s vs %s", answer[strings.LastIndex(answer, "["):], Fingerprint(RenderItems(&set, ctxItems)))
	}
	// Usage: 21 steps; input - cached is what was prefilled: the first input, then each output.
	if e.Usage.InputTokens-e.Usage.InputTokensDetails.CachedTokens >= e.Usage.InputTokens/4 {
		t.Fatalf("usage %+v: too little cached", e.Usage)
	}
	r.Wait() // the ticket is released after Ended returns
	waits, releases := ticket.counts()
	if waits != 21 || releases != 21 {
		t.Fatalf("ticket waits %d releases %d", waits, releases)
	}
	// Output indexes run over the whole rollout.
	idx := -1
	for _, ev := range rec.Events() {
		if ev.Type == protocol.EventOutputItemAdded {
			if ev.OutputIndex != idx+1 {
				t.Fatalf("output_index %d after %d", ev.OutputIndex, idx)
			}
			idx = ev.OutputIndex
		}
	}
	if idx != 20 {
		t.Fatalf("last output_index %d", idx)
	}
}

func TestEventSequence(t *testing.T) {
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{weatherTool, timeTool}, ParallelToolCalls: true,
		Metadata: map[string]string{MetaParallel: "2"}}, Input: []protocol.Item{userMsg("Weather and time in Paris?")}})
	s := rec.mustSuspend(t)
	if len(s.PendingCallIDs) != 2 || s.Output[0].Name != "get_weather" || s.Output[1].Name != "get_time" {
		t.Fatalf("suspension %+v", s)
	}
	// Out of order outputs are fine.
	if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(s.PendingCallIDs[1], "14:05"), toolOutput(s.PendingCallIDs[0], "18C")}}); err != nil {
		t.Fatal(err)
	}
	e := rec.mustEnd(t)
	var types []string
	for _, ev := range rec.Events() {
		if ev.Type == protocol.EventOutputTextDelta || ev.Type == protocol.EventArgumentsDelta {
			if len(types) > 0 && types[len(types)-1] == string(ev.Type)+"*" {
				continue
			}
			types = append(types, string(ev.Type)+"*")
			continue
		}
		types = append(types, string(ev.Type))
	}
	want := []string{
		"response.output_item.added", "response.function_call_arguments.delta*", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta*", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta*", "response.output_text.done", "response.content_part.done", "response.output_item.done",
	}
	if !slices.Equal(types, want) {
		t.Fatalf("events\n%v\nwant\n%v", types, want)
	}
	evs := rec.Events()
	added := evs[0].Item
	if added.Status != protocol.StatusInProgress || added.Arguments != "" || added.Name != "get_weather" {
		t.Fatalf("added %+v", added)
	}
	last := evs[len(evs)-1]
	if last.OutputIndex != 2 || last.Item.Status != protocol.StatusCompleted || last.Item.Text() != answerText(e.Output) {
		t.Fatalf("last event %+v", last)
	}
	if !strings.Contains(answerText(e.Output), `tool: "14:05"`) {
		t.Fatal("answer misses a tool output")
	}
}

func TestResumeValidation(t *testing.T) {
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{weatherTool}, ParallelToolCalls: true,
		Metadata: map[string]string{MetaParallel: "2"}}, Input: []protocol.Item{userMsg("go")}})
	s := rec.mustSuspend(t)
	a, b := s.PendingCallIDs[0], s.PendingCallIDs[1]
	err := r.Resume(Resume{Input: []protocol.Item{toolOutput(a, "x")}})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeMissingToolOutput || perr.Message != "No tool output found for function call "+b+"." {
		t.Fatalf("err %v", err)
	}
	for _, bad := range [][]protocol.Item{
		{toolOutput(a, "x"), toolOutput(a, "x"), toolOutput(b, "y")},
		{toolOutput(a, "x"), toolOutput(b, "y"), toolOutput("call_nope", "z")},
	} {
		if err := r.Resume(Resume{Input: bad}); !errors.As(err, &perr) {
			t.Fatalf("bad input accepted: %v", err)
		}
	}
	// Still suspended: a good resume works. It waits for its ticket: meanwhile it is not
	// suspended.
	ticket := &fakeTicket{gate: make(chan struct{})}
	if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(b, "y"), toolOutput(a, "x"), userMsg("and more")}, Ticket: ticket}); err != nil {
		t.Fatal(err)
	}
	if err := r.Resume(Resume{Input: nil}); !errors.Is(err, ErrNotSuspended) || errors.Is(err, ErrEnded) {
		t.Fatalf("resume while queued: %v", err)
	}
	close(ticket.gate)
	// The new user message starts a new turn: the sim calls a tool again.
	s = rec.mustSuspend(t)
	if len(s.PendingCallIDs) != 2 || len(s.Context) != 8 {
		t.Fatalf("suspension %+v", s)
	}
	r.Cancel("")
	r.Wait()
	if err := r.Resume(Resume{}); !errors.Is(err, ErrNotSuspended) || !errors.Is(err, ErrEnded) {
		t.Fatalf("resume after end: %v", err)
	}
}

func TestCancelSuspended(t *testing.T) {
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{weatherTool}}, Input: []protocol.Item{userMsg("go")}})
	rec.mustSuspend(t)
	r.Cancel(protocol.ReasonServerShutdown)
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonServerShutdown || e.Sampling || e.Err != nil || len(e.Output) != 1 {
		t.Fatalf("ending %+v", e)
	}
	r.Wait()
}

func TestCancelWhileSampling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		r := Start(t.Context(), Config{Model: NewSim(SimOptions{Speed: Speed65, Realtime: true}), Sink: rec,
			Settings: Settings{Metadata: map[string]string{MetaAnswerTokens: "500"}}, Input: []protocol.Item{userMsg("write a lot")}})
		time.Sleep(2 * time.Second) // TTFT 500ms, then ~97 tokens at 65/s
		synctest.Wait()
		n := len(rec.Events())
		if n < 5 {
			t.Fatalf("only %d events after 2s", n)
		}
		r.Cancel("")
		r.Wait()
		e := <-rec.ended
		if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonCancelled || !e.Sampling {
			t.Fatalf("ending %+v", e)
		}
		evs := rec.Events()
		last := evs[len(evs)-1]
		if last.Type != protocol.EventOutputItemDone || last.Item.Status != protocol.StatusIncomplete {
			t.Fatalf("last event %s %+v", last.Type, last.Item)
		}
		if evs[len(evs)-2].Type != protocol.EventContentPartDone || evs[len(evs)-3].Type != protocol.EventOutputTextDone {
			t.Fatal("open message not closed with text/part done events")
		}
		if e.Output[0].Status != protocol.StatusIncomplete || e.Output[0].Text() != evs[len(evs)-3].Text {
			t.Fatalf("output %+v", e.Output[0])
		}
		if e.Usage.OutputTokens < 50 || e.Usage.OutputTokens > 150 {
			t.Fatalf("output tokens %d after 1.5s at 65/s", e.Usage.OutputTokens)
		}
	})
}

func TestSuspendTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		r := Start(t.Context(), Config{Model: NewSim(SimOptions{}), Sink: rec, SuspendTimeout: 10 * time.Minute,
			Settings: Settings{Tools: []protocol.Tool{weatherTool}}, Input: []protocol.Item{userMsg("go")}})
		<-rec.suspended
		t0 := time.Now()
		r.Wait()
		e := <-rec.ended
		if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonIdleTimeout || time.Since(t0) != 10*time.Minute {
			t.Fatalf("ending %+v after %v", e, time.Since(t0))
		}
	})
}

func TestSimRealtimeCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		t0 := time.Now()
		r := Start(t.Context(), Config{Model: NewSim(SimOptions{Speed: Speed1000, Realtime: true}), Sink: rec,
			Settings: Settings{}, Input: []protocol.Item{userMsg(strings.Repeat("word ", 2000))}})
		r.Wait()
		e := <-rec.ended
		prefill := e.StepUsage.InputTokens
		want := Speed1000.Cost().Duration(prefill, e.StepUsage.OutputTokens)
		if got := time.Since(t0); got < want-time.Millisecond || got > want+time.Millisecond {
			t.Fatalf("took %v, cost model says %v", got, want)
		}
	})
}

func TestContextCancelFreesRollout(t *testing.T) {
	for _, phase := range []string{"queued", "sampling", "suspended"} {
		t.Run(phase, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				rec := newRecorder()
				ticket := &fakeTicket{}
				speed := SpeedInstant
				switch phase {
				case "queued":
					ticket.gate = make(chan struct{})
				case "sampling":
					speed = Speed65
				}
				r := Start(ctx, Config{Model: NewSim(SimOptions{Speed: speed, Realtime: true}), Sink: rec, Ticket: ticket,
					Settings: Settings{Tools: []protocol.Tool{weatherTool}}, Input: []protocol.Item{userMsg("go")}})
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				cancel()
				r.Wait()
				e := <-rec.ended
				if e.Status != protocol.ResponseIncomplete || !errors.Is(e.Err, context.Canceled) {
					t.Fatalf("ending %+v", e)
				}
				if _, rel := ticket.counts(); rel == 0 {
					t.Fatal("ticket not released")
				}
			})
		})
	}
}

func TestMaxOutputTokensEndsIncomplete(t *testing.T) {
	_, rec := start(t, Config{Settings: Settings{MaxOutputTokens: 3}, Input: []protocol.Item{userMsg("hello there")}})
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonMaxOutputTokens || e.Usage.OutputTokens != 3 {
		t.Fatalf("ending %+v", e)
	}
	if e.Output[0].Status != protocol.StatusIncomplete {
		t.Fatalf("item status %s", e.Output[0].Status)
	}
}

func TestInjectedFailure(t *testing.T) {
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{weatherTool}, Metadata: map[string]string{MetaFail: "step:1"}},
		Input: []protocol.Item{userMsg("go")}})
	s := rec.mustSuspend(t)
	if err := r.Resume(Resume{Input: outputs(s, "o")}); err != nil {
		t.Fatal(err)
	}
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseFailed || e.Error == nil || e.Error.Code != protocol.CodeServerError || !errors.Is(e.Err, ErrInjectedFailure) {
		t.Fatalf("ending %+v", e)
	}
}

func TestSinkGone(t *testing.T) {
	rec := newRecorder()
	rec.failAfter = 3
	r := Start(context.Background(), Config{Model: NewSim(SimOptions{}), Sink: rec, Input: []protocol.Item{userMsg("hello")}})
	r.Wait()
	e := <-rec.ended
	if e.Status != protocol.ResponseIncomplete || !errors.Is(e.Err, errGone) {
		t.Fatalf("ending %+v", e)
	}
	if len(rec.Events()) != 3 {
		t.Fatalf("%d events after the sink failed", len(rec.Events()))
	}
}

func TestWarmUpAndSuspendOnAnswer(t *testing.T) {
	set := Settings{Instructions: "be nice"}
	hist := []protocol.Item{userMsg("old question"), {Type: protocol.ItemMessage, Role: protocol.RoleAssistant, Content: []protocol.ContentPart{{Type: protocol.PartOutputText, Text: "old answer"}}}}
	r, rec := start(t, Config{Settings: set, History: hist, StartSuspended: true, SuspendOnAnswer: true})
	s := rec.mustSuspend(t)
	if len(s.PendingCallIDs) != 0 || len(s.Output) != 0 || s.Usage != (protocol.Usage{}) {
		t.Fatalf("warm-up suspension %+v", s)
	}
	if rec.started != 0 {
		t.Fatal("Started during a warm-up")
	}
	if err := r.Resume(Resume{Input: []protocol.Item{userMsg("new question")}}); err != nil {
		t.Fatal(err)
	}
	s = rec.mustSuspend(t)
	if len(s.PendingCallIDs) != 0 || len(s.Output) != 1 || s.Output[0].Type != protocol.ItemMessage {
		t.Fatalf("answer suspension %+v", s)
	}
	// The warm-up prefilled the history: only the new message was prefilled.
	newTokens := len(RenderItems(nil, []protocol.Item{userMsg("new question")}))
	if u := s.StepUsage; u.InputTokens-u.InputTokensDetails.CachedTokens != newTokens {
		t.Fatalf("usage %+v, new input %d tokens", u, newTokens)
	}
	if !strings.Contains(answerText(s.Output), `user: "old question"`) {
		t.Fatal("answer misses the history")
	}
	r.Cancel("")
	e := rec.mustEnd(t)
	if e.Reason != protocol.ReasonCancelled || e.StepUsage != (protocol.Usage{}) {
		t.Fatalf("ending %+v", e)
	}
}

// TestHotEqualsCold checks that resuming a rollout and rebuilding its context from the chain's
// items give the model the same context (same answer, same fingerprint), while usage differs.
func TestHotEqualsCold(t *testing.T) {
	set := Settings{Tools: []protocol.Tool{execTool}, Metadata: map[string]string{MetaCalls: "3"}, ParallelToolCalls: true, Instructions: "x"}
	r, rec := start(t, Config{Settings: set, Input: []protocol.Item{userMsg("go")}})
	var s Suspension
	for i := 0; i < 3; i++ {
		s = rec.mustSuspend(t)
		if i < 2 {
			if err := r.Resume(Resume{Input: outputs(s, fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	last := outputs(s, "2")
	chain := append(append([]protocol.Item(nil), s.Context...), last...)
	if err := r.Resume(Resume{Input: last}); err != nil {
		t.Fatal(err)
	}
	hot := rec.mustEnd(t)

	// Cold: a new rollout from the chain, with other ids.
	for i := range chain {
		if chain[i].CallID != "" {
			chain[i].CallID = "call_cold_" + chain[i].CallID[5:10]
		}
		chain[i].ID = ""
	}
	_, rec2 := start(t, Config{Settings: set, History: chain[:len(chain)-1], Input: chain[len(chain)-1:]})
	cold := rec2.mustEnd(t)
	if answerText(hot.Output) != answerText(cold.Output) {
		t.Fatalf("hot and cold answers differ:\n%s\n%s", answerText(hot.Output), answerText(cold.Output))
	}
	if hot.StepUsage.InputTokens != cold.StepUsage.InputTokens || cold.StepUsage.InputTokensDetails.CachedTokens != 0 ||
		hot.StepUsage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("usage hot %+v cold %+v", hot.StepUsage, cold.StepUsage)
	}
}

// TestResumeRendersOnlyNewItems proves a resume's cost does not depend on the history.
func TestResumeRendersOnlyNewItems(t *testing.T) {
	hist := []protocol.Item{userMsg(strings.Repeat("history ", 20000))}
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{execTool}, Metadata: map[string]string{MetaCalls: "5"}},
		History: hist, Input: []protocol.Item{userMsg("go")}})
	s := rec.mustSuspend(t)
	before := encodeStats.bytes.Load()
	in := outputs(s, "small")
	if err := r.Resume(Resume{Input: in}); err != nil {
		t.Fatal(err)
	}
	s = rec.mustSuspend(t)
	encoded := encodeStats.bytes.Load() - before
	// The new output and the new call's arguments, each once (the call's item is appended with
	// the tokens generated, its name's tokens are the session's), at most a header and the
	// space after a call's name the first time they are met — nothing of the 160 KB history.
	want := int64(len(in[0].Output) + len(s.Output[0].Arguments))
	if encoded < want || encoded > want+int64(len("tool ")) {
		t.Fatalf("a resume encoded %d bytes, want %d", encoded, want)
	}
	if s.StepUsage.InputTokens-s.StepUsage.InputTokensDetails.CachedTokens != len(RenderItems(nil, in)) {
		t.Fatalf("step usage %+v", s.StepUsage)
	}
}

// TestGeneratedCallsRenderAsEncoded checks that the calls a step generated, appended to the
// context with the tokens the sim generated (parallel calls, two tools, a name and arguments
// that need escaping), leave the context equal to its render from the items: the answer's
// fingerprint is that of RenderItems.
func TestGeneratedCallsRenderAsEncoded(t *testing.T) {
	odd := fnTool("look_ünï", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q","n"]}`)
	set := Settings{Tools: []protocol.Tool{odd, timeTool}, Instructions: "be brief", ParallelToolCalls: true,
		Metadata: map[string]string{MetaCalls: "3", MetaParallel: "3"}}
	r, rec := start(t, Config{Settings: set, Input: []protocol.Item{userMsg(`find <a&b> "quoted" naïveté`)}})
	var s Suspension
	for i := 0; i < 3; i++ {
		s = rec.mustSuspend(t)
		if len(s.PendingCallIDs) != 3 {
			t.Fatalf("step %d: %d calls", i, len(s.PendingCallIDs))
		}
		if err := r.Resume(Resume{Input: outputs(s, "out\n\u00e9")}); err != nil {
			t.Fatal(err)
		}
	}
	e := rec.mustEnd(t)
	ctx := e.Context[:len(e.Context)-1] // the answer's context: everything before the answer
	want := Fingerprint(RenderItems(&set, ctx))
	if got := answerText(e.Output); !strings.HasSuffix(got, want) {
		t.Fatalf("answer %q does not end with the render's fingerprint %s", got, want)
	}
}

func TestStartedOnceAndQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ticket := &fakeTicket{gate: make(chan struct{})}
		rec := newRecorder()
		r := Start(t.Context(), Config{Model: NewSim(SimOptions{}), Sink: rec, Ticket: ticket, Input: []protocol.Item{userMsg("x")}})
		synctest.Wait()
		if rec.started != 0 {
			t.Fatal("started before holding the ticket")
		}
		r.Cancel("")
		r.Wait()
		e := <-rec.ended
		if e.Reason != protocol.ReasonCancelled || e.Sampling || rec.started != 0 {
			t.Fatalf("ending %+v started %d", e, rec.started)
		}
	})
}

func TestMaxToolCalls(t *testing.T) {
	r, rec := start(t, Config{Settings: Settings{Tools: []protocol.Tool{execTool}, MaxToolCalls: 3, ParallelToolCalls: true,
		Metadata: map[string]string{MetaCalls: "10", MetaParallel: "2"}}, Input: []protocol.Item{userMsg("go")}})
	calls := 0
	for {
		s, e := rec.next(t)
		if e != nil {
			if e.Status != protocol.ResponseCompleted || calls != 3 {
				t.Fatalf("ended %s after %d calls", e.Status, calls)
			}
			return
		}
		calls += len(s.PendingCallIDs)
		if err := r.Resume(Resume{Input: outputs(*s, "o")}); err != nil {
			t.Fatal(err)
		}
	}
}
