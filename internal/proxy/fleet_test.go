package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/switchyard-io/switchyard/internal/fleet"
)

// fleetOpts connects a rig's proxy to the fleet store at addr as replica.
func fleetOpts(t *testing.T, addr, replica string) func(*Options) {
	return func(o *Options) {
		ep, err := fleet.ParseURL("redis://"+addr, "")
		if err != nil {
			t.Fatal(err)
		}
		st := fleet.NewStore(ep, fleet.Settings{Name: "test", Replica: replica})
		t.Cleanup(func() { st.Close() })
		o.Replica = replica
		o.Fleet = &FleetOptions{Store: st, Name: "test", LocalAfter: time.Second}
	}
}

// TestClientLimitsUseFleetTotals: with a fleet store, a client's per-minute limit is the whole
// limit against every replica's use, so uneven traffic gets all of it and no more; when the store
// is lost, each replica enforces its share again.
func TestClientLimitsUseFleetTotals(t *testing.T) {
	m := miniredis.RunT(t)
	a := newRigOpts(t, rigConfig{}, fleetOpts(t, m.Addr(), "a"))
	a.writeClients(clientsManifest("one: "+clientKeyOne, "limits: {requestsPerMinute: 10}"))
	tbl := *a.srv.cfg.Load().table
	tbl.ProxyReplicas = 2
	a.srv.Apply(&tbl, "test")
	bo := Options{Clock: a.clock}
	fleetOpts(t, m.Addr(), "b")(&bo)
	b := New(bo)
	b.Apply(&tbl, "test")
	apiB := httptest.NewServer(b.Handler())
	defer apiB.Close()
	ctx := context.Background()
	send := func(url string, n int) (ok int) {
		for range n {
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(chat("gpt-4o", false)))
			req.Header.Set("Authorization", "Bearer "+clientKeyOne)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok++
			}
		}
		return ok
	}
	if !a.srv.FleetStep(ctx) || !b.FleetStep(ctx) {
		t.Fatal("the replicas did not join the fleet store")
	}
	if got := send(a.api.URL, 12); got != 10 {
		t.Fatalf("replica a admitted %d of 12, want the whole limit of 10 (its share would be 5)", got)
	}
	a.srv.FleetStep(ctx)
	b.FleetStep(ctx)
	if got := send(apiB.URL, 3); got != 0 {
		t.Fatalf("replica b admitted %d after the fleet used the limit", got)
	}
	// The store goes: after LocalAfter each replica is back to its share (5 a minute).
	m.SetError("down")
	for range 3 {
		a.clock.Advance(600 * time.Millisecond)
		b.FleetStep(ctx)
	}
	if got := send(apiB.URL, 8); got != 5 {
		t.Fatalf("in local mode replica b admitted %d, want its share of 5", got)
	}
	doc := a.adminDoc()
	if f, _ := doc["fleet"].(map[string]any); f == nil || f["connected"] != true || f["name"] != "test" {
		t.Errorf("replica a's fleet link: %v", doc["fleet"])
	}
	if l := b.ChannelsState().Fleet; l == nil || l.Connected || !strings.Contains(l.Reason, "down") {
		t.Errorf("replica b's fleet link in local mode: %+v", l)
	}
}
