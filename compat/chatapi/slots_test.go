package chatapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

type slotInfo struct {
	ID         int  `json:"id"`
	Processing bool `json:"is_processing"`
	Items      int  `json:"n_items"`
}

// waitSlots polls GET /slots until cond holds (a state to reach, not a speed to meet).
func waitSlots(t *testing.T, url, what string, cond func([]slotInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s []slotInfo
		getJSON(t, url+"/slots", &s)
		if cond(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never: %s (slots %+v)", what, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hello(t *testing.T, client openai.Client, text string, opts ...option.RequestOption) {
	t.Helper()
	if _, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}, opts...); err != nil {
		t.Fatal(err)
	}
}

// TestSlotFreedWhenIdle: a slot's session is freed after the suspend timeout.
func TestSlotFreedWhenIdle(t *testing.T) {
	client, url := start(t, server.Options{Slots: 1, Limits: session.Limits{SuspendTimeout: 50 * time.Millisecond}})
	hello(t, client, "hi")
	waitSlots(t, url, "the idle slot freed", func(s []slotInfo) bool { return s[0].Items == 0 })
}

// TestSlotKeepsNoMoreThanMaxRolloutBytes: a context larger than -max-rollout-bytes is answered
// but not kept.
func TestSlotKeepsNoMoreThanMaxRolloutBytes(t *testing.T) {
	client, url := start(t, server.Options{Slots: 1, Limits: session.Limits{MaxRolloutBytes: 2048}})
	hello(t, client, "short")
	waitSlots(t, url, "the short context kept", func(s []slotInfo) bool { return s[0].Items == 2 })
	hello(t, client, strings.Repeat("long ", 1000))
	waitSlots(t, url, "the long context dropped", func(s []slotInfo) bool { return s[0].Items == 0 })
}

// TestBusySlotMakesRequestWait: a request for a busy slot waits until the slot is released
// (here: the long request is cancelled), then runs.
func TestBusySlotMakesRequestWait(t *testing.T) {
	client, url := start(t, server.Options{Slots: 1, Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true})})
	slowCtx, cancelSlow := context.WithCancel(ctx(t))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = client.Chat.Completions.New(slowCtx, openai.ChatCompletionNewParams{Model: "sim",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("slow")}},
			option.WithJSONSet("metadata", map[string]string{"sim.speed": "65", "sim.answer_tokens": "5000"}))
	}()
	waitSlots(t, url, "the slow request sampling", func(s []slotInfo) bool { return s[0].Processing })
	fast := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fast")}}, option.WithJSONSet("id_slot", 0))
		fast <- err
	}()
	select {
	case err := <-fast:
		t.Fatalf("the request for the busy slot did not wait (err %v)", err)
	case <-time.After(200 * time.Millisecond): // only a wrong pass is possible, never a wrong failure
	}
	cancelSlow()
	if err := <-fast; err != nil {
		t.Fatalf("the waiting request: %v", err)
	}
	wg.Wait()
}

// TestUnknownRoute: only POST serves chat completions.
func TestUnknownRoute(t *testing.T) {
	_, url := start(t, server.Options{})
	resp, err := http.Get(url + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/chat/completions: %d", resp.StatusCode)
	}
}
