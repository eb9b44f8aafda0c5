package soak

import (
	"strings"
	"testing"
)

// TestSuspendedHeapShrank: against a server, the heap is read without a GC, and a collection
// between the two readings can make it shrink while the rollouts are held; the report then
// says there is no per-rollout figure instead of printing a negative one. In-process the
// figure is printed as measured.
func TestSuspendedHeapShrank(t *testing.T) {
	s := &SuspendedReport{Rollouts: 999, Connections: 20, ContextTokens: 20,
		HeapBefore: 28 << 20, HeapHeld: 25 << 20, HeapPerRollout: -2681,
		RSSBefore: 68 << 20, RSSHeld: 78 << 20, RSSPerRollout: 10758, StackPerRollout: 16433}
	var b strings.Builder
	(&Report{Target: "ws://127.0.0.1:8787/v1/responses", Suspended: s}).WriteText(&b)
	out := b.String()
	if strings.Contains(out, "-2681") || !strings.Contains(out, "heap (no GC: includes garbage) 28.0 MiB → 25.0 MiB, no per-rollout figure (the server collected garbage meanwhile)") {
		t.Errorf("against a server, a heap that shrank:\n%s", out)
	}
	if !strings.Contains(out, "RSS 68.0 MiB → 78.0 MiB, 10758 B per rollout") ||
		!strings.Contains(out, "at the server's model speed") {
		t.Errorf("against a server:\n%s", out)
	}
	s.HeapHeld, s.HeapPerRollout = 40<<20, 12582
	b.Reset()
	(&Report{Target: "in-process", Suspended: s}).WriteText(&b)
	out = b.String()
	if !strings.Contains(out, "heap after GC 28.0 MiB → 40.0 MiB, 12582 B per rollout") ||
		strings.Contains(out, "model speed") {
		t.Errorf("in-process:\n%s", out)
	}
}
