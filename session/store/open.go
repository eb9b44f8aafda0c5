package store

import (
	"context"
	"fmt"
	"strings"
)

// Open returns the store that url names (-store): "memory" (or "") for a Memory bounded by
// o.MaxResponses and o.MaxBytes, "redis://host:port/db" for a Redis (RedisOptions as given),
// which must answer within ctx (else a "cannot reach Redis" error).
func Open(ctx context.Context, url string, o RedisOptions) (Store, error) {
	switch {
	case url == "" || url == "memory":
		return NewMemory(o.MaxResponses, o.MaxBytes), nil
	case strings.HasPrefix(url, "redis://"), strings.HasPrefix(url, "rediss://"):
		return NewRedis(ctx, url, o)
	}
	return nil, fmt.Errorf("store: %q: want memory or redis://host:port/db", url)
}
