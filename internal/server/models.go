package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// ModelInfo is one model of GET /v1/models, in the shape of OpenAI's Model object
// (reference: GET /v1/models).
type ModelInfo struct {
	// ID is the name a request's "model" field uses.
	ID string `json:"id"`
	// Object is always "model".
	Object string `json:"object"`
	// Created is the model's creation time in Unix seconds (0 when unknown).
	Created int64 `json:"created"`
	// OwnedBy names the model's owner.
	OwnedBy string `json:"owned_by"`
}

// SimModels is the list GET /v1/models answers for the sim model: one model, "sim". The sim
// itself answers every model name; clients that check the list find "sim" in it.
var SimModels = []ModelInfo{{ID: "sim", Object: "model", Created: 0, OwnedBy: "tether"}}

// models returns the server's model list: Options.Models, else the backend's
// (sampler.Lister), else SimModels.
func (s *Server) models(ctx context.Context) ([]ModelInfo, error) {
	if s.opts.Models != nil {
		return s.opts.Models, nil
	}
	l, ok := s.opts.Model.(sampler.Lister)
	if !ok {
		return SimModels, nil
	}
	ids, err := l.Models(ctx)
	if err != nil {
		return nil, err
	}
	list := make([]ModelInfo, len(ids))
	for i, id := range ids {
		list[i] = ModelInfo{ID: id, Object: "model", OwnedBy: "tether"}
	}
	return list, nil
}

// listModels answers GET /v1/models: {"object":"list","data":[Model…]}.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, _ string) {
	list, err := s.models(r.Context())
	if err != nil {
		writeHTTPError(w, modelsError(err))
		return
	}
	writeModelsJSON(w, struct {
		Object string      `json:"object"`
		Data   []ModelInfo `json:"data"`
	}{"list", list})
}

// modelsError answers a backend that could not list its models: 502, naming the cause.
func modelsError(err error) *protocol.Error {
	return protocol.Errorf(http.StatusBadGateway, protocol.CodeServerError, "", "The model backend could not list its models: %v", err)
}

// getModel answers GET /v1/models/{model}: the Model object, or 404 model_not_found.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("model")
	if perr := protocol.CheckModelName(id); perr != nil {
		writeHTTPError(w, perr)
		return
	}
	list, err := s.models(r.Context())
	if err != nil {
		writeHTTPError(w, modelsError(err))
		return
	}
	for _, m := range list {
		if m.ID == id {
			writeModelsJSON(w, m)
			return
		}
	}
	writeHTTPError(w, protocol.Errorf(http.StatusNotFound, protocol.CodeModelNotFound, "model",
		"The model '%s' does not exist on this server (GET /v1/models lists them).", id))
}

func writeModelsJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeHTTPError(w, protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "Could not encode the model list."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
