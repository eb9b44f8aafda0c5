package protocol

import (
	"os"
	"testing"

	"github.com/tetherd/tether/internal/skipnote"
)

func TestMain(m *testing.M) { os.Exit(skipnote.M(m, "protocol").Run()) }
