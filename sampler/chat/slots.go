package chat

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// slotPool owns one engine replica's slots (Options.Slots of them). Every upstream request of a
// rollout names the slot its lease holds; a slot whose rollout is suspended keeps that
// rollout's KV and is handed to another rollout only when no slot is free, and then it is the
// least recently used suspended rollout's slot. With a slot directory its KV is first saved to
// a file (llama.cpp POST /slots/N?action=save) and restored into whatever slot the rollout
// gets next (action=restore); without one, or when the engine cannot save, the rollout loses
// its KV and its next step is prefilled again (its cached_tokens say so).
type slotPool struct {
	eng      *engine
	dir      string // the engine's --slot-save-path as Tether sees it; "" disables saving
	maxBytes int64  // bound on the bytes of saved files; 0 means no bound

	mu      sync.Mutex    // guards the fields below and every lease's fields
	owner   []*lease      // owner[i] holds slot i; nil when free
	freed   []int64       // freed[i] is the clock when slot i was last freed
	changed chan struct{} // closed (and replaced) when a slot is freed or its owner stops sampling
	clock   int64         // use counter for least-recently-used
	saved   []*lease      // leases with a saved file, oldest first
	bytes   int64         // bytes of the saved files
	// noSave: the engine refused a save (it was started without --slot-save-path), or saved a
	// file that is not in dir (errSlotDirElsewhere): no more saves are sent to it.
	noSave bool
	// orphans are files whose save failed without an answer (a stalled engine, e.g. kill -STOP):
	// the engine may still write them when it runs again. Oldest first, at most maxOrphans.
	orphans []orphan

	saves, restores, drops  atomic.Int64 // KV saved, restored, and lost for want of a save
	parks                   atomic.Int64 // KV files handed on to parked rollouts
	saveNanos, restoreNanos atomic.Int64
}

// lease is one rollout's claim on a slotPool: the slot it holds, or the file its KV was saved
// to. Its fields are guarded by the pool's mu.
type lease struct {
	id     string        // the rollout's Response id, used in its file's name
	slot   int           // the slot held, -1 for none
	busy   bool          // sampling on its slot now
	used   int64         // pool clock at its last step's end
	file   string        // the file its KV was saved to, "" for none
	size   int64         // the file's bytes
	moving chan struct{} // non-nil while its KV is being saved out of a slot; closed when done
	closed bool
	parked bool // its rollout parked: the lease only keeps the file for Unpark (or the bound)
}

// orphan is the name of a file a save that got no answer may still write, and since when.
type orphan struct {
	name     string
	since    time.Time // when the save gave up
	answered bool      // the engine answered a request sent after since, and the file was not there
}

// maxOrphans bounds the names a pool remembers; older ones are left to the sweep
// (Options.SlotFileTTL).
const maxOrphans = 64

// orphanLocked removes the file of a save that failed and, unless the engine answered that it
// cannot save, remembers its name: an engine that was stalled writes the file when it runs
// again, after the save gave up (seen with llama-server under kill -STOP: the file appears at
// kill -CONT).
func (p *slotPool) orphanLocked(name string, err error) {
	p.removeFile(name)
	if name == "" || p.dir == "" || errors.Is(err, errNoSlotSave) || errors.Is(err, errSlotDirElsewhere) {
		return
	}
	if len(p.orphans) == maxOrphans {
		p.orphans = append(p.orphans[:0], p.orphans[1:]...)
	}
	p.orphans = append(p.orphans, orphan{name: name, since: time.Now()})
}

// reap removes the files of failed saves once the engine has answered a request sent at sent
// (a step, a slot action): llama-server runs a save it read before that request first, so the
// file is written by then. A name whose file was found is forgotten; one not found is tried
// again at the next answer (the engine may have read the save's request after the one it
// answered) and then forgotten: the engine did not run the save.
func (p *slotPool) reap(sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.orphans[:0]
	for _, o := range p.orphans {
		if !sent.After(o.since) {
			kept = append(kept, o)
			continue
		}
		if os.Remove(filepath.Join(p.dir, o.name)) == nil || o.answered {
			continue
		}
		o.answered = true
		kept = append(kept, o)
	}
	clear(p.orphans[len(kept):])
	p.orphans = kept
}

func newSlotPool(eng *engine, n int, dir string, maxBytes int64) *slotPool {
	return &slotPool{eng: eng, dir: dir, maxBytes: maxBytes, owner: make([]*lease, n), freed: make([]int64, n),
		changed: make(chan struct{})}
}

// inUse returns the number of slots held by rollouts (sampling or suspended).
func (p *slotPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.owner {
		if l != nil {
			n++
		}
	}
	return n
}

// acquire gives l a slot to sample on and marks it busy: the slot it holds (its KV is there),
// else a free slot, else the least recently used suspended rollout's slot (whose KV is saved
// first); with none of those it waits until a slot is released or ctx ends. When l's KV was
// saved, it is restored into the slot. It returns the slot id.
func (p *slotPool) acquire(ctx context.Context, l *lease) (int, error) {
	for {
		p.mu.Lock()
		if ch := l.moving; ch != nil { // its own KV is being saved right now: wait for the file
			p.mu.Unlock()
			if err := wait(ctx, ch); err != nil {
				return -1, err
			}
			continue
		}
		if l.slot >= 0 {
			l.busy = true
			p.mu.Unlock()
			return l.slot, nil
		}
		slot, victim := p.pickLocked()
		if slot < 0 {
			ch := p.changed
			p.mu.Unlock()
			if err := wait(ctx, ch); err != nil {
				return -1, err
			}
			continue
		}
		p.owner[slot], l.slot, l.busy = l, slot, true
		file := l.file
		if victim != nil {
			victim.slot, victim.moving = -1, make(chan struct{})
		}
		p.mu.Unlock()
		if victim != nil {
			p.saveOut(ctx, victim, slot)
		}
		if file != "" {
			p.restore(ctx, l, slot, file)
		}
		return slot, nil
	}
}

// pickLocked returns the free slot freed last (its KV most likely holds the conversation a
// client continues on the cold path, which the engine then reuses by prefix), or else the slot
// of the least recently used rollout that is neither sampling nor being moved (its victim), or
// -1.
func (p *slotPool) pickLocked() (slot int, victim *lease) {
	free := -1
	for i, o := range p.owner {
		if o == nil {
			if free < 0 || p.freed[i] > p.freed[free] {
				free = i
			}
			continue
		}
		if !o.busy && o.moving == nil && (victim == nil || o.used < victim.used) {
			slot, victim = i, o
		}
	}
	if free >= 0 {
		return free, nil
	}
	if victim == nil {
		return -1, nil
	}
	return slot, victim
}

// release marks l's step over: it keeps its slot (and the KV in it) while suspended.
func (p *slotPool) release(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.busy = false
	p.clock++
	l.used = p.clock
	p.signalLocked()
}

// close ends l: its slot is freed and its file removed.
func (p *slotPool) close(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.closed = true
	if l.slot >= 0 {
		p.clock++
		p.owner[l.slot], p.freed[l.slot] = nil, p.clock
		l.slot = -1
	}
	p.dropFileLocked(l)
	p.signalLocked()
}

func (p *slotPool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// saveOut saves victim's KV from slot to its file before slot is reused. On failure the
// victim's KV is lost and its next step is prefilled again.
func (p *slotPool) saveOut(ctx context.Context, victim *lease, slot int) {
	p.eng.m.sweepFiles(time.Now())
	name, size, err := "", int64(0), error(nil)
	p.mu.Lock()
	can := p.dir != "" && !p.noSave
	p.mu.Unlock()
	if can {
		name = fileName(victim.id)
		start := time.Now()
		size, err = p.eng.slotAction(ctx, slot, "save", name)
		p.saveNanos.Add(int64(time.Since(start)))
		if err == nil {
			err = p.checkSaved(name)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !can:
		p.drops.Add(1)
	case err != nil:
		p.drops.Add(1)
		if errors.Is(err, errNoSlotSave) || errors.Is(err, errSlotDirElsewhere) {
			p.noSave = true
		}
		p.eng.m.logf("upstream slot save failed", "replica", p.eng.base, "slot", slot, "err", err)
		p.orphanLocked(name, err)
	default:
		p.saves.Add(1)
		victim.file, victim.size = name, size
		p.saved = append(p.saved, victim)
		p.bytes += size
		if victim.closed {
			p.dropFileLocked(victim)
		}
		p.boundLocked(victim)
	}
	close(victim.moving)
	victim.moving = nil
	p.signalLocked()
}

// boundLocked drops the oldest saved files (their rollouts go cold) until the saved bytes fit
// maxBytes; keep is the file just saved.
func (p *slotPool) boundLocked(keep *lease) {
	for p.maxBytes > 0 && p.bytes > p.maxBytes && len(p.saved) > 0 && p.saved[0] != keep {
		p.drops.Add(1)
		p.dropFileLocked(p.saved[0])
	}
}

// restore loads l's saved KV into slot; on failure the step is prefilled again.
func (p *slotPool) restore(ctx context.Context, l *lease, slot int, file string) {
	start := time.Now()
	_, err := p.eng.slotAction(ctx, slot, "restore", file)
	p.restoreNanos.Add(int64(time.Since(start)))
	if err != nil {
		p.eng.m.logf("upstream slot restore failed", "replica", p.eng.base, "slot", slot, "err", err)
	} else {
		p.restores.Add(1)
	}
	p.mu.Lock()
	p.dropFileLocked(l)
	p.mu.Unlock()
}

// dropFileLocked forgets l's saved file and removes it.
func (p *slotPool) dropFileLocked(l *lease) {
	if l.file == "" {
		return
	}
	for i, o := range p.saved {
		if o == l {
			p.saved = append(p.saved[:i], p.saved[i+1:]...)
			break
		}
	}
	p.bytes -= l.size
	p.removeFile(l.file)
	l.file, l.size = "", 0
}

func (p *slotPool) removeFile(name string) {
	if name != "" && p.dir != "" {
		_ = os.Remove(filepath.Join(p.dir, name))
	}
}

// fileName names a rollout's KV file: its Response id and a random suffix, so that a name
// cannot be guessed from the id and a re-save never meets an old file.
func fileName(id string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("tether-%s-%x.bin", id, b)
}

// errNoSlotSave is returned by slotAction when the engine has no slot save path.
var errNoSlotSave = errors.New("the engine cannot save slots (start llama-server with --slot-save-path)")

// errSlotDirElsewhere is wrapped by checkSaved's error: the engine saved a file that is not in
// the pool's directory.
var errSlotDirElsewhere = errors.New("-upstream-slot-dir is not the engine's --slot-save-path")

// checkSaved returns nil when the file name the engine just saved is in the pool's directory,
// else an error wrapping errSlotDirElsewhere: the directory is not the engine's
// --slot-save-path as this host sees it, so Tether could neither bound nor remove the files the
// engine writes (they would pile up in the engine's directory) nor find them to restore after
// a park. The pool then saves no more (noSave): its suspended rollouts' next steps are prefilled.
func (p *slotPool) checkSaved(name string) error {
	if fi, err := os.Stat(filepath.Join(p.dir, name)); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%w: the engine saved %s, which is not in %s; give -upstream-slot-dir the engine's "+
		"--slot-save-path as this host sees it (KV saving is off for this replica until Tether restarts; "+
		"remove the file from the engine's directory by hand)", errSlotDirElsewhere, name, p.dir)
}

// slotActionTimeout bounds a slot save or restore on an engine that answers; Options.Timeout
// (the silence a step may meet) bounds it when shorter, so that a stalled engine holds a
// parking rollout, or a step waiting for a slot, no longer than it holds a step.
const slotActionTimeout = 30 * time.Second

// slotAction runs POST /slots/{slot}?action={action} with {"filename": name} on the engine
// and returns the bytes it reports written (save) or read (restore). It takes at most
// slotActionTimeout or Options.Timeout, the shorter.
func (e *engine) slotAction(ctx context.Context, slot int, action, name string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(slotActionTimeout, e.m.opts.Timeout))
	defer cancel()
	body, _ := json.Marshal(map[string]string{"filename": name})
	url := fmt.Sprintf("%s/slots/%d?action=%s", e.base, slot, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// Saving a slot to a name, or restoring it from one, gives the same result when repeated:
	// the key lets net/http resend it when the engine closed a kept-alive connection before
	// reading it (llama-server closes after each streamed reply), which else fails the save.
	req.Header.Set("Idempotency-Key", uuid.NewString())
	e.m.authorize(req)
	sent := time.Now()
	resp, err := e.m.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("slot %s: %w", action, err)
	}
	defer e.slots.reap(sent)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotImplemented || bytes.Contains(b, []byte("slot-save-path")) {
			return 0, errNoSlotSave
		}
		return 0, fmt.Errorf("slot %s: HTTP %d: %s", action, resp.StatusCode, cut(string(b)))
	}
	var r struct {
		Written int64 `json:"n_written"`
		Read    int64 `json:"n_read"`
	}
	_ = json.Unmarshal(b, &r)
	return max(r.Written, r.Read), nil
}

// wait blocks until ch is closed or ctx ends.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
