package sim

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// windowed opens a context of a model whose window is window tokens.
func windowed(t testing.TB, set *Settings, window int) *Context {
	t.Helper()
	c, err := openContext(context.Background(), set, window)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// isWindowError reports whether err is the sim's context-window refusal for window.
func isWindowError(err error, window int) bool {
	e, ok := protocol.AsError(err)
	return ok && e.Code == CodeContextLengthExceeded && e.Param == "input" && e.Status == http.StatusBadRequest &&
		e.Type == protocol.TypeInvalidRequest && strings.Contains(e.Message, "context window of "+strconv.Itoa(window)+" tokens")
}

// TestWindowExact: a context takes items up to exactly its window, counted on the sim's own
// tokens (markers included); one token more is refused and leaves the context as it was. It
// holds on the watched path (the items' byte bound passes the window) and for instructions.
func TestWindowExact(t *testing.T) {
	set := &Settings{Instructions: "Be brief."}
	items := []protocol.Item{userMsg("What is the weather in Paris today?"), toolOutput("c", "sunny, 21 degrees")}
	n := len(RenderItems(set, items))
	if maxTokens(items)+len(RenderItems(set, nil)) <= n {
		t.Fatal("the byte bound is not above the render: the watched path is not tested")
	}

	c := windowed(t, set, n)
	if err := c.Append(context.Background(), items...); err != nil || c.Len() != n {
		t.Fatalf("a window of exactly the render: %v, %d tokens", err, c.Len())
	}

	c = windowed(t, set, n-1)
	appendTo(t, c, items[0])
	len0 := c.Len()
	if err := c.Append(context.Background(), items[1]); !isWindowError(err, n-1) {
		t.Fatalf("one token over the window: %v", err)
	}
	if c.Len() != len0 || len(c.Items()) != 1 || c.Rendered() != 1 {
		t.Fatalf("the refused Append changed the context: %d tokens, %d items", c.Len(), len(c.Items()))
	}

	inst := len(RenderItems(set, nil))
	if _, err := openContext(context.Background(), set, inst); err != nil {
		t.Fatalf("instructions of exactly the window: %v", err)
	}
	if _, err := openContext(context.Background(), set, inst-1); !isWindowError(err, inst-1) {
		t.Fatalf("instructions over the window: %v", err)
	}
}

// TestWindowStopsEarly: an input far over the window is refused after tokenizing about the
// window's worth of it (at most one chunk more), not all of it; the same for instructions.
func TestWindowStopsEarly(t *testing.T) {
	const window = 1000
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", (4<<20)/44) // 4 MiB
	// The bytes of long's first window tokens: what reaching the window takes at least.
	upTo, count := 0, 0
	encodePieces(long, func(_ uint32, size int) bool {
		upTo += size
		count++
		return count < window
	})

	c := windowed(t, nil, window)
	before := encodeStats.bytes.Load()
	err := c.Append(context.Background(), userMsg("first"), userMsg(long))
	encoded := encodeStats.bytes.Load() - before
	if !isWindowError(err, window) {
		t.Fatalf("Append: %v", err)
	}
	if encoded > int64(len("first")+upTo+maxChunk) {
		t.Fatalf("%d bytes tokenized to refuse %d bytes over a %d-token window (%d reach it)", encoded, len(long), window, upTo)
	}
	if c.Len() != 0 || len(c.Items()) != 0 {
		t.Fatalf("the refused Append changed the context: %d tokens", c.Len())
	}

	before = encodeStats.bytes.Load()
	_, err = openContext(context.Background(), &Settings{Instructions: long}, window)
	if encoded := encodeStats.bytes.Load() - before; !isWindowError(err, window) || encoded > int64(upTo+maxChunk) {
		t.Fatalf("instructions over the window: %v after %d bytes tokenized", err, encoded)
	}
}

// TestWindowUnwatchedRenderUnchanged: with a window the render is the same tokens as without
// one, on both paths (an input whose byte bound fits, and one watched near the window).
func TestWindowUnwatchedRenderUnchanged(t *testing.T) {
	items := sampleItems()
	want := RenderItems(nil, items)
	for _, window := range []int{len(want), 1 << 20} {
		c := windowed(t, nil, window)
		for i := range items {
			if err := c.Append(context.Background(), items[i]); err != nil {
				t.Fatalf("window %d: %v", window, err)
			}
		}
		if !slices.Equal(c.Tokens(), want) {
			t.Fatalf("window %d: the render differs from the render without a window", window)
		}
	}
}

// windowRollout starts a rollout on a sim with a context window.
func windowRollout(t *testing.T, window int, cfg Config) (*Rollout, *recorder) {
	t.Helper()
	cfg.Model = NewSim(SimOptions{ContextWindow: window})
	return start(t, cfg)
}

// mustFailWindow waits for the rollout's end: failed with the window's code.
func mustFailWindow(t *testing.T, rec *recorder, window int) Ending {
	t.Helper()
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseFailed || e.Error == nil || e.Error.Code != CodeContextLengthExceeded || !isWindowError(e.Err, window) {
		t.Fatalf("ending %s %+v (%v), want failed %s", e.Status, e.Error, e.Err, CodeContextLengthExceeded)
	}
	return e
}

// TestWindowRollouts: the window holds for a create, a continuation whose tool output crosses
// it (the rollout ends failed), a warm-up, instructions, and a cold rebuild of a context
// over it; a rollout within it is unaffected.
func TestWindowRollouts(t *testing.T) {
	set := Settings{Tools: []protocol.Tool{execTool}, Metadata: map[string]string{MetaCalls: "3"}}
	big := strings.Repeat("lorem ipsum dolor sit amet ", 4000) // about 24,000 tokens
	const window = 10000

	t.Run("create", func(t *testing.T) {
		_, rec := windowRollout(t, window, Config{Settings: set, Input: []protocol.Item{userMsg(big)}})
		if e := mustFailWindow(t, rec, window); len(e.Output) != 0 || e.Usage != (protocol.Usage{}) {
			t.Fatalf("a refused create has output %v, usage %+v", e.Output, e.Usage)
		}
	})
	t.Run("within", func(t *testing.T) {
		r, rec := windowRollout(t, window, Config{Settings: set, Input: []protocol.Item{userMsg("go")}})
		for range 3 {
			s := rec.mustSuspend(t)
			if err := r.Resume(Resume{Input: outputs(s, "ok")}); err != nil {
				t.Fatal(err)
			}
		}
		if e := rec.mustEnd(t); e.Status != protocol.ResponseCompleted {
			t.Fatalf("a rollout within the window: %s %s %+v", e.Status, e.Reason, e.Error)
		}
	})
	t.Run("continuation", func(t *testing.T) {
		r, rec := windowRollout(t, window, Config{Settings: set, Input: []protocol.Item{userMsg("go")}})
		s := rec.mustSuspend(t)
		if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(s.PendingCallIDs[0], big)}}); err != nil {
			t.Fatal(err)
		}
		e := mustFailWindow(t, rec, window)
		if r.State() != Ended || len(e.Context) != 3 || e.Context[2].Output != big {
			t.Fatalf("state %s, context of %d items", r.State(), len(e.Context))
		}
	})
	t.Run("warm-up", func(t *testing.T) {
		_, rec := windowRollout(t, window, Config{Settings: set, History: []protocol.Item{userMsg(big)}, StartSuspended: true})
		mustFailWindow(t, rec, window)
	})
	t.Run("instructions", func(t *testing.T) {
		set := set
		set.Instructions = big
		_, rec := windowRollout(t, window, Config{Settings: set, Input: []protocol.Item{userMsg("go")}})
		mustFailWindow(t, rec, window)
	})
	t.Run("cold", func(t *testing.T) {
		hist := []protocol.Item{userMsg("go"), {Type: protocol.ItemFunctionCall, CallID: "c1", Name: "exec_command", Arguments: `{"cmd":"ls"}`},
			toolOutput("c1", big)}
		_, rec := windowRollout(t, window, Config{Settings: set, History: hist, Input: []protocol.Item{userMsg("and now?")}})
		mustFailWindow(t, rec, window)
	})
}

// TestWindowFilledByOutput: a step whose output fills the window ends incomplete with
// context_length_exceeded, having generated exactly the room the window left.
func TestWindowFilledByOutput(t *testing.T) {
	in := []protocol.Item{userMsg("hello there")}
	const room = 5
	window := len(RenderItems(&Settings{Model: "sim", ParallelToolCalls: true}, in)) + room
	_, rec := windowRollout(t, window, Config{Input: in})
	e := rec.mustEnd(t)
	if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonContextLength || e.Usage.OutputTokens != room {
		t.Fatalf("ending %s %s, %d output tokens; want incomplete %s after %d", e.Status, e.Reason, e.Usage.OutputTokens,
			protocol.ReasonContextLength, room)
	}
	// max_output_tokens below the room still ends the step first, as before.
	_, rec = windowRollout(t, window, Config{Settings: Settings{MaxOutputTokens: 2}, Input: in})
	if e := rec.mustEnd(t); e.Reason != protocol.ReasonMaxOutputTokens || e.Usage.OutputTokens != 2 {
		t.Fatalf("ending %s %s, %d output tokens", e.Status, e.Reason, e.Usage.OutputTokens)
	}
}

// TestWindowAfterUnpark: an unparked session holds the window of the Sim that unparks it.
func TestWindowAfterUnpark(t *testing.T) {
	set := &Settings{Model: "sim"}
	ms, err := NewSim(SimOptions{}).Open(t.Context(), RolloutInfo{Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	fed := []protocol.Item{userMsg(strings.Repeat("word ", 200))}
	if err := ms.Prefill(t.Context(), fed); err != nil {
		t.Fatal(err)
	}
	state, err := ms.(ParkableSession).Park()
	ms.Close()
	if err != nil {
		t.Fatal(err)
	}
	window := ms.(*session).context.Len() + 10
	un, err := NewSim(SimOptions{ContextWindow: window}).Unpark(t.Context(), RolloutInfo{Settings: set}, state, fed)
	if err != nil {
		t.Fatal(err)
	}
	defer un.Close()
	var out capture
	_, err = un.Sample(t.Context(), &Step{Input: []protocol.Item{userMsg("a question that does not fit in ten tokens, markers included")}}, &out)
	if !isWindowError(err, window) {
		t.Fatalf("Sample past the window after Unpark: %v", err)
	}
}
