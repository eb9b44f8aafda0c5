//go:build race

package protocol

// raceEnabled: under the race detector the multi-megabyte bound examples take minutes; they
// exercise the same code as the small ones, so TestBoundViolations skips them.
const raceEnabled = true
