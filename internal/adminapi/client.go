package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Client reads one proxy replica's admin API. The controller's poller and the demo use it.
type Client struct {
	HTTP *http.Client
	// BaseURL is the admin API root, e.g. http://10.0.0.7:9090.
	BaseURL string
}

// maxResponse bounds what one admin API answer may hold (5,000 channel×model states are a few MB).
const maxResponse = 64 << 20

// Channels is GET ChannelsPath.
func (c *Client) Channels(ctx context.Context) (*ChannelsResponse, error) {
	var out ChannelsResponse
	return &out, c.get(ctx, ChannelsPath, &out)
}

// Events is GET EventsPath?since=since.
func (c *Client) Events(ctx context.Context, since uint64) (*EventsResponse, error) {
	var out EventsResponse
	return &out, c.get(ctx, EventsPath+"?since="+strconv.FormatUint(since, 10), &out)
}

func (c *Client) get(ctx context.Context, path string, into any) error {
	url := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(into); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// Cursor follows one replica's journal across its restarts. A replica numbers its events from
// 1 at each start and says which start it is in (BootID): after a restart the cursor reads the
// new journal from the beginning, where a bare sequence number would skip its first events.
type Cursor struct {
	bootID string
	seq    uint64
}

// Since is the sequence number to read the journal from, given the BootID the replica reports
// now (on ChannelsResponse): 0 when it is not the boot the cursor has read.
func (c *Cursor) Since(bootID string) uint64 {
	if bootID != c.bootID {
		return 0
	}
	return c.seq
}

// Next takes an EventsResponse read from Since and returns the events not seen before, moving
// the cursor; restarted says the replica restarted since the cursor last moved (not on the
// first read).
func (c *Cursor) Next(ev *EventsResponse) (events []Event, restarted bool) {
	if ev.BootID != c.bootID {
		restarted = c.bootID != ""
		c.bootID, c.seq = ev.BootID, 0
	}
	for _, e := range ev.Events {
		if e.Seq > c.seq {
			c.seq = e.Seq
			events = append(events, e)
		}
	}
	return events, restarted
}

// BootID is the boot the cursor has read ("" before the first Next).
func (c *Cursor) BootID() string { return c.bootID }
