package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// startProbes sends one realistic request to every channel×model the engine says is due for a
// probe, with the channel's real timeouts, and reports the verdict to the engine.
func (s *Server) startProbes(ctx context.Context, now time.Time) {
	c := s.cfg.Load()
	if c == nil {
		return
	}
	for _, k := range s.engine.ProbesDue(now, nil) {
		ch := c.channels[k.Channel]
		if ch == nil {
			continue
		}
		upstream, ok := ch.Upstream(k.Model)
		if !ok {
			continue
		}
		seen, _ := s.apiPaths.Load(k)
		path, _ := seen.(string)
		path, body := probeRequest(path, upstream)
		a := &attempt{channel: ch, adapter: c.adapters[ch.ID()], model: k.Model, upstream: upstream, path: path, body: body,
			timeout: ch.Timeouts.Request, header: http.Header{}, requestID: "probe-" + newRequestID(), number: 1, probe: true, redact: c.redact}
		s.probeWG.Add(1)
		go func(k health.Key) {
			defer s.probeWG.Done()
			s.do(ctx, discard{}, a)
		}(k)
	}
}

// probeRequest is the smallest request that looks like real traffic for the model, on the API
// path real traffic used (path is "" before any): a one-token answer, or an embedding.
func probeRequest(path, upstream string) (string, []byte) {
	m := `{"model":` + quote(upstream)
	if path == "" {
		path = "/chat/completions"
		if strings.Contains(upstream, "embedding") {
			path = "/embeddings"
		}
	}
	switch path {
	case "/embeddings":
		return path, []byte(m + `,"input":"ping"}`)
	case "/completions":
		return path, []byte(m + `,"prompt":"ping","max_tokens":1}`)
	case "/responses":
		return path, []byte(m + `,"input":"ping","max_output_tokens":16}`)
	default:
		return "/chat/completions", []byte(m + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(" ")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// discard is the ResponseWriter of a probe: the answer only matters to the health engine.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
func (discard) Flush()                      {}
