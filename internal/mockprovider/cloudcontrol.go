package mockprovider

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// CloudMock is the Bedrock or the Vertex mock.
type CloudMock interface {
	Mock
	SetBehavior(model string, b CloudBehavior)
	Counts() map[string]int
}

// CloudControl serves a cloud mock as a process does (switchyard mock-provider --wire bedrock|
// vertex), with the control endpoints the OpenAI mock has, so a demo or an e2e test steers it
// from outside:
//
//	GET  /_mock/stats      {"requests":{"<model id>":n}}
//	POST /_mock/behavior   {"model":"<model id>","behavior":{...},"stream_error":"<name>"}  ("" model: the default)
//
// Every other path is the cloud's API.
type CloudControl struct{ CloudMock }

func (c CloudControl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	what, ok := strings.CutPrefix(r.URL.Path, "/_mock/")
	if !ok {
		c.CloudMock.ServeHTTP(w, r)
		return
	}
	switch {
	case what == "stats" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"requests": c.Counts()})
	case what == "behavior" && r.Method == http.MethodPost:
		var u struct {
			Model       string   `json:"model"`
			Behavior    Behavior `json:"behavior"`
			StreamError string   `json:"stream_error"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&u); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "mockprovider: " + err.Error()})
			return
		}
		c.SetBehavior(u.Model, CloudBehavior{Behavior: u.Behavior, StreamError: u.StreamError})
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "mockprovider: unknown control endpoint " + r.URL.Path})
	}
}
