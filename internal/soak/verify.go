package soak

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// space tracks one sequence_number / output_index space: an append-shape rollout, or one
// public-shape segment. It checks the numbering and collects the items of output_item.done.
type space struct {
	st        *stats
	r         *rollout
	next      int            // next sequence_number
	nextIndex int            // next output_index
	open      map[string]int // item id → output_index: added, not yet done
	done      []doneItem     // output_item.done items, in order
	doneIDs   map[string]bool
	mark      int // len(done) at the last suspension
}

type doneItem struct {
	raw   json.RawMessage
	it    item
	index int
}

func newSpace(r *rollout) *space {
	return &space{st: r.w.r.st, r: r, open: map[string]int{}, doneIDs: map[string]bool{}}
}

// seq checks a frame's sequence_number: one space, 0, 1, 2 … without gaps or repeats.
func (s *space) seq(f frame) {
	switch {
	case f.seq < 0:
		s.r.fail("%s without sequence_number: %.200s", f.typ, f.data)
	case f.seq < s.next:
		s.st.eventsDuplicated.Add(1)
		s.r.fail("%s repeats sequence_number %d (expected %d)", f.typ, f.seq, s.next)
	case f.seq > s.next:
		s.st.eventsLost.Add(int64(f.seq - s.next))
		s.r.fail("%s has sequence_number %d, expected %d: %d event(s) lost", f.typ, f.seq, s.next, f.seq-s.next)
		s.next = f.seq + 1
	default:
		s.next++
	}
}

// event handles an output event of the space.
func (s *space) event(f frame) {
	s.seq(f)
	switch f.typ {
	case "response.output_item.added", "response.output_item.done":
	case "response.output_text.delta", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.content_part.added", "response.content_part.done", "response.output_text.done":
		return
	default:
		s.r.fail("unexpected event %.200s", f.data)
		return
	}
	ev, err := decodeEvent(f)
	if err != nil {
		s.r.fail("%v", err)
		return
	}
	var it item
	if err := json.Unmarshal(ev.Item, &it); err != nil || it.ID == "" || ev.OutputIndex == nil {
		s.r.fail("%s without item id or output_index: %.200s", f.typ, f.data)
		return
	}
	idx := *ev.OutputIndex
	if f.typ == "response.output_item.added" {
		if _, dup := s.open[it.ID]; dup || s.doneIDs[it.ID] {
			s.st.itemsDuplicated.Add(1)
			s.r.fail("item %s added twice", it.ID)
			return
		}
		if idx != s.nextIndex {
			s.r.fail("item %s added at output_index %d, expected %d", it.ID, idx, s.nextIndex)
		}
		s.nextIndex = max(s.nextIndex, idx+1)
		s.open[it.ID] = idx
		return
	}
	at, ok := s.open[it.ID]
	switch {
	case s.doneIDs[it.ID]:
		s.st.itemsDuplicated.Add(1)
		s.r.fail("item %s done twice", it.ID)
		return
	case !ok:
		s.r.fail("item %s done without output_item.added", it.ID)
	case at != idx:
		s.r.fail("item %s done at output_index %d, added at %d", it.ID, idx, at)
	}
	delete(s.open, it.ID)
	s.doneIDs[it.ID] = true
	s.done = append(s.done, doneItem{raw: append(json.RawMessage(nil), ev.Item...), it: it, index: idx})
}

// sinceMark returns the items done since the last suspension and moves the mark.
func (s *space) sinceMark() []doneItem {
	d := s.done[s.mark:]
	s.mark = len(s.done)
	return d
}

// checkClosed reports items added but never done.
func (s *space) checkClosed(at string) {
	for id := range s.open {
		s.st.itemsLost.Add(1)
		s.r.fail("item %s was added but not done at %s", id, at)
	}
}

// compareItems checks the items the server reports (a terminal Response's output, or the
// output of response.done) against the items it streamed: each streamed item exactly once,
// equal, in order, and nothing else. It returns the number of items verified.
func (s *space) compareItems(reported []json.RawMessage, streamed []doneItem, what string) int {
	count := map[string]int{}
	byID := map[string]json.RawMessage{}
	var order []string
	for _, raw := range reported {
		var it item
		if err := json.Unmarshal(raw, &it); err != nil || it.ID == "" {
			s.r.fail("%s: item without id: %.200s", what, raw)
			continue
		}
		if count[it.ID] == 0 {
			order = append(order, it.ID)
			byID[it.ID] = raw
		}
		count[it.ID]++
	}
	known := map[string]bool{}
	var want []string
	for _, d := range streamed {
		known[d.it.ID] = true
		want = append(want, d.it.ID)
		switch n := count[d.it.ID]; {
		case n == 0:
			s.st.itemsLost.Add(1)
			s.r.fail("%s: lost item %s (%s, output_index %d)", what, d.it.ID, d.it.Type, d.index)
			continue
		case n > 1:
			s.st.itemsDuplicated.Add(int64(n - 1))
			s.r.fail("%s: item %s reported %d times", what, d.it.ID, n)
		}
		if !sameJSON(byID[d.it.ID], d.raw) {
			s.r.fail("%s: item %s differs from its output_item.done: %.300s vs %.300s", what, d.it.ID, byID[d.it.ID], d.raw)
		}
	}
	for _, id := range order {
		if !known[id] {
			s.r.fail("%s: item %s was never streamed", what, id)
		}
	}
	if len(order) == len(want) && !reflect.DeepEqual(order, want) {
		s.r.fail("%s: items out of order: %v, streamed %v", what, order, want)
	}
	return len(streamed)
}

func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// quoteLimit is how many characters of each user text and tool output the sim's answer quotes.
const quoteLimit = 64

// quoteLine is the line of the sim's answer that quotes a user text (role "user") or a tool
// output (role "tool"): `user: "…"`, Go-quoted, cut to 64 characters plus "…".
func quoteLine(role, s string) string {
	cut, n := s, 0
	for i := range s {
		if n == quoteLimit {
			cut = s[:i] + "…"
			break
		}
		n++
	}
	return role + ": " + strconv.Quote(cut)
}

// quoteLines returns the quote lines of an answer.
func quoteLines(answer string) []string {
	var out []string
	for _, line := range strings.Split(answer, "\n") {
		if strings.HasPrefix(line, `user: "`) || strings.HasPrefix(line, `tool: "`) {
			out = append(out, line)
		}
	}
	return out
}

// compareQuotes checks the answer's quote lines against what the client sent: every user text
// and tool output exactly once, in order, and nothing else. partial: the answer was cut (a
// cancel mid-answer); its complete quote lines must be a prefix of the expected ones.
func (r *rollout) compareQuotes(answer string, partial bool) int {
	st := r.w.r.st
	want := r.sent
	got := quoteLines(answer)
	if partial {
		if len(got) > 0 && !strings.HasSuffix(answer, "\n") {
			got = got[:len(got)-1] // the last line may be cut
		}
		for i, g := range got {
			if i >= len(want) || g != want[i] {
				r.fail("cut answer line %d is %q, expected a prefix of the sent items", i, g)
				return 0
			}
		}
		return len(got)
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	wanted := map[string]int{}
	for _, w := range want {
		wanted[w]++
	}
	for w, n := range wanted {
		switch g := seen[w]; {
		case g < n:
			st.itemsLost.Add(int64(n - g))
			r.fail("the answer does not quote %s (sent %d×, quoted %d×)", w, n, g)
		case g > n:
			st.itemsDuplicated.Add(int64(g - n))
			r.fail("the answer quotes %s %d× (sent %d×)", w, g, n)
		}
	}
	for g := range seen {
		if wanted[g] == 0 {
			r.fail("the answer quotes %s, which the client never sent", g)
		}
	}
	if !reflect.DeepEqual(got, want) && len(got) == len(want) {
		r.fail("the answer quotes the sent items out of order")
	}
	if len(want) > 0 && (len(got) == 0 || got[len(got)-1] != want[len(want)-1]) {
		r.fail("the answer does not end its quotes with the last item sent, %s", want[len(want)-1])
	}
	return len(want)
}

// checkUsage checks one usage object.
func (r *rollout) checkUsage(u *usage, what string) {
	if u == nil {
		r.fail("%s without usage", what)
		return
	}
	if u.Total != u.Input+u.Output || u.Details.Cached > u.Input || u.Input <= 0 {
		r.fail("%s: inconsistent usage %+v", what, *u)
	}
}
