package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// discard is a Sink that drops events and reports suspensions on a channel.
type discard struct {
	events    int
	suspended chan Suspension
	ended     chan Ending
}

func (d *discard) Started()                    {}
func (d *discard) Event(*protocol.Event) error { d.events++; return nil }
func (d *discard) Suspended(s Suspension)      { d.suspended <- s }
func (d *discard) Ended(e Ending)              { d.ended <- e }

// history returns one user turn of about n tokens: a question, then call/output pairs.
func history(t testing.TB, n int) []protocol.Item {
	items := []protocol.Item{userMsg("Please inspect the repository.")}
	out := strings.Repeat("result line with some words ", 16) // ~100 tokens
	c := newContext(t, nil)
	appendTo(t, c, items...)
	for i := 0; c.Len() < n; i++ {
		id := fmt.Sprintf("call_h%d", i)
		pair := []protocol.Item{
			{Type: protocol.ItemFunctionCall, CallID: id, Name: "exec_command", Arguments: fmt.Sprintf(`{"cmd":"cat file%d"}`, i)},
			toolOutput(id, out)}
		appendTo(t, c, pair...)
		items = append(items, pair...)
	}
	return items
}

// BenchmarkResume measures one resume with a small tool output up to the next suspension
// (render the new item, sample a call, stream its events) at growing histories: the cost must
// stay flat. The rollout counts its steps in a memory budget, as the server's do.
func BenchmarkResume(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("history=%dk", n/1000), func(b *testing.B) {
			hist := history(b, n)
			sink := &discard{suspended: make(chan Suspension, 1), ended: make(chan Ending, 1)}
			r := Start(context.Background(), Config{Model: NewSim(SimOptions{}), Sink: sink, History: hist,
				Settings: Settings{Tools: []protocol.Tool{execTool}, Metadata: map[string]string{MetaCalls: "1000000"}},
				Input:    []protocol.Item{userMsg("go on")}, Budget: &benchBudget{}})
			defer func() { r.Cancel(""); r.Wait() }()
			var s Suspension
			select {
			case s = <-sink.suspended:
			case e := <-sink.ended:
				b.Fatalf("rollout ended: %s %s", e.Status, e.Reason)
			}
			tokens := s.StepUsage.InputTokens
			in := []protocol.Item{toolOutput("", "ok: 3 files changed")}
			for b.Loop() {
				in[0].CallID = s.PendingCallIDs[0]
				if err := r.Resume(Resume{Input: in}); err != nil {
					b.Fatal(err)
				}
				select {
				case s = <-sink.suspended:
				case e := <-sink.ended:
					b.Fatalf("rollout ended: %s %s", e.Status, e.Reason)
				}
			}
			b.ReportMetric(float64(tokens), "history-tokens")
		})
	}
}

// benchBudget is a Budget without a bound that counts what is reserved, as the server's does.
type benchBudget struct{ used atomic.Int64 }

func (b *benchBudget) TryReserve(n int64) bool { b.used.Add(n); return true }
func (b *benchBudget) Grow(n int64)            { b.used.Add(n) }
func (b *benchBudget) Release(n int64)         { b.used.Add(-n) }

// BenchmarkEventsPerSecond streams one long answer (about 100k tokens) at instant speed and
// reports the rollout's event rate: without a memory budget, and with one (the server always
// has one) that counts the answer as it accrues.
func BenchmarkEventsPerSecond(b *testing.B) {
	for _, counted := range []bool{false, true} {
		b.Run(map[bool]string{false: "budget=none", true: "budget=counted"}[counted], func(b *testing.B) {
			sink := &discard{suspended: make(chan Suspension, 1), ended: make(chan Ending, 1)}
			set := Settings{Metadata: map[string]string{MetaAnswerTokens: "100000"}}
			var budget Budget
			if counted {
				budget = &benchBudget{}
			}
			events := 0
			for b.Loop() {
				sink.events = 0
				r := Start(context.Background(), Config{Model: NewSim(SimOptions{}), Sink: sink, Settings: set,
					Input: []protocol.Item{userMsg("write a long answer")}, Budget: budget})
				e := <-sink.ended
				r.Wait()
				if e.Status != protocol.ResponseCompleted {
					b.Fatalf("ended %s", e.Status)
				}
				events += sink.events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}

// commandOutput returns about n bytes that look like a command's output (paths, line numbers,
// words), the kind of tool output an agent's hot turn tokenizes; seed picks the lines.
func commandOutput(n int, seed uint64) string {
	words := strings.Fields(`the of and to in is for on with that as by this from at be are was it not or
		handler request response queue buffer token context rollout session server client socket frame
		error retry timeout status config value result index cache store state item event stream
		func return if else range defer go chan select struct map string int bool nil err ctx len
		ok failed passed skipped warning info debug trace build test vet lint check run exec read write`)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "internal/pkg%d/file_%d.go:%d:", rng.IntN(8), rng.IntN(1000), 1+rng.IntN(900))
		for w := 6 + rng.IntN(8); w > 0; w-- {
			b.WriteByte(' ')
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte('\n')
	}
	return b.String()[:n]
}

// BenchmarkRenderToolOutput renders one 2 KiB tool output, the new input of a hot turn, a
// different one each time: cold with the segment cache emptied before each, warm with the
// cache holding what the earlier outputs left (the words recur, the numbers mostly). The
// window-* runs append it, warm, to a context of a million tokens: without a context window
// (none), or 1,500 tokens short of its window (watched: the output's byte bound passes the
// window, so every chunk is counted against it).
func BenchmarkRenderToolOutput(b *testing.B) {
	outs := make([][]protocol.Item, 1024)
	for i := range outs {
		outs[i] = []protocol.Item{toolOutput("call_1", commandOutput(2048, uint64(i)))}
	}
	for _, watched := range []bool{false, true} {
		b.Run(map[bool]string{false: "window-none", true: "window-watched"}[watched], func(b *testing.B) {
			const size = 1 << 20
			window := 0
			if watched {
				window = size
			}
			c := windowed(b, nil, window)
			c.tokens = make([]uint32, size-1500, size)
			base := len(c.tokens)
			if watched && c.limit(maxTokens(outs[0])) == 0 {
				b.Fatal("the output's bound fits: the render is not watched")
			}
			b.SetBytes(2048)
			i := 0
			for b.Loop() {
				if err := c.Append(context.Background(), outs[i%len(outs)]...); err != nil {
					b.Fatal(err)
				}
				c.tokens, c.items = c.tokens[:base], c.items[:0]
				i++
			}
		})
	}
	for _, cold := range []bool{true, false} {
		b.Run(map[bool]string{true: "cold", false: "warm"}[cold], func(b *testing.B) {
			b.SetBytes(2048)
			i := 0
			for b.Loop() {
				if cold {
					b.StopTimer()
					clearSegments()
					b.StartTimer()
				}
				RenderItems(nil, outs[i%len(outs)])
				i++
			}
		})
	}
}
