//go:build race

package soak

// raceEnabled: under the race detector RSS never comes back (its shadow memory is not
// returned to the OS), so the in-process resource check uses the heap instead.
const raceEnabled = true
