package main

import (
	"os"
	"runtime/debug"
	"strconv"
)

// serveGCPercent is the collector's GOGC for tether serve when -max-memory bounds it: the heap
// may grow to four times its live bytes between collections. A server's live heap is small
// next to what a hot turn allocates (the tokenizer's garbage), so at the default of 100 it
// collects every few dozen turns; the soft memory limit set with it keeps the process near
// -max-memory however large the live heap grows.
const serveGCPercent = 300

// minGCLimit is the smallest soft memory limit tuneGC sets: below it a server's own baseline
// (the tokenizer's tables, the runtime) would keep the collector running without end.
const minGCLimit = 128 << 20

// tuneGC sets the Go collector for a server whose memory is bounded by maxMemory bytes
// (-max-memory): GOGC serveGCPercent and a soft memory limit of maxMemory plus a tenth (at
// least minGCLimit), so the collector works harder as the process nears the bound it
// promises. With no bound (0), or when GOGC or GOMEMLIMIT is set in the environment, the
// runtime's settings are kept. It returns what it set, for the startup line.
func tuneGC(maxMemory int64) string {
	if maxMemory <= 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return "runtime defaults or environment"
	}
	limit := max(maxMemory+maxMemory/10, minGCLimit)
	limit = (limit + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB, as the startup line prints it
	debug.SetGCPercent(serveGCPercent)
	debug.SetMemoryLimit(limit)
	return "GOGC=" + strconv.Itoa(serveGCPercent) + " GOMEMLIMIT=" + formatBytes(limit)
}
