package responses

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Models implements sampler.Lister: the upstream's GET /v1/models (its HTTP base derived from
// the WebSocket URL: ws → http, wss → https, without "/responses"), with the API key, within
// Options.Timeout. GET /v1/models of this server then lists the models the upstream serves.
func (m *Model) Models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, modelsURL(m.url), nil)
	if err != nil {
		return nil, err
	}
	if m.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.opts.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("upstream GET /models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("upstream GET /models: HTTP %d", resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("upstream GET /models: %v", err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	return ids, nil
}

// modelsURL derives the upstream's model list URL from its WebSocket URL.
func modelsURL(wsURL string) string {
	u := "http" + strings.TrimPrefix(wsURL, "ws")
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), "/responses")
	return u + "/models"
}
