package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/protocol"
)

// DefaultTTL is how long a stored response lives after its last use in Redis (-store-ttl):
// 30 days, like OpenAI's stored responses.
const DefaultTTL = 720 * time.Hour

// RedisOptions configures a Redis store. The zero value works.
type RedisOptions struct {
	// MaxResponses and MaxBytes bound the stored responses of the whole deployment (count,
	// and bytes as Size counts them), least recently used evicted first. 0 means
	// DefaultResponses and DefaultBytes.
	MaxResponses int
	MaxBytes     int64
	// TTL is how long a response lives after its last use (Put, Get, InputItems, Chain).
	// 0 means DefaultTTL; negative means no expiry.
	TTL time.Duration
	// Prefix starts every key. "" means "tether:".
	Prefix string
}

// Redis is a Store in Redis 7 or later, shared by every instance of a deployment. Key
// layout (Prefix "tether:"):
//
//	tether:r:<owner>:<id>  hash: parent (previous_response_id or ""), response (the Response
//	                       JSON with output []), output, input and, for an append-shape
//	                       rollout, chain (JSON arrays of items), and items (the distinct ids
//	                       of input and output, a JSON array); TTL as RedisOptions.TTL
//	tether:i:<owner>:<item id>
//	                       set: the owner's response keys whose items hold the id (the item
//	                       index of FindItems); written and removed by the same scripts as the
//	                       response, its TTL extended with each holder's, so it lives as long
//	                       as the longest-lived; an entry left over is passed over
//	tether:lru             sorted set: response key → last use (unix µs, strictly increasing)
//	tether:sizes           hash: response key → Size in bytes
//	tether:bytes           string: the sum of tether:sizes
//	tether:clock           string: the last stamp given out (unix µs)
//	tether:iclock          string: the last stamp given out by a build that keeps the item
//	                       index; tether:clock differs from it after an older build's stamp
//	tether:legacy          string: how many times a stamp of an older build was noticed
//	tether:itemidx         string: tether:legacy as it was when a walk that indexed every
//	                       stored response started; the index is complete while they are equal
//	tether:p:<owner>:<id>  string: a parked rollout (Parker), with its own TTL, outside the
//	                       bounds and the LRU
//	tether:b:<owner>:<id>  string: a background response's record (BackgroundKeeper), and
//	tether:be:<owner>:<id> stream: its kept events, and tether:bc:<owner>:<id> a cancel
//	                       request; each with its own TTL, outside the bounds and the LRU
//
// and, with per-key quotas (SetKeyQuota):
//
//	tether:quotas          hash: response key → its quota key (Response.Quota, escaped)
//	tether:q:<quota>       sorted set: the quota key's response keys → last use
//	tether:qbytes          hash: quota key → the sum of its responses' Size
//
// Per-key quotas are counted inside the same scripts as the store's bounds, so they hold
// across every instance of a deployment (each Put applies its own instance's quota).
//
// When Redis reaches its maxmemory, it refuses a Put's script before it writes anything;
// Put then evicts the least recently used responses (a script that Redis allows when full)
// and tries again, as the memory store evicts at its bounds: the create completes. Only a
// Redis that cannot hold even this one response fails the Put. Get, Delete, InputItems and
// Chain go on working when Redis is full.
//
// <owner> is Response.Owner as the caller gives it, escaped as in a URL query: for the server,
// the key_id of its access log (the first 16 hex digits of the SHA-256 of the API key; empty
// on an open server), so the API key itself is never written, and a lookup by another owner
// names a key that does not exist. Every call is
// one Lua script (one round trip); Chain walks the parent pointers inside Redis.
type Redis struct {
	c      *redis.Client
	o      RedisOptions
	common []string // the bookkeeping keys: lru, sizes, bytes, clock, quotas, qbytes, iclock, legacy, itemidx
	ttlArg int64    // milliseconds, 0 = none

	keyCount int   // per Response.Quota; 0: none
	keyBytes int64 // per Response.Quota; 0: none

	evictedKey, evictedGlobal, evictedFull atomic.Int64
}

// NewRedis connects to the Redis of url (redis://[user:password@]host:port/db) and checks
// that it answers within ctx.
func NewRedis(ctx context.Context, url string, o RedisOptions) (*Redis, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	opt.DisableIdentity = true
	opt.ContextTimeoutEnabled = true // a call ends at its ctx deadline (-store-timeout), not only at ReadTimeout
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("store: cannot reach Redis at %s: %w", opt.Addr, err)
	}
	if o.MaxResponses <= 0 {
		o.MaxResponses = DefaultResponses
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultBytes
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Prefix == "" {
		o.Prefix = "tether:"
	}
	if err := checkVersion(ctx, c); err != nil {
		_ = c.Close()
		return nil, err
	}
	s := &Redis{c: c, o: o}
	for _, k := range []string{"lru", "sizes", "bytes", "clock", "quotas", "qbytes", "iclock", "legacy", "itemidx"} {
		s.common = append(s.common, o.Prefix+k)
	}
	if o.TTL > 0 {
		s.ttlArg = o.TTL.Milliseconds()
	}
	return s, nil
}

// checkVersion refuses a Redis older than 7: the scripts declare their flags (the shebang
// line Redis 7 introduced).
func checkVersion(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("store: redis INFO: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			if n, err := strconv.Atoi(major); err != nil || n < 7 {
				return fmt.Errorf("store: Redis %s is too old: the Redis store needs Redis 7 or later", v)
			}
			return nil
		}
	}
	return nil // a server that does not tell its version (a Redis-compatible one) is tried
}

// Bounds returns the store's bounds over the whole deployment: responses and bytes (Size).
func (s *Redis) Bounds() (responses int, bytes int64) { return s.o.MaxResponses, s.o.MaxBytes }

// SetKeyQuota sets the per-key quotas: responses and bytes (Size) one quota key
// (Response.Quota) may hold across the deployment; 0 means no quota. Over its quota, a Put
// evicts the quota key's own least recently used responses. Call it before use.
func (s *Redis) SetKeyQuota(count int, bytes int64) {
	s.keyCount, s.keyBytes = count, bytes
}

// KeyQuota returns the per-key quotas SetKeyQuota set: responses and bytes (0: none).
func (s *Redis) KeyQuota() (responses int, bytes int64) { return s.keyCount, s.keyBytes }

// Evictions reports how many responses this instance's Puts evicted over their key's quota
// (key) and over the store's bounds (global).
func (s *Redis) Evictions() (key, global int64) {
	return s.evictedKey.Load(), s.evictedGlobal.Load()
}

// FullEvictions reports how many responses this instance's Puts evicted because Redis had
// reached its maxmemory.
func (s *Redis) FullEvictions() int64 { return s.evictedFull.Load() }

// ownerPrefix is the key prefix of owner's responses. The owner id is written as the server
// gives it (the access log's key_id), escaped as in a URL query so that it holds no ':' and no
// SCAN pattern character.
func (s *Redis) ownerPrefix(owner string) string {
	return s.o.Prefix + "r:" + url.QueryEscape(owner) + ":"
}

func (s *Redis) keys(id, owner string) []string {
	return append(s.common[:len(s.common):len(s.common)], s.ownerPrefix(owner)+id)
}

// args are the scripts' first arguments (luaCommon) followed by more.
func (s *Redis) args(more ...any) []any {
	return append([]any{s.ttlArg, s.o.Prefix}, more...)
}

// maxFullRounds bounds the evictions of one Put at maxmemory; ctx bounds their time.
const maxFullRounds = 1000

// Put stores r (one script: replace, account, evict). When Redis has reached its maxmemory
// it evicts the least recently used responses (at least r's Size of them per round) until
// Redis accepts r; it fails only when nothing is left to evict.
func (s *Redis) Put(ctx context.Context, r *Response) error {
	head := r.Response
	head.Output = nil
	resp, err := json.Marshal(head)
	if err != nil {
		return err
	}
	output, err := json.Marshal(r.Response.Output)
	if err != nil {
		return err
	}
	input, err := json.Marshal(r.Input)
	if err != nil {
		return err
	}
	var chain []byte
	if r.Chain != nil {
		if chain, err = json.Marshal(r.Chain); err != nil {
			return err
		}
	}
	parent := ""
	if p := r.Response.PreviousResponseID; p != nil {
		parent = *p
	}
	quota := ""
	if s.keyCount > 0 || s.keyBytes > 0 {
		quota = url.QueryEscape(r.Quota)
	}
	items, err := json.Marshal(itemIDs(r))
	if err != nil {
		return err
	}
	size := Size(r)
	keys := s.keys(r.Response.ID, r.Owner)
	args := s.args(parent, resp, output, input, chain, size, s.o.MaxResponses, s.o.MaxBytes, quota, s.keyCount, s.keyBytes, items)
	for range maxFullRounds {
		v, err := putScript.Run(ctx, s.c, keys, args...).Int64Slice()
		if err == nil && len(v) == 2 {
			s.evictedKey.Add(v[0])
			s.evictedGlobal.Add(v[1])
			return nil
		}
		if err == nil {
			return fmt.Errorf("store: redis put: answer %v, want two counts", v)
		}
		if !isOOM(err) {
			return wrap("put", err)
		}
		n, eerr := evictScript.Run(ctx, s.c, s.common, s.args(size)...).Int64()
		if eerr != nil {
			return wrap("evict", eerr)
		}
		if n == 0 {
			return wrap("put", fmt.Errorf("Redis is at its maxmemory with no stored response left to evict: %w", err))
		}
		s.evictedFull.Add(n)
	}
	return fmt.Errorf("store: redis put: still at maxmemory after %d rounds of eviction", maxFullRounds)
}

// isOOM reports whether err is Redis's refusal at maxmemory.
func isOOM(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// Get returns the stored response id of owner.
func (s *Redis) Get(ctx context.Context, id, owner string) (*Response, error) {
	v, err := s.fields(ctx, id, owner, "response", "output", "input", "chain")
	if err != nil {
		return nil, err
	}
	r := &Response{Owner: owner}
	if err := decode(v[0], &r.Response); err != nil {
		return nil, err
	}
	if err := decode(v[1], &r.Response.Output); err != nil {
		return nil, err
	}
	if err := decode(v[2], &r.Input); err != nil {
		return nil, err
	}
	if v[3] != nil {
		if err := decode(v[3], &r.Chain); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// fields returns hash fields of the response key (nil for an absent field), touching it.
func (s *Redis) fields(ctx context.Context, id, owner string, fields ...string) ([]any, error) {
	args := s.args()
	for _, f := range fields {
		args = append(args, f)
	}
	v, err := getScript.Run(ctx, s.c, s.keys(id, owner), args...).Slice()
	if err != nil {
		return nil, wrap("get", err)
	}
	if len(v) != len(fields) {
		return nil, fmt.Errorf("store: redis get: %d fields, want %d", len(v), len(fields))
	}
	return v, nil
}

// Delete removes the stored response id of owner.
func (s *Redis) Delete(ctx context.Context, id, owner string) error {
	n, err := deleteScript.Run(ctx, s.c, s.keys(id, owner), s.args()...).Int()
	if err != nil {
		return wrap("delete", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// InputItems returns one page of the input items of id (the items are paginated here).
func (s *Redis) InputItems(ctx context.Context, id, owner string, p Page) (ItemList, error) {
	v, err := s.fields(ctx, id, owner, "input")
	if err != nil {
		return ItemList{}, err
	}
	var items []protocol.Item
	if err := decode(v[0], &items); err != nil {
		return ItemList{}, err
	}
	return paginate(items, p)
}

// Chain returns the items of the chain ending at id: one script walks the parent pointers.
// A missing response of the chain is a *MissingError naming it.
func (s *Redis) Chain(ctx context.Context, id, owner string) ([]protocol.Item, error) {
	v, err := chainScript.Run(ctx, s.c, s.common, s.args(s.ownerPrefix(owner), id, MaxChainLinks)...).Slice()
	if err != nil {
		return nil, wrap("chain", err)
	}
	if len(v) == 0 || (len(v)-1)%3 != 0 {
		return nil, fmt.Errorf("store: redis chain: answer of %d values", len(v))
	}
	if missing, _ := v[0].(string); missing != "" {
		return nil, &MissingError{ID: missing}
	}
	links := make([]link, 0, len(v)/3)
	for i := 1; i+2 < len(v); i += 3 {
		var l link
		if c, _ := v[i+2].(string); c != "" {
			if err := decode(c, &l.chain); err != nil {
				return nil, err
			}
			if l.chain == nil {
				l.chain = []protocol.Item{}
			}
		} else if err := errors.Join(decode(v[i], &l.input), decode(v[i+1], &l.output)); err != nil {
			return nil, err
		}
		links = append(links, l)
	}
	return assemble(links), nil
}

// Close closes the connection pool.
func (s *Redis) Close() error {
	err := s.c.Close()
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}

func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return ErrNotFound
	}
	return fmt.Errorf("store: redis %s: %w", op, err)
}

// decode unmarshals a JSON field returned by a script.
func decode(v any, dst any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("store: redis: corrupt record (field is %T)", v)
	}
	if err := json.Unmarshal([]byte(s), dst); err != nil {
		return fmt.Errorf("store: redis: corrupt record: %w", err)
	}
	return nil
}

// LogRedisTo sends go-redis's own log lines (dial retries, pool events: one process-wide
// logger) to log at debug level; Guard already logs each store failure at warn.
func LogRedisTo(log *slog.Logger) { redis.SetLogger(redisLogger{log}) }

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
