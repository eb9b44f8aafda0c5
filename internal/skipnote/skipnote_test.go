package skipnote

import "testing"

// TestLine: reasons given to Skip make one line for the package, each reason once, in order;
// the tests that called Skip are reported skipped.
func TestLine(t *testing.T) {
	if l := Line("pkg"); l != "" {
		t.Fatalf("line before any skip: %q", l)
	}
	var skipped []bool
	for _, reason := range []string{"nginx not found (set TETHER_NGINX)", "redis-server not found", "nginx not found (set TETHER_NGINX)"} {
		var ran bool
		t.Run("needs", func(t *testing.T) {
			defer func() { skipped = append(skipped, t.Skipped()) }()
			Skip(t, reason)
			ran = true
		})
		if ran {
			t.Fatal("Skip returned")
		}
	}
	if len(skipped) != 3 {
		t.Fatalf("%d subtests", len(skipped))
	}
	for i, s := range skipped {
		if !s {
			t.Errorf("subtest %d not reported skipped", i)
		}
	}
	want := "pkg: integration tests SKIPPED: nginx not found (set TETHER_NGINX); redis-server not found"
	if l := Line("pkg"); l != want {
		t.Fatalf("line %q, want %q", l, want)
	}
	mu.Lock()
	reasons = nil // the package's own line would otherwise report this test's skips
	mu.Unlock()
}
