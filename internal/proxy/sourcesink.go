package proxy

import (
	"log/slog"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Serving is the table served now, nil before the first load (a config source isolates a bad
// object against it).
func (s *Server) Serving() *routing.Table {
	if c := s.cfg.Load(); c != nil {
		return c.table
	}
	return nil
}

// Logger is the proxy's logger; its config sources log there too.
func (s *Server) Logger() *slog.Logger { return s.log }
