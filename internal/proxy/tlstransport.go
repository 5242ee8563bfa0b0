package proxy

import (
	"net/http"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// transportFor is the transport of a channel's attempts: its own for a channel with spec.tls, the
// Server's otherwise. It reads the current config by ID: an attempt that started before a reload
// uses the channel's settings as they are now.
func (s *Server) transportFor(ch *routing.Channel) http.RoundTripper {
	if ch.TLS != nil {
		if c := s.cfg.Load(); c != nil {
			if rt := c.transports[ch.ID()]; rt != nil {
				return rt
			}
		}
	}
	return s.transport
}
