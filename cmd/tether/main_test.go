package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine running (servers, clients, signal handling).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
