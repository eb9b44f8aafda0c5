package chat

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// This file parks a session (sampler.ParkableSession), reopens it (sampler.Unparker) or drops
// its state (sampler.ParkedDropper): the parked state is a small JSON value; the messages are
// rebuilt from the items the session was fed, and the engine KV, when the session held a slot
// and the engine can save, waits in a slot file for the next step.

var _ sampler.ParkedDropper = (*Model)(nil)

// ErrBadState is wrapped by Model.Unpark's error for a state that Park did not write, or
// that does not fit the items it is given.
var ErrBadState = errors.New("chat: invalid parked session state")

// parkVersion is the v field of a parked state.
const parkVersion = 1

// parkState is a parked session's state.
type parkState struct {
	V int `json:"v"`
	// Replica is the BaseURL of the replica the session was placed on, as configured.
	Replica string `json:"replica"`
	// Items is the number of items the session had converted (len of Unpark's fed); Breaks
	// the offsets among them where a conversion started apart (session.breaks).
	Items  int   `json:"items"`
	Breaks []int `json:"breaks,omitempty"`
	// KV is the name of the slot file holding the session's KV in the slot directory; ""
	// for none (the next step is prefilled).
	KV string `json:"kv,omitempty"`
}

// Park implements sampler.ParkableSession. When the session holds a slot and the engine can
// save, the slot's KV is saved to a file (action=save) and the slot freed; a file its KV was
// already saved to is kept. The session stays usable: a step after Park restores that file
// like any other. Close right after Park keeps the file for Unpark (bounded by SlotSaveBytes
// with the others: a file dropped meanwhile makes the unparked step a prefill).
func (s *session) Park() ([]byte, error) {
	if s.eng == nil {
		return nil, errors.New("chat: park of a closed session")
	}
	st := parkState{V: parkVersion, Replica: s.eng.api, Items: s.conv, Breaks: s.breaks}
	if s.lease != nil {
		st.KV = s.eng.slots.park(s.lease)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	s.parked = true
	return b, nil
}

// Unpark implements sampler.Unparker. The messages are rebuilt from fed exactly as the parked
// session had converted them. The session goes back to its replica when this Model has it and
// it is healthy, and its saved KV (when the file is still there) is restored into the slot its
// next step gets, so that step finds the context cached. On another replica, or without the
// file, the next step is prefilled (its cached_tokens say so) and the file is removed. A state
// Park did not write returns an error wrapping ErrBadState.
func (m *Model) Unpark(ctx context.Context, info sampler.RolloutInfo, state []byte, fed []protocol.Item) (sampler.ModelSession, error) {
	var st parkState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	switch {
	case st.V != parkVersion:
		return nil, fmt.Errorf("%w: version %d", ErrBadState, st.V)
	case st.Items != len(fed):
		return nil, fmt.Errorf("%w: it holds %d items, %d given", ErrBadState, st.Items, len(fed))
	case st.KV != "" && !validFileName(st.KV, info.ID):
		return nil, fmt.Errorf("%w: %q is not a slot file of %s", ErrBadState, st.KV, info.ID)
	}
	s := &session{m: m, id: info.ID, settings: info.Settings}
	if info.Settings.Instructions != "" {
		s.msgs = append(s.msgs, chatwire.Message{Role: protocol.RoleSystem, Content: chatwire.TextContent(info.Settings.Instructions)})
	}
	from := 0
	for _, b := range append(st.Breaks, len(fed)) {
		if b < from || b > len(fed) {
			return nil, fmt.Errorf("%w: break %d out of order", ErrBadState, b)
		}
		var err error
		if s.msgs, err = s.convert(s.msgs, fed[from:b]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadState, err)
		}
		from = b
	}

	old := m.replica(st.Replica)
	if old != nil && m.healthy(ctx, old) {
		s.attachTo(old, nil)
	} else {
		s.attach(ctx, old) // old again only when it is the only replica
	}
	if s.eng != old {
		s.eng.cold.Add(1)
	}
	if s.eng == old && s.lease != nil {
		s.lease = old.slots.adopt(info.ID, st.KV)
	} else {
		m.dropParkedFile(old, st.KV)
	}
	return s, nil
}

// DropParked implements sampler.ParkedDropper: the slot file of a parked session whose rollout
// ended without resuming it is removed (through the pool that keeps it, as on Unpark to
// another replica). A state Park did not write, or whose file is not one of rollout id's, is
// ignored.
func (m *Model) DropParked(id string, state []byte) {
	var st parkState
	if json.Unmarshal(state, &st) != nil || st.V != parkVersion || st.KV == "" || !validFileName(st.KV, id) {
		return
	}
	m.dropParkedFile(m.replica(st.Replica), st.KV)
}

// replica returns the replica whose BaseURL is api, or nil.
func (m *Model) replica(api string) *engine {
	for _, e := range m.engines {
		if e.api == strings.TrimRight(api, "/") {
			return e
		}
	}
	return nil
}

// healthy reports whether e may take the unparked session: it is up, or its backoff is over
// and its health check answers.
func (m *Model) healthy(ctx context.Context, e *engine) bool {
	if !e.isDown() {
		return true
	}
	if !e.usable(time.Now()) || !e.probe(ctx) {
		return false
	}
	e.ok()
	return true
}

// dropParkedFile removes a parked session's slot file that will not be restored: through the
// pool of the replica it was saved on when that pool keeps it, else from the slot directory.
func (m *Model) dropParkedFile(old *engine, name string) {
	if name == "" {
		return
	}
	if old != nil && old.slots != nil && old.slots.dropParked(name) {
		return
	}
	if m.opts.SlotDir != "" {
		_ = os.Remove(filepath.Join(m.opts.SlotDir, name))
	}
}

// validFileName reports whether name is a slot file name fileName gives for id: a plain name
// in the slot directory, nothing a path could escape from.
func validFileName(name, id string) bool {
	mid, ok := strings.CutPrefix(name, "tether-"+id+"-")
	if !ok || filepath.Base(name) != name || strings.ContainsAny(id, `/\`) || id == "" {
		return false
	}
	hexPart, ok := strings.CutSuffix(mid, ".bin")
	if !ok || len(hexPart) != 16 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// park saves l's KV for its rollout's park and returns the file's name, or "" when there is
// none: the KV already saved to a file is kept; a held slot is saved (action=save) and freed.
// Without a slot directory, when the engine cannot save or the save fails, l keeps its slot
// (freed by Close) and the name is "".
func (p *slotPool) park(l *lease) string {
	p.eng.m.sweepFiles(time.Now())
	p.mu.Lock()
	for l.moving != nil { // its KV is being saved out of its slot right now: wait for the file
		ch := l.moving
		p.mu.Unlock()
		<-ch // slotAction bounds the save
		p.mu.Lock()
	}
	if l.file != "" || l.slot < 0 || p.dir == "" || p.noSave {
		name := l.file
		p.mu.Unlock()
		return name
	}
	slot := l.slot
	l.moving = make(chan struct{}) // no other rollout takes the slot while it is saved
	p.mu.Unlock()

	name := fileName(l.id)
	start := time.Now()
	size, err := p.eng.slotAction(context.Background(), slot, "save", name)
	p.saveNanos.Add(int64(time.Since(start)))
	if err == nil {
		err = p.checkSaved(name)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if errors.Is(err, errNoSlotSave) || errors.Is(err, errSlotDirElsewhere) {
			p.noSave = true
		}
		p.eng.m.logf("upstream slot save failed", "replica", p.eng.base, "slot", slot, "err", err)
		p.orphanLocked(name, err)
		name = ""
	} else {
		p.saves.Add(1)
		p.clock++
		p.owner[slot], p.freed[slot] = nil, p.clock
		l.slot = -1
		l.file, l.size = name, size
		p.saved = append(p.saved, l)
		p.bytes += size
		p.boundLocked(l)
		name = l.file // "" if the bound dropped it
	}
	close(l.moving)
	l.moving = nil
	p.signalLocked()
	return name
}

// handOff ends l for a rollout that parked: its slot is freed, but its file is kept for
// Unpark (adopt), counted in the bound with the others.
func (p *slotPool) handOff(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.slot >= 0 {
		p.clock++
		p.owner[l.slot], p.freed[l.slot] = nil, p.clock
		l.slot = -1
	}
	switch {
	case l.file != "":
		l.parked = true
		p.parks.Add(1)
	case l.moving != nil: // saved out by another rollout now: the parked state does not name that file
		l.closed = true
	}
	p.signalLocked()
}

// adopt returns the lease of an unparked session of rollout id whose KV was saved to name: the
// parked lease that keeps the file, else a new lease taking the file when it is in the slot
// directory (saved by another instance sharing it). A file that is gone (dropped by the bound,
// or never seen here) gives a lease without one: the next step is prefilled.
func (p *slotPool) adopt(id, name string) *lease {
	l := &lease{id: id, slot: -1}
	if name == "" {
		return l
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fi, err := os.Stat(filepath.Join(p.dir, name))
	gone := p.dir == "" || err != nil || !fi.Mode().IsRegular()
	for _, o := range p.saved {
		if o.parked && o.file == name {
			if gone { // removed behind the pool's back: nothing to restore
				p.dropFileLocked(o)
				break
			}
			o.parked, o.closed = false, false
			return o
		}
	}
	if gone {
		p.drops.Add(1)
		return l
	}
	l.file, l.size = name, fi.Size()
	p.saved = append(p.saved, l)
	p.bytes += l.size
	p.boundLocked(l)
	return l
}

// dropParked removes the parked file name that no session will restore, and reports whether
// the pool kept it.
func (p *slotPool) dropParked(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.saved {
		if o.parked && o.file == name {
			p.dropFileLocked(o)
			return true
		}
	}
	return false
}
