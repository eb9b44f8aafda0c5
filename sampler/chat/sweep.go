package chat

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fileSweeper removes slot files that no rollout can restore any more: files of Tether's naming
// in the slot directory whose last change is older than Options.SlotFileTTL. Every file is
// written while its rollout is suspended, and a suspension (parked or not, on any instance)
// ends within the suspend timeout, so such a file is left over: by an instance that exited
// (crashed, or drained and then never resumed) or by a bound that could not drop it.
type fileSweeper struct {
	dir  string
	ttl  time.Duration
	live func() map[string]bool // the files the pools know now; never removed

	mu      sync.Mutex   // one sweep at a time
	last    atomic.Int64 // unix nanoseconds of the last sweep's start
	removed atomic.Int64 // files removed over the Model's life
}

// sweepEvery is how often saves may start a sweep: a quarter of the TTL, at most once a minute.
func (s *fileSweeper) sweepEvery() time.Duration {
	return min(s.ttl/4, time.Minute)
}

// due reports whether the last sweep is older than sweepEvery.
func (s *fileSweeper) due(now time.Time) bool {
	return now.UnixNano()-s.last.Load() >= int64(s.sweepEvery())
}

// sweep removes the stale files of the directory and returns how many it removed. Errors
// reading the directory or removing a file leave those files for the next sweep.
func (s *fileSweeper) sweep(now time.Time) (removed int, err error) {
	if !s.mu.TryLock() {
		return 0, nil // a sweep is running
	}
	defer s.mu.Unlock()
	s.last.Store(now.UnixNano())
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, err
	}
	live := s.live()
	for _, e := range entries {
		if !e.Type().IsRegular() || !isSlotFileName(e.Name()) || live[e.Name()] {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) <= s.ttl {
			continue
		}
		if os.Remove(filepath.Join(s.dir, e.Name())) == nil {
			removed++
		}
	}
	s.removed.Add(int64(removed))
	return removed, nil
}

// isSlotFileName reports whether name has the shape fileName gives: "tether-<id>-<16 hex>.bin".
func isSlotFileName(name string) bool {
	rest, ok := strings.CutPrefix(name, "tether-")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '-')
	return i > 0 && validFileName(name, rest[:i])
}

// liveFiles returns the names of the files every replica's pool holds now.
func (m *Model) liveFiles() map[string]bool {
	names := map[string]bool{}
	for _, e := range m.engines {
		if p := e.slots; p != nil {
			p.mu.Lock()
			for _, l := range p.saved {
				names[l.file] = true
			}
			p.mu.Unlock()
		}
	}
	return names
}

// startSweeper sets up the sweep of stale slot files when the Model has a slot directory and
// a TTL, and runs the first one: files a previous instance left go now.
func (m *Model) startSweeper() {
	if m.opts.SlotDir == "" || m.opts.SlotFileTTL <= 0 {
		return
	}
	m.sweeper = &fileSweeper{dir: m.opts.SlotDir, ttl: m.opts.SlotFileTTL, live: m.liveFiles}
	m.sweepFiles(time.Now())
}

// sweepFiles runs a sweep of stale slot files when one is due (every save asks) and logs what
// it removed. It must not be called with a pool's mu held.
func (m *Model) sweepFiles(now time.Time) {
	s := m.sweeper
	if s == nil || !s.due(now) {
		return
	}
	n, err := s.sweep(now)
	switch {
	case err != nil:
		m.logf("cannot read the slot directory to remove stale slot files", "dir", s.dir, "err", err)
	case n > 0:
		m.log.Info("removed stale slot files", "dir", s.dir, "files", n, "older_than", s.ttl)
	}
}
