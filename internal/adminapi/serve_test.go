package adminapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeReplica serves ChannelsHandler and ConfigHandler over states the test sets.
type fakeReplica struct {
	mu     sync.Mutex
	states []ChannelState
	config ConfigState
}

func (f *fakeReplica) set(states []ChannelState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states = slices.Clone(states)
}

func (f *fakeReplica) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ChannelsPath, &ChannelsHandler{State: func() ChannelsResponse {
		f.mu.Lock()
		defer f.mu.Unlock()
		return ChannelsResponse{Replica: "r", BootID: "b", Config: f.config, Channels: slices.Clone(f.states)}
	}})
	mux.Handle(ConfigPath, &ConfigHandler{State: func() ConfigState {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.config
	}})
	return mux
}

func key(i int) ChannelState {
	return ChannelState{Channel: fmt.Sprintf("llm/c-%d", i), Model: "m", Phase: "Healthy", HealthScore: 100, TrafficPercent: 100}
}

// TestChannelsDelta: the first call is the full view; a cursor then brings only the keys that
// changed and those removed; an unknown cursor (another replica's, a restarted one's) brings
// the full view again, and the view merged from deltas is the replica's state at every step.
func TestChannelsDelta(t *testing.T) {
	f := &fakeReplica{config: ConfigState{Hash: "h1", Generations: map[string]int64{"ProviderChannel/llm/c-0": 1}}}
	var states []ChannelState
	for i := range 5 {
		states = append(states, key(i))
	}
	f.set(states)
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	c := Client{BaseURL: srv.URL}
	ctx := context.Background()

	first, err := c.ChannelsSince(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if first.Delta || len(first.Channels) != 5 || first.Cursor == "" || first.Config.Hash != "h1" {
		t.Fatalf("first call: delta %v, %d channels, cursor %q, config %+v; want the full view", first.Delta, len(first.Channels), first.Cursor, first.Config)
	}
	var view ChannelsView
	view.Apply(first)

	same, _ := c.ChannelsSince(ctx, first.Cursor)
	if !same.Delta || len(same.Channels) != 0 || len(same.Removed) != 0 || same.Cursor != first.Cursor || same.Config.Hash != "" {
		t.Fatalf("nothing changed: %+v", same)
	}

	states[2].Phase, states[2].TrafficPercent = "Ejected", 0
	states = slices.Delete(states, 4, 5)
	states = append(states, key(9))
	f.set(states)
	d, _ := c.ChannelsSince(ctx, view.Cursor())
	got := []string{}
	for _, s := range d.Channels {
		got = append(got, s.Channel)
	}
	if !d.Delta || !slices.Equal(got, []string{"llm/c-2", "llm/c-9"}) || !slices.Equal(d.Removed, []ChannelKey{{"llm/c-4", "m"}}) {
		t.Fatalf("delta: changed %v removed %v, want c-2 and c-9 changed, c-4 removed", got, d.Removed)
	}
	view.Apply(d)
	assertView(t, &view, states)

	for _, cursor := range []string{"someone-else.3", "garbage", first.Cursor[:strings.IndexByte(first.Cursor, '.')] + ".999"} {
		if r, _ := c.ChannelsSince(ctx, cursor); r.Delta || len(r.Channels) != len(states) {
			t.Errorf("cursor %q: delta %v with %d channels, want the full view", cursor, r.Delta, len(r.Channels))
		}
	}
	// A restarted replica has a new log: the old cursor is unknown to it.
	restarted := httptest.NewServer(f.handler())
	defer restarted.Close()
	if r, _ := (&Client{BaseURL: restarted.URL}).ChannelsSince(ctx, view.Cursor()); r.Delta {
		t.Errorf("a restarted replica answered a delta to the old cursor")
	}
}

// TestChannelsDeltaRandom: random changes, additions and removals; the view merged from the
// deltas equals the replica's full state after every step, and a second reader with its own
// cursor sees the same.
func TestChannelsDeltaRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	f := &fakeReplica{}
	var states []ChannelState
	for i := range 50 {
		states = append(states, key(i))
	}
	f.set(states)
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	c := Client{BaseURL: srv.URL}
	var fast, slow ChannelsView
	next := 50
	for step := range 200 {
		for range rng.IntN(6) {
			switch i := rng.IntN(len(states)); rng.IntN(3) {
			case 0:
				states[i].HealthScore = rng.IntN(101)
			case 1:
				states = slices.Delete(states, i, i+1)
			default:
				states = append(states, key(next))
				next++
			}
		}
		if len(states) == 0 {
			states = append(states, key(next))
			next++
		}
		f.set(states)
		r, err := c.ChannelsSince(context.Background(), fast.Cursor())
		if err != nil {
			t.Fatal(err)
		}
		fast.Apply(r)
		assertView(t, &fast, states)
		if step%7 == 0 {
			r, _ := c.ChannelsSince(context.Background(), slow.Cursor())
			slow.Apply(r)
			assertView(t, &slow, states)
		}
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
}

// TestChannelsDeltaRemovalsBounded: a cursor from before more removals than the log remembers
// gets the full view, not a delta that would miss some.
func TestChannelsDeltaRemovalsBounded(t *testing.T) {
	f := &fakeReplica{}
	var states []ChannelState
	for i := range MaxRemovals + 10 {
		states = append(states, key(i))
	}
	f.set(states)
	h := f.handler()
	get := func(cursor string) ChannelsResponse {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ChannelsPath+"?since="+cursor, nil))
		var out ChannelsResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	old := get("").Cursor
	f.set(states[:5])
	recent := get(old)
	if recent.Delta {
		t.Errorf("a cursor from before %d removals got a delta with %d removals", MaxRemovals+5, len(recent.Removed))
	}
	f.set(states[:4])
	if r := get(recent.Cursor); !r.Delta || !slices.Equal(r.Removed, []ChannelKey{{"llm/c-4", "m"}}) {
		t.Errorf("a recent cursor: delta %v, removed %v; want c-4", r.Delta, r.Removed)
	}
	if r := get(old); r.Delta {
		t.Errorf("the old cursor got a delta later")
	}
}

func assertView(t *testing.T, v *ChannelsView, want []ChannelState) {
	t.Helper()
	got := slices.Clone(v.Channels())
	less := func(a, b ChannelState) int { return strings.Compare(a.Channel+"|"+a.Model, b.Channel+"|"+b.Model) }
	slices.SortFunc(got, less)
	w := slices.Clone(want)
	slices.SortFunc(w, less)
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("merged view (-want +got):\n%s", diff)
	}
}

// TestWriteJSONEncoding: compact by default, indented with ?pretty, gzip when accepted.
func TestWriteJSONEncoding(t *testing.T) {
	f := &fakeReplica{}
	var states []ChannelState
	for i := range 100 {
		states = append(states, key(i))
	}
	f.set(states)
	h := f.handler()
	serve := func(target, acceptEncoding string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	compact := serve(ChannelsPath, "")
	if bytes.Contains(compact.Body.Bytes(), []byte("\n  ")) || compact.Header().Get("Content-Encoding") != "" {
		t.Errorf("default answer is not compact, uncompressed JSON")
	}
	pretty := serve(ChannelsPath+"?pretty", "")
	if !bytes.Contains(pretty.Body.Bytes(), []byte("\n  \"channels\"")) {
		t.Errorf("?pretty is not indented: %.80s", pretty.Body.String())
	}
	for _, ae := range []string{"gzip", "br, gzip;q=0.8", "deflate, GZIP"} {
		z := serve(ChannelsPath, ae)
		if z.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q: not gzipped", ae)
			continue
		}
		zr, err := gzip.NewReader(z.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		var doc ChannelsResponse
		if err := json.Unmarshal(plain, &doc); err != nil || len(doc.Channels) != 100 {
			t.Errorf("gzipped answer: %v, %d channels", err, len(doc.Channels))
		}
		if z.Body.Len()*4 > compact.Body.Len() {
			t.Errorf("gzip saved little: %d of %d bytes", z.Body.Len(), compact.Body.Len())
		}
	}
	for _, ae := range []string{"gzip;q=0", "br", "identity"} {
		if z := serve(ChannelsPath, ae); z.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: compressed anyway", ae)
		}
	}
}

// TestConfigETag: the config endpoint answers 304 while the config is the one the ETag names,
// and the new config once it changed.
func TestConfigETag(t *testing.T) {
	f := &fakeReplica{config: ConfigState{Hash: "h1", Generations: map[string]int64{"RoutingPolicy/llm/chat": 3}}}
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	c := Client{BaseURL: srv.URL}
	ctx := context.Background()
	cfg, etag, err := c.Config(ctx, "")
	if err != nil || cfg == nil || cfg.Hash != "h1" || cfg.Generations["RoutingPolicy/llm/chat"] != 3 || etag == "" {
		t.Fatalf("first read: %+v %q %v", cfg, etag, err)
	}
	if again, same, err := c.Config(ctx, etag); err != nil || again != nil || same != etag {
		t.Fatalf("unchanged config: %+v %q %v; want 304", again, same, err)
	}
	f.mu.Lock()
	f.config.Hash = "h2"
	f.mu.Unlock()
	if cfg, next, err := c.Config(ctx, etag); err != nil || cfg == nil || cfg.Hash != "h2" || next == etag {
		t.Fatalf("changed config: %+v %q %v", cfg, next, err)
	}
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	if _, _, err := (&Client{BaseURL: old.URL}).Config(ctx, ""); err == nil || !strings.Contains(err.Error(), ErrNotServed.Error()) {
		t.Errorf("a proxy without the endpoint: %v", err)
	}
}
