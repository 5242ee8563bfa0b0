package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
)

// notReady says why the proxy should get no traffic now; "" when it is ready.
func (s *Server) notReady() string {
	switch {
	case s.draining.Load():
		return "draining"
	case s.cfg.Load() == nil:
		return "no routing config loaded"
	case s.auditHeld():
		return "the audit log cannot be written (--audit-required)"
	}
	return ""
}

// AdminHandler serves /healthz, /readyz, /metrics and the admin API on the admin port.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := s.notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	// One implementation of the encoding (compact, gzip, ?since deltas) for proxies and tests.
	mux.Handle("GET "+adminapi.ChannelsPath, &adminapi.ChannelsHandler{State: s.ChannelsState})
	mux.Handle("GET "+adminapi.ConfigPath, &adminapi.ConfigHandler{State: func() adminapi.ConfigState {
		s.loadMu.Lock()
		defer s.loadMu.Unlock()
		return s.load
	}})
	mux.HandleFunc("GET "+adminapi.EventsPath, func(w http.ResponseWriter, r *http.Request) {
		var since uint64
		if v := r.URL.Query().Get("since"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				http.Error(w, "since must be an event sequence number", http.StatusBadRequest)
				return
			}
			since = n
		}
		adminapi.WriteJSON(w, r, s.EventsSince(since))
	})
	return mux
}

// ChannelsState is the document served at /admin/v1/channels.
func (s *Server) ChannelsState() adminapi.ChannelsResponse {
	now := s.clock.Now()
	out := adminapi.ChannelsResponse{Replica: s.opts.Replica, BootID: s.bootID, Now: now.UTC(), Channels: []adminapi.ChannelState{}}
	s.loadMu.Lock()
	out.Config = s.load
	s.loadMu.Unlock()
	c := s.cfg.Load()
	out.ClientAuth, out.Clients = s.clients.admin(c, now)
	out.Rollouts = s.rolloutsState(c)
	out.Fleet = s.fleetLink()
	for _, st := range s.engine.Status(now) {
		cs := adminapi.ChannelState{
			Channel: st.Channel, Model: st.Model, Phase: st.Phase.String(), HealthScore: st.Score,
			TrafficPercent: st.TrafficPercent, WindowRequests: st.WindowRequests, WindowFailures: st.WindowFailures,
			ErrorRatePercent: st.ErrorRatePercent, P95LatencyMillis: st.P95.Milliseconds(), Ejections: st.Ejections, Panic: st.Panic,
			CooldownUntil: optTime(st.CooldownUntil), RetryAfterUntil: optTime(st.RetryAfterUntil),
		}
		if c != nil {
			if ch := c.channels[st.Channel]; ch != nil {
				cs.Provider = ch.Provider
			}
		}
		if st.DryRun {
			cs.DryRun = &adminapi.DryRunState{Phase: st.DryRunPhase.String(), HealthScore: st.DryRunScore,
				WindowRequests: st.DryRunWindowRequests, WindowFailures: st.DryRunWindowFailures}
			if st.DryRunReason != "" {
				cs.DryRun.LastTransition = &adminapi.Transition{Time: st.DryRunLastTransition.UTC(), Reason: st.DryRunReason, Message: st.DryRunMessage}
			}
		}
		cs.Fleet = s.fleetKeyState(st.Key)
		if !st.LastTransition.IsZero() {
			cs.LastTransition = &adminapi.Transition{Time: st.LastTransition.UTC(), Reason: st.Reason, Message: st.Message}
		}
		out.Channels = append(out.Channels, cs)
	}
	return out
}

// EventsSince is the document served at /admin/v1/events.
func (s *Server) EventsSince(since uint64) adminapi.EventsResponse {
	out := adminapi.EventsResponse{Replica: s.opts.Replica, BootID: s.bootID, Events: []adminapi.Event{}}
	for _, ev := range s.engine.Events(since) {
		out.Events = append(out.Events, toAdminEvent(ev))
	}
	return out
}

func toAdminEvent(ev health.Event) adminapi.Event {
	return adminapi.Event{Seq: ev.Seq, Time: ev.At.UTC(), Channel: ev.Channel, Model: ev.Model, From: ev.From.String(),
		To: ev.To.String(), Reason: ev.Reason, Message: ev.Message, Actor: ev.Actor}
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "req_" + hex.EncodeToString(b)
}
