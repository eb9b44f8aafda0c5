package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Close must release every goroutine of a store (go-redis's pool included).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
