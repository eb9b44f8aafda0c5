package main

import (
	"os"
	"runtime/debug"
)

// minGCLimit is the smallest soft memory limit tuneGC sets: below it a server's own baseline
// (the tokenizer's tables, the runtime) would keep the collector running without end.
const minGCLimit = 128 << 20

// tuneGC sets the Go collector for a server whose memory is bounded by maxMemory bytes
// (-max-memory): a soft memory limit of maxMemory (at least minGCLimit), so the collector
// works harder as the process nears the bound it promises. GOGC stays at the runtime's 100:
// at 300 a chat-body attack, whose bodies leave hundreds of MiB of garbage a second, held
// 106–118% of the bound in RSS before each collection caught up; at 100, 100–101%. With no
// bound (0), or when GOGC or GOMEMLIMIT is set in the environment, the runtime's settings are
// kept. It returns what it set, for the startup line.
func tuneGC(maxMemory int64) string {
	if maxMemory <= 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return "runtime defaults or environment"
	}
	limit := max(maxMemory, minGCLimit)
	limit = (limit + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB, as the startup line prints it
	debug.SetMemoryLimit(limit)
	return "GOMEMLIMIT=" + formatBytes(limit)
}
