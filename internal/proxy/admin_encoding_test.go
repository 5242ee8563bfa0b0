package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// TestAdminServesDeltasAndConfig: the proxy's admin port serves the shared handlers: gzip when
// asked, a delta to a cursor it issued, and the config endpoint with an ETag answered 304.
func TestAdminServesDeltasAndConfig(t *testing.T) {
	r := newRig(t, rigConfig{})
	ctx := context.Background()
	c := adminapi.Client{BaseURL: r.admin.URL}
	full, err := c.ChannelsSince(ctx, "")
	if err != nil || full.Delta || full.Cursor == "" || len(full.Channels) == 0 || full.Config.Hash == "" {
		t.Fatalf("first read: %v, delta %v, cursor %q, %d channels, hash %q", err, full.Delta, full.Cursor, len(full.Channels), full.Config.Hash)
	}
	if d, err := c.ChannelsSince(ctx, full.Cursor); err != nil || !d.Delta || d.Config.Hash != "" {
		t.Fatalf("read since the cursor: %v, delta %v, config %+v", err, d.Delta, d.Config)
	}
	cfg, etag, err := c.Config(ctx, "")
	if err != nil || cfg == nil || cfg.Hash != full.Config.Hash || etag == "" {
		t.Fatalf("config: %+v %q %v", cfg, etag, err)
	}
	if again, _, err := c.Config(ctx, etag); err != nil || again != nil {
		t.Fatalf("config with its ETag: %+v %v, want 304", again, err)
	}
	req, _ := http.NewRequest(http.MethodGet, r.admin.URL+adminapi.ChannelsPath, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("Accept-Encoding: gzip answered %q", resp.Header.Get("Content-Encoding"))
	}
}
