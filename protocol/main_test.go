package protocol

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "protocol")) }
