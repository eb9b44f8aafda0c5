package protocol

import (
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// A create is held to CreateBounds while it is decoded, in the same walk: the readers of input
// items, content parts and tools check the values they read against the nodes of boundTree and
// walk the members they do not model against them (dec.walk) where they used to skip them. The
// other top-level members with a bound (numbers, enums, reasoning, text, metadata, tool_choice,
// include) are small: each is checked right after it is decoded, from its text
// (dec.noteValue). A violation does not stop the decoding: the first one in document order is
// kept (boundState) and reported only when the whole create decodes, since a decode error
// anywhere wins over it. checkBounds, the second walk over the whole text that this replaces,
// gives the same answer for every create (FuzzBoundsInDecode compares them).

// boundState is what a create's decoding found against CreateBounds. Its decoders share it
// (dec.bs, copied to the decoders of sub-values).
type boundState struct {
	err *Error // the first violation in document order
}

// startBounds makes d, about to read a create, hold it to CreateBounds when fold is set.
func (d *dec) startBounds(fold bool) {
	if fold {
		d.own = boundState{}
		d.bs = &d.own
	}
}

// boundResult is the violation to report once the create d read has decoded, or nil.
func (d *dec) boundResult() *Error {
	if d.bs == nil {
		return nil
	}
	return d.bs.err
}

// Nodes of boundTree whose values the decoders read themselves.
var (
	inputNode   = boundTree.child("input")
	itemNode    = inputNode.elem()
	itemStatus  = itemNode.child("status")
	itemContent = itemNode.child("content")
	itemCallID  = itemNode.child("call_id")
	itemName    = itemNode.child("name")
	itemOutput  = itemNode.child("output")
	toolNode    = boundTree.child("tools").elem()
	toolName    = toolNode.child("name")
)

// child returns the node of member key of an object at n ("*" when key has none), or nil.
func (n *boundNode) child(key string) *boundNode {
	if n == nil {
		return nil
	}
	if c := n.children[key]; c != nil {
		return c
	}
	return n.children["*"]
}

// elem returns the node of the elements of an array at n, or nil.
func (n *boundNode) elem() *boundNode {
	if n == nil {
		return nil
	}
	return n.children["[]"]
}

// checking reports whether d holds what it reads at node n to its rows.
func (d *dec) checking(n *boundNode) bool { return n != nil && d.bs != nil }

// note keeps err as the create's bound violation unless an earlier one was kept.
func (d *dec) note(err *Error) {
	if err != nil && d.bs.err == nil {
		d.bs.err = err
	}
}

// checkToken checks the scalar token tok, the value d read last, against n's rows; typ is the
// "type" of the object holding it.
func (n *boundNode) checkToken(tok []byte, d *dec, typ string) *Error {
	if len(tok) == 0 || len(n.rows) == 0 {
		return nil
	}
	if err := n.checkKind(tokenKind(tok), d, typ); err != nil {
		return err
	}
	switch tok[0] {
	case '"':
		if n.lengthOnly(tok) {
			return nil
		}
		return n.checkString(unquote(tok), d, typ)
	case 'n', 't', 'f':
		return nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return nil // the decoder reports numbers out of range
	}
	return n.checkNumber(f, d, typ)
}

// tokenKind is the JSON kind of the scalar token tok: '"', 't', 'f', 'n' or '0' for a number.
func tokenKind(tok []byte) jsontext.Kind {
	switch tok[0] {
	case '"', 't', 'f', 'n':
		return jsontext.Kind(tok[0])
	}
	return '0'
}

// checkKind checks that a value of JSON kind got is of the type n's rows bound: a string for
// an enum, pattern or length, a number for a range; a mismatch is invalid_type, and null passes
// (an unset member). The decoders refuse a wrong type on the members they model first; this
// refuses it on the members they carry through unread (an item's phase, a part's detail or
// image_url), which no row checked at all.
func (n *boundNode) checkKind(got jsontext.Kind, d *dec, typ string) *Error {
	if got == 'n' {
		return nil
	}
	for _, b := range n.rows {
		if !applies(b, typ) {
			continue
		}
		want := ""
		switch b.Kind {
		case BoundEnum, BoundPattern, BoundLength:
			if got != '"' {
				want = "a string"
			}
		case BoundInteger:
			if got != '0' {
				want = "an integer"
			}
		case BoundDecimal:
			if got != '0' {
				want = "a number"
			}
		}
		if want != "" {
			param := d.param()
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
				Message: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s.", param, want, kindName(got))}
		}
	}
	return nil
}

// checkComposite checks an object or an array, of kind got, at n: where n bounds a scalar
// and has no node below it (an item's phase, a part's detail), the value is of the wrong type.
// A node with nodes below it (input, content, output, tool_choice) takes composite values.
func (n *boundNode) checkComposite(got jsontext.Kind, d *dec, typ string) *Error {
	if len(n.children) != 0 {
		return nil
	}
	return n.checkKind(got, d, typ)
}

// walk moves past the next value as skip does, with skip's errors, and notes the first
// violation of the rows of n and of the nodes below it (none when d checks nothing at n).
// typ is the "type" of the object holding the value.
func (d *dec) walk(n *boundNode, typ string) *Error {
	if !d.checking(n) {
		return d.skip()
	}
	if k := d.kind(); k == '{' || k == '[' {
		if err := n.checkComposite(k, d, typ); err != nil {
			d.note(err)
			return d.skip()
		}
	}
	switch d.kind() {
	case '{':
		if n.typed { // rare (text.format): skipped, then checked as checkBounds checks it
			start := d.offset()
			if err := d.skip(); err != nil {
				return err
			}
			d.noteValue(start, n, typ)
			return nil
		}
		d.open()
		count, err := d.membersIn(n, "", nil)
		if err == nil {
			d.note(n.checkCount(BoundProperties, count, d))
		}
		return err
	case '[':
		return d.walkArray(n, typ)
	}
	k := d.kind()
	tok := d.value()
	switch {
	case tok == nil:
		return errSyntax
	case k == '0' && !numberFits(tok):
		return d.errRange(tok)
	}
	d.note(n.checkToken(tok, d, typ))
	return nil
}

// walkArray walks the array that is the next value (its '[' peeked), its elements against n's
// element node, and checks its length against n.
func (d *dec) walkArray(n *boundNode, typ string) *Error {
	c, count := n.elem(), 0
	err := d.array(func() *Error {
		count++
		return d.walk(c, typ)
	})
	if err == nil {
		d.note(n.checkCount(BoundItems, count, d))
	}
	return err
}

// offset returns the offset in d.data of the next value.
func (d *dec) offset() int { return int(d.d.InputOffset()) + valueStart(d.d.UnreadBuffer()) }

// noteValue checks the value d read last, which starts at offset start, against n as
// checkBounds does, and notes the violation found. After a syntax error (nothing read) it
// checks nothing: the text is invalid_json.
func (d *dec) noteValue(start int, n *boundNode, typ string) {
	end := int(d.d.InputOffset())
	if end <= start {
		return
	}
	v := d.data[start:end]
	if v[0] != '{' && v[0] != '[' {
		d.note(n.checkToken(v, d, typ))
		return
	}
	sub := newDec(v, d.param(), d.noun)
	d.note(sub.bounds(n, typ))
	sub.release()
}

// noteMember checks the top-level member key of a create, which d has read from offset start,
// unless its reader checked it.
func (d *dec) noteMember(key []byte, start int) {
	switch string(key) {
	case "input", "tools", "type": // checked as they are read; no bound
		return
	}
	if n := boundTree.child(string(key)); d.checking(n) {
		d.noteValue(start, n, "")
	}
}

// strIn reads the string token that is next (a syntax error gives ""), notes its violation of
// n's rows, and returns it; typ is the "type" of the object holding it.
func (d *dec) strIn(n *boundNode, typ string) string {
	tok := d.value()
	if d.checking(n) {
		d.note(n.checkToken(tok, d, typ))
	}
	return bigString(unquote(tok))
}
