package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
)

// TestMain checks that no test leaves a goroutine running (servers, clients, signal handling).
func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "cmd/tether")) }
