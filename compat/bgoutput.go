package compat

import "github.com/tetherd/tether/protocol"

// bgOutput is the output of a running background response as its events have built it so
// far, for GET to show while it runs: the items done (each as its response.output_item.done
// carried it) and the items in progress (as their response.output_item.added carried them,
// with the content parts and the text or arguments their deltas have added since). Its
// owner, the bgRun, guards it.
type bgOutput struct {
	items []bgItem // by output_index
	bytes int64    // of the texts and arguments being built: bgItem.parts and args
}

// bgItem is one item of a bgOutput: done (item is final), or in progress (item as added,
// parts and args being built).
type bgItem struct {
	item  protocol.Item
	done  bool
	parts []bgPart
	args  []byte
}

// bgPart is one content part of an item in progress: part as added and its text so far, or,
// once its text is done, part final.
type bgPart struct {
	part  protocol.ContentPart
	final bool
	text  []byte
}

// apply folds ev, the next event of the response, into the output, and returns by how many
// bytes the texts being built grew (negative: an item or part done gave back its buffer).
// Events of no item, or naming an item or part that was not added, change nothing.
func (o *bgOutput) apply(ev *protocol.Event) int64 {
	if ev.Type == protocol.EventOutputItemAdded {
		if ev.Item != nil && ev.OutputIndex == len(o.items) {
			o.items = append(o.items, bgItem{item: *ev.Item})
		}
		return 0
	}
	if ev.OutputIndex < 0 || ev.OutputIndex >= len(o.items) || o.items[ev.OutputIndex].done {
		return 0
	}
	it := &o.items[ev.OutputIndex]
	before := it.size()
	switch ev.Type {
	case protocol.EventOutputItemDone:
		if ev.Item != nil {
			*it = bgItem{item: *ev.Item, done: true}
		}
	case protocol.EventArgumentsDelta:
		it.args = append(it.args, ev.Delta...)
	case protocol.EventArgumentsDone:
		it.item.Arguments, it.args = ev.Arguments, nil
	case protocol.EventContentPartAdded:
		if ev.Part != nil && ev.ContentIndex == len(it.parts) {
			it.parts = append(it.parts, bgPart{part: *ev.Part})
		}
	default:
		if p := it.part(ev.ContentIndex); p != nil {
			p.apply(ev)
		}
	}
	after := it.size()
	o.bytes += after - before
	return after - before
}

// part returns the content part i of it, or nil.
func (it *bgItem) part(i int) *bgPart {
	if i < 0 || i >= len(it.parts) {
		return nil
	}
	return &it.parts[i]
}

// apply folds a text event of the part.
func (p *bgPart) apply(ev *protocol.Event) {
	switch ev.Type {
	case protocol.EventOutputTextDelta:
		if !p.final {
			p.text = append(p.text, ev.Delta...)
		}
	case protocol.EventOutputTextDone:
		p.part.Text, p.text, p.final = ev.Text, nil, true
	case protocol.EventContentPartDone:
		if ev.Part != nil {
			p.part, p.text, p.final = *ev.Part, nil, true
		}
	}
}

// size is the bytes of the buffers of it being built.
func (it *bgItem) size() int64 {
	n := int64(len(it.args))
	for i := range it.parts {
		n += int64(len(it.parts[i].text))
	}
	return n
}

// list returns the output as it stands, as new items that share nothing mutable with o: the
// done items, and each item in progress as it was added (status in_progress) with the content
// parts added since (their text so far) and its arguments so far.
func (o *bgOutput) list() []protocol.Item {
	out := make([]protocol.Item, len(o.items))
	for i := range o.items {
		it := &o.items[i]
		out[i] = it.item
		if it.done {
			continue
		}
		if it.args != nil {
			out[i].Arguments = string(it.args)
		}
		if out[i].Content != nil || len(it.parts) > 0 {
			out[i].Content = make([]protocol.ContentPart, len(it.parts))
		}
		for j := range it.parts {
			p := &it.parts[j]
			out[i].Content[j] = p.part
			if !p.final {
				out[i].Content[j].Text = string(p.text)
			}
		}
	}
	return out
}
