package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultTick is how often time-driven health transitions and probes run.
const DefaultTick = 250 * time.Millisecond

// ServeOptions are the listeners and timings of Serve.
type ServeOptions struct {
	API, Admin net.Listener // the OpenAI-compatible API and the admin port; Serve closes both
	// Drain is how long in-flight requests may take to finish once ctx is done.
	Drain time.Duration
	// Tick is the period of the background loop (Server.Run); 0 means DefaultTick.
	Tick time.Duration
}

// Serve runs srv the way `switchyard proxy` does: its background loop, the API server and the
// admin server, until ctx is done. Then it drains: /readyz fails, the API stops accepting, and
// in-flight requests get o.Drain to finish while the background loop (health, probes) and the
// admin port keep running, so a load balancer sees the replica leave and a scrape during the
// drain still answers. It returns nil after a drain that finished in time. The command, the
// benchmark harness and the demo's tests all serve through it, so they measure what ships.
func Serve(ctx context.Context, srv *Server, o ServeOptions) error {
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	go srv.Run(bg, o.Tick)
	go srv.runFleet(bg)

	api := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	admin := &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- api.Serve(o.API) }()
	go func() { errc <- admin.Serve(o.Admin) }()
	srv.log.Info("Serving", "api", o.API.Addr().String(), "admin", o.Admin.Addr().String())

	select {
	case err := <-errc:
		_ = api.Close()
		_ = admin.Close()
		return fmt.Errorf("server stopped: %w", err)
	case <-ctx.Done():
	}
	srv.log.Info("Shutting down: draining in-flight requests", "drainTimeout", o.Drain.String())
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), o.Drain)
	defer cancel()
	err := api.Shutdown(sctx)
	stopBG()
	_ = admin.Shutdown(sctx)
	if err != nil {
		_ = api.Close()
		_ = admin.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("drain did not finish within %s: %w", o.Drain, err)
		}
		return err
	}
	srv.log.Info("Stopped")
	return nil
}
