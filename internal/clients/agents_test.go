package clients_test

import (
	"log/slog"
	"strings"
	"testing"
)

// continuations reads the server's public-shape create counters.
func continuations(f *fixture) (hot, cold, fresh int64) {
	c := f.srv.Counters()
	return c.Hot.Load(), c.Cold.Load(), c.New.Load()
}

// TestAgentsWebSocket: @openai/agents with useResponsesWebSocket runs both agent runs over one
// WebSocket. The first run sends the whole history on each turn (new chains); the second,
// with previousResponseId, continues on the hot path on both of its turns.
func TestAgentsWebSocket(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNodeWith(t, f, "agents.mjs", []string{"TETHER_AGENTS_TRANSPORT=ws"},
		"@openai/agents/package.json", "zod/package.json", "ws/package.json", "openai/package.json")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if f.upgrades.Load() != 1 || f.posts.Load() != 0 {
		t.Errorf("server saw %d upgrades and %d POSTs, want 1 and 0", f.upgrades.Load(), f.posts.Load())
	}
	if hot, cold, fresh := continuations(f); hot != 2 || cold != 0 || fresh != 2 {
		t.Errorf("continuations hot %d, cold %d, new %d; want 2, 0, 2", hot, cold, fresh)
	}
}

// TestAgentsWebSocketNodeFlag: the same over WebSocket with Node's own WebSocket global
// (node --experimental-websocket, given through NODE_OPTIONS) instead of the ws package.
func TestAgentsWebSocketNodeFlag(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNodeWith(t, f, "agents.mjs", []string{"TETHER_AGENTS_TRANSPORT=ws-native", "NODE_OPTIONS=--experimental-websocket"},
		"@openai/agents/package.json", "zod/package.json", "openai/package.json")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if hot, _, _ := continuations(f); f.upgrades.Load() != 1 || f.posts.Load() != 0 || hot != 2 {
		t.Errorf("server saw %d upgrades, %d POSTs, %d hot continuations; want 1, 0, 2", f.upgrades.Load(), f.posts.Load(), hot)
	}
}

// TestAgentsHTTP: the same runs over HTTP POST; previousResponseId continues from the store
// (the cold path).
func TestAgentsHTTP(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNodeWith(t, f, "agents.mjs", nil,
		"@openai/agents/package.json", "zod/package.json", "openai/package.json")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if f.upgrades.Load() != 0 || f.posts.Load() != 4 {
		t.Errorf("server saw %d upgrades and %d POSTs, want 0 and 4", f.upgrades.Load(), f.posts.Load())
	}
	if hot, cold, fresh := continuations(f); hot != 0 || cold != 2 || fresh != 2 {
		t.Errorf("continuations hot %d, cold %d, new %d; want 0, 2, 2", hot, cold, fresh)
	}
}

// TestAISDKHTTP: the Vercel AI SDK has no Responses WebSocket transport; over HTTP a tool loop
// sends the whole history on each step, and previousResponseId continues from the store.
func TestAISDKHTTP(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNodeWith(t, f, "ai_sdk.mjs", nil, "ai/package.json", "@ai-sdk/openai/package.json", "zod/package.json", "openai/package.json")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if f.upgrades.Load() != 0 || f.posts.Load() != 4 {
		t.Errorf("server saw %d upgrades and %d POSTs, want 0 and 4", f.upgrades.Load(), f.posts.Load())
	}
	if hot, cold, fresh := continuations(f); hot != 0 || cold != 2 || fresh != 2 {
		t.Errorf("continuations hot %d, cold %d, new %d; want 0, 2, 2", hot, cold, fresh)
	}
}
