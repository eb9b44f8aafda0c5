package store

import (
	"context"
	"errors"

	"github.com/tetherd/tether/protocol"
)

var (
	// ErrNotFound is returned for an id that is not stored, has expired or been evicted, or
	// belongs to another owner. Every other error from a Store is a store failure.
	ErrNotFound = errors.New("store: response not found")
	// ErrCursorNotFound is returned by InputItems when Page.After names no input item of the
	// response (the HTTP API answers it 400 invalid_value, param after).
	ErrCursorNotFound = errors.New("store: no input item with the after id")
)

// MissingError is the ErrNotFound of Chain: ID names the response of the chain that is not
// stored (or not the owner's): the id asked for, or an ancestor that expired, was evicted or
// was deleted. errors.Is(err, ErrNotFound) holds.
type MissingError struct {
	ID string
}

func (e *MissingError) Error() string { return "store: response " + e.ID + " of the chain not found" }

// Is makes a MissingError an ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == ErrNotFound }

// MissingID returns the response a Chain error names (a *MissingError), else id.
func MissingID(err error, id string) string {
	var m *MissingError
	if errors.As(err, &m) && m.ID != "" {
		return m.ID
	}
	return id
}

// Response is one stored Response (store:true): the Response object as last sent, the input
// items of its request (for GET /v1/responses/{id}/input_items), its owner, and, for an
// append-shape rollout, its whole chain.
type Response struct {
	Response protocol.Response
	// Input are the request's input items (with ids).
	Input []protocol.Item
	// Owner is the id of the API key that created it: the server's key id (the access log's
	// key_id, a hash prefix of the key, never the key itself), "" when the server is open.
	// Only this owner finds it. Redis writes it into its keys as it is.
	Owner string
	// Quota is the key the response's size counts against for the per-key quotas: Owner, or
	// the client's address when the server is open ("" when there are no quotas).
	Quota string
	// Chain, when set, is the whole chain through this response (ancestors' items, Input and
	// output, in context order): an append-shape rollout interleaves inputs and outputs, so its
	// chain cannot be rebuilt from Input followed by output. When nil, the chain is the
	// parent's chain (Response.PreviousResponseID) followed by Input and Response.Output.
	Chain []protocol.Item
}

// Page selects input items as GET /v1/responses/{id}/input_items does.
type Page struct {
	// Limit is the largest number of items returned; 0 means 20.
	Limit int
	// Desc lists the newest item first (the API's default order=desc).
	Desc bool
	// After, when set, is an item id: the list starts after it (in the chosen order).
	After string
}

// ItemList is one page of input items.
type ItemList struct {
	Items   []protocol.Item
	HasMore bool
}

// Store keeps stored responses . Every method takes
// ctx first and returns an error, because a remote store can be slow or down: ErrNotFound (and
// ErrCursorNotFound for InputItems) are answers, anything else is a store failure. A lookup
// by another owner gets ErrNotFound and changes nothing (no recency update). Implementations
// are safe for concurrent use.
type Store interface {
	// Put stores r under r.Response.ID for r.Owner, replacing an earlier version.
	Put(ctx context.Context, r *Response) error
	// Get returns the stored response id of owner.
	Get(ctx context.Context, id, owner string) (*Response, error)
	// Delete removes the stored response id of owner.
	Delete(ctx context.Context, id, owner string) error
	// InputItems returns one page of the input items of the stored response id of owner.
	InputItems(ctx context.Context, id, owner string, p Page) (ItemList, error)
	// Chain returns the items of the chain that ends with the stored response id (every
	// ancestor's input and output, oldest first, as the model saw them) in one round trip.
	// ErrNotFound when id or any ancestor is missing or belongs to another owner: a
	// *MissingError that names the first one missing, walking from id.
	Chain(ctx context.Context, id, owner string) ([]protocol.Item, error)
	// Close releases the store's resources (connections). Idempotent.
	Close() error
}

// MaxChainLinks bounds the ancestors a Chain walks (a longer chain is a store failure).
const MaxChainLinks = 100000

// paginate applies p to items (the request's input items, oldest first).
func paginate(items []protocol.Item, p Page) (ItemList, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	list := make([]protocol.Item, len(items))
	copy(list, items)
	if p.Desc {
		for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
			list[i], list[j] = list[j], list[i]
		}
	}
	if p.After != "" {
		at := -1
		for i := range list {
			if list[i].ID == p.After {
				at = i
				break
			}
		}
		if at < 0 {
			return ItemList{}, ErrCursorNotFound
		}
		list = list[at+1:]
	}
	more := len(list) > limit
	if more {
		list = list[:limit]
	}
	return ItemList{Items: list, HasMore: more}, nil
}

// link is one response of a chain as a Chain walk finds it.
type link struct {
	input, output, chain []protocol.Item
}

// assemble returns the chain items of links (newest first, as walked): the newest link with
// a whole chain is the prefix, then every later link's input and output.
func assemble(links []link) []protocol.Item {
	var items []protocol.Item
	for i := len(links) - 1; i >= 0; i-- {
		l := &links[i]
		if l.chain != nil {
			items = append(items[:0], l.chain...)
			continue
		}
		items = append(items, l.input...)
		items = append(items, l.output...)
	}
	return items
}

var errChainTooLong = errors.New("store: chain longer than MaxChainLinks responses")
