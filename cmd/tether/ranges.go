package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"
)

// flagRange is the allowed range of one numeric flag. ok reports whether v is allowed: the
// flag's value as a float64 — an integer, a size in bytes, or a duration in nanoseconds;
// want says in words what is allowed.
type flagRange struct {
	ok   func(v float64) bool
	want string
}

func atLeast(min float64, note string) flagRange {
	return flagRange{func(v float64) bool { return v >= min }, "at least " + num(min) + note}
}

func between(min, max float64, note string) flagRange {
	return flagRange{func(v float64) bool { return v >= min && v <= max }, "from " + num(min) + " to " + num(max) + note}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// anyValue is the range of a flag whose every value means something (the note says what).
func anyValue(note string) flagRange {
	return flagRange{func(float64) bool { return true }, "any value" + note}
}

func positive(note string) flagRange {
	return flagRange{func(v float64) bool { return v > 0 }, "greater than 0" + note}
}

func nonNegative(note string) flagRange { return atLeast(0, note) }

// positiveOrNegative allows every value but 0 (a flag whose negative values mean "none").
func positiveOrNegative(note string) flagRange {
	return flagRange{func(v float64) bool { return v != 0 }, "greater than 0, or negative" + note}
}

// sizeAtLeast is the range of a byte-size flag of at least min bytes.
func sizeAtLeast(min int64, note string) flagRange {
	return flagRange{func(v float64) bool { return v >= float64(min) }, "at least " + formatBytes(min) + note}
}

// flagRanges holds, per subcommand, the range of each of its numeric flags (integers, floats,
// durations, byte sizes). parseFlags checks every value against it, so that an out-of-range
// value is an error instead of a silent default; a numeric flag without a row is a
// programming error that every parse reports.
var flagRanges = map[string]map[string]flagRange{
	"bench": {
		"rollouts":          between(1, 1e6, ""),
		"calls":             between(1, 1e6, ""),
		"tool-output":       sizeAtLeast(1, ""),
		"max-output-tokens": between(1, 1e6, ""),
		"upstream-slots":    between(0, 4096, " (0: the engine chooses)"),
		"warmup-calls":      anyValue(" (0 or negative: no warm-up)"),
		"stream-tokens":     anyValue(" (negative: skip)"),
		"concurrent":        anyValue(" (negative: skip)"),
		"concurrent-tokens": between(1, 1e9, ""),
		"concurrent-calls":  anyValue(" (negative: skip)"),
		"cpus":              between(0, 4096, " (0: all CPUs)"),
		"timeout":           positive(" (e.g. 10m)"),
	},
	"soak": {
		"pid":              nonNegative(" (0: read RSS from /metrics)"),
		"connections":      between(2, 1e6, " (one per shape at least)"),
		"turns":            between(1, 10000, ""),
		"lanes":            between(0, 32, " (0: the default lane)"),
		"duration":         positive(" (e.g. 20s)"),
		"seed":             anyValue(""),
		"suspended":        nonNegative(" (0: skip)"),
		"density":          between(0, 1e7, " (0: the soak)"),
		"density-input":    sizeAtLeast(0, " (0: a short sentence)"),
		"density-per-conn": between(1, 10000, ""),
		"warmup":           anyValue(" (0: -duration, at most 2m; negative: none)"),
		"settle":           positive(" (e.g. 30s)"),
		"stall":            nonNegative(" (0: the in-process write timeout + 2s)"),
	},
	"conform": {
		"max-frame": sizeAtLeast(0, " (0 asks the server)"),
		"timeout":   nonNegative(" (0: 10s with -model-contract sim, 2m with any)"),
	},
	"demo": {
		"max-output-tokens": between(0, 1e6, " (0: the server's default)"),
		"calls":             between(0, 1000, ""),
		"timeout":           positive(" (e.g. 1m)"),
	},
	"attack": {
		"scale":      positive(""),
		"size-scale": positive(""),
		"hold":       nonNegative(""),
	},
	"serve": {
		"model-context":              between(0, 1<<30, " (0: no window)"),
		"max-frame":                  sizeAtLeast(1<<10, ""),
		"max-connection-age":         nonNegative(" (0: none)"),
		"suspend-timeout":            positive(" (e.g. 10m)"),
		"park-after":                 nonNegative(" (0: never park)"),
		"shutdown-grace":             nonNegative(" (0: none)"),
		"queue-depth":                between(1, 1e6, ""),
		"max-inflight":               nonNegative(" (0: no cap)"),
		"max-lanes":                  nonNegative(" (0: no cap)"),
		"cache-responses":            between(1, 1e9, ""),
		"cache-bytes":                sizeAtLeast(1, ""),
		"store-responses":            between(1, 1e9, ""),
		"store-bytes":                sizeAtLeast(1, ""),
		"store-ttl":                  positive(" (e.g. 24h)"),
		"store-timeout":              positive(" (e.g. 5s)"),
		"max-connections":            nonNegative(" (0: no cap)"),
		"ping-interval":              nonNegative(" (0: no pings)"),
		"write-timeout":              positive(" (e.g. 30s)"),
		"max-suspended":              nonNegative(" (0: no cap)"),
		"max-suspended-total":        nonNegative(" (0: no cap)"),
		"max-rollout-bytes":          sizeAtLeast(0, " (0: no cap)"),
		"max-sampling":               nonNegative(" (0: no bound)"),
		"keepalive":                  positiveOrNegative(" (negative: none)"),
		"upstream-timeout":           positive(" (e.g. 5m)"),
		"upstream-step-timeout":      positive(""),
		"upstream-max-output-tokens": nonNegative(" (0: no bound but the 32 MiB of text a step)"),
		"upstream-slots":             between(0, 4096, " (0: the engine chooses)"),
		"upstream-slot-bytes":        sizeAtLeast(1<<20, ""),
		"slots":                      between(1, 4096, ""),
		"read-timeout":               nonNegative(" (0: none)"),
		"idle-timeout":               nonNegative(" (0: none)"),
		"max-http-connections":       nonNegative(" (0: no bound)"),
		"max-memory":                 sizeAtLeast(0, " (0: no bound)"),
		"key-rollouts":               nonNegative(" (0: no quota)"),
		"key-connections":            nonNegative(" (0: no quota)"),
		"key-share":                  between(0, 1, " (0 or 1: no share)"),
		"key-store-responses":        nonNegative(" (0: no quota)"),
		"key-store-bytes":            sizeAtLeast(0, " (0: no quota)"),
		"max-decoding":               nonNegative(" (0: no bound)"),
		"ui-race-timeout":            positive(" (e.g. 2m)"),
	},
}

// Get returns the size in bytes (flag.Getter).
func (b *byteSize) Get() any { return int64(*b) }

// numericValue returns a flag's value as a float64 (durations in nanoseconds, sizes in bytes)
// and whether the flag is numeric.
func numericValue(f *flag.Flag) (float64, bool) {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return 0, false
	}
	switch v := g.Get().(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	case time.Duration:
		return float64(v), true
	}
	return 0, false
}

// checkRanges checks every numeric flag of fs, set or default, against flagRanges: the first
// one (in name order) out of range is a usage error naming the flag, its value and the allowed
// range. A numeric flag without a row is reported first, whatever the values.
func checkRanges(fs *flag.FlagSet) error {
	ranges := flagRanges[fs.Name()]
	var missing, bad error
	fs.VisitAll(func(f *flag.Flag) {
		v, numeric := numericValue(f)
		if !numeric {
			return
		}
		r, ok := ranges[f.Name]
		switch {
		case !ok:
			if missing == nil {
				missing = fmt.Errorf("%s: flag -%s has no range in flagRanges (a bug)", fs.Name(), f.Name)
			}
		case bad == nil && (math.IsNaN(v) || !r.ok(v)):
			bad = fmt.Errorf("%w: %s: -%s %s is out of range: want %s", errUsage, fs.Name(), f.Name, f.Value, r.want)
		}
	})
	if missing != nil {
		return missing
	}
	return bad
}
