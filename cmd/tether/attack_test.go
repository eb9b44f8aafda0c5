package main

import (
	"errors"
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// TestAttackBudget: the budget an attack compares the peak RSS with is the last -max-memory
// of -serve-args, else the server's default; a bad size is a usage error.
func TestAttackBudget(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, server.DefaultMaxMemory()},
		{[]string{"-max-frame", "1MiB"}, server.DefaultMaxMemory()},
		{[]string{"-max-memory", "512MiB"}, 512 << 20},
		{[]string{"-max-memory=1GiB", "--max-memory", "256MiB"}, 256 << 20},
		{[]string{"-max-memory", "0"}, 0},
	} {
		if got, err := attackBudget(c.args); err != nil || got != c.want {
			t.Errorf("%q: %d %v, want %d", c.args, got, err, c.want)
		}
	}
	if _, err := attackBudget([]string{"-max-memory", "lots"}); !errors.Is(err, errUsage) {
		t.Errorf("a bad size: %v, want a usage error", err)
	}
}
