package chat_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
)

// kvRun is the outcome of a hotTurns run: per hot turn, whether the engine reused at least 90%
// of the previous turn's context.
type kvRun struct {
	hot, kept     int
	failed        []string
	coldPrefill   time.Duration // mean wall time of a first turn (the whole context prefilled)
	hotTurn       time.Duration // mean wall time of a hot turn
	first, others int
}

func (r kvRun) fraction() float64 {
	if r.hot == 0 {
		return 0
	}
	return float64(r.kept) / float64(r.hot)
}

func (r kvRun) String() string {
	return fmt.Sprintf("%d/%d hot turns kept >= 90%% of the previous context (%.2f); first turn %v, hot turn %v",
		r.kept, r.hot, r.fraction(), r.coldPrefill.Round(time.Millisecond), r.hotTurn.Round(time.Millisecond))
}

// hotTurns runs rollouts concurrent public-shape WebSocket conversations of turns+1 turns each
// against front: each turn after the first continues the previous Response hot
// (previous_response_id on the same connection, the same settings) with a new user message.
func hotTurns(t *testing.T, front string, rollouts, turns int) kvRun {
	var mu sync.Mutex
	var run kvRun
	var coldSum, hotSum time.Duration
	var wg sync.WaitGroup
	for r := range rollouts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := wstest.Dial(t, "ws"+strings.TrimPrefix(front, "http")+"/v1/responses", nil)
			prev, prevContext := "", 0
			for turn := range turns + 1 {
				create := map[string]any{"type": "response.create", "model": "aidreams", "store": false,
					"instructions": fmt.Sprintf("You are dreamer number %d. Tell a short dream.", r),
					"input":        fmt.Sprintf("Dream %d of rollout %d: tell me about the sea and the stars.", turn, r),
					"temperature":  0, "max_output_tokens": 24}
				if prev != "" {
					create["previous_response_id"] = prev
				}
				start := time.Now()
				c.Send(create)
				fs := c.Until("response.completed", "response.incomplete", "response.failed")
				took := time.Since(start)
				last := fs[len(fs)-1]
				mu.Lock()
				if last.Type() == "response.failed" {
					run.failed = append(run.failed, fmt.Sprintf("rollout %d turn %d: %v", r, turn, last.Get("response", "error")))
					mu.Unlock()
					return
				}
				in := last.Num("response", "usage", "input_tokens")
				cached := last.Num("response", "usage", "input_tokens_details", "cached_tokens")
				out := last.Num("response", "usage", "output_tokens")
				if turn == 0 {
					coldSum += took
					run.first++
				} else {
					hotSum += took
					run.others++
					run.hot++
					if float64(cached) >= 0.9*float64(prevContext) {
						run.kept++
					}
				}
				mu.Unlock()
				prev, prevContext = last.Str("response", "id"), in+out
			}
		}()
	}
	wg.Wait()
	if run.first > 0 {
		run.coldPrefill = coldSum / time.Duration(run.first)
	}
	if run.others > 0 {
		run.hotTurn = hotSum / time.Duration(run.others)
	}
	return run
}
