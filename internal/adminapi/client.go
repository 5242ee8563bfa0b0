package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unique"
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

// ChannelsSince is GET ChannelsPath?since=cursor: the changes after cursor, or the full view
// when cursor is "" or unknown to the replica (see ChannelsResponse.Delta). Proxies that
// predate cursors ignore it and answer the full view.
func (c *Client) ChannelsSince(ctx context.Context, cursor string) (*ChannelsResponse, error) {
	var out ChannelsResponse
	return &out, c.get(ctx, ChannelsPath+"?since="+url.QueryEscape(cursor), &out)
}

// ErrNotServed is a path the replica does not serve (a proxy older than the path).
var ErrNotServed = errors.New("not served by this proxy version")

// Config is GET ConfigPath with If-None-Match: etag. It returns nil and the same etag when the
// config did not change (304), ErrNotServed from a proxy without the endpoint.
func (c *Client) Config(ctx context.Context, etag string) (*ConfigState, string, error) {
	u := strings.TrimRight(c.BaseURL, "/") + ConfigPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, etag, nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", fmt.Errorf("GET %s: %w", u, ErrNotServed)
	case http.StatusOK:
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var out ConfigState
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(&out); err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", u, err)
	}
	return &out, resp.Header.Get("ETag"), nil
}

// Events is GET EventsPath?since=since.
func (c *Client) Events(ctx context.Context, since uint64) (*EventsResponse, error) {
	var out EventsResponse
	return &out, c.get(ctx, EventsPath+"?since="+strconv.FormatUint(since, 10), &out)
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

func (c *Client) get(ctx context.Context, path string, into any) error {
	u := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(into); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
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

// ChannelsView is one replica's channel×models kept current from its answers: a full view
// replaces it, a delta is merged in. It holds the states sorted by key, with no index beside
// them, and interns names, so a controller that keeps the views of hundreds of replicas holds
// each channel's and model's name once.
type ChannelsView = View[ChannelState]

// View is ChannelsView holding what Keep makes of each state (the controller keeps only what
// it aggregates: a fifth of a ChannelState per replica × key). The zero View[ChannelState]
// keeps the states as they are.
type View[T any] struct {
	// Keep makes what the view holds of a state, its names interned already; Key names it back.
	Keep func(ChannelState) T
	Key  func(*T) ChannelKey

	cursor string
	states []T
}

// Cursor is where the view stands, to ask for the next delta with ("" before the first answer).
func (v *View[T]) Cursor() string { return v.cursor }

// Channels are the replica's states as merged, sorted by channel and model. The slice is the
// view's: read it, do not keep it across Apply.
func (v *View[T]) Channels() []T { return v.states }

func (v *View[T]) key(t *T) ChannelKey {
	if v.Key == nil {
		s := any(t).(*ChannelState)
		return ChannelKey{s.Channel, s.Model}
	}
	return v.Key(t)
}

func (v *View[T]) keep(s ChannelState) T {
	if v.Keep == nil {
		return any(s).(T)
	}
	return v.Keep(s)
}

func compareKeys(a, b ChannelKey) int {
	if c := strings.Compare(a.Channel, b.Channel); c != 0 {
		return c
	}
	return strings.Compare(a.Model, b.Model)
}

func (v *View[T]) find(k ChannelKey) (int, bool) {
	return slices.BinarySearchFunc(v.states, k, func(t T, k ChannelKey) int { return compareKeys(v.key(&t), k) })
}

// Apply merges one answer.
func (v *View[T]) Apply(resp *ChannelsResponse) {
	v.cursor = resp.Cursor
	if !resp.Delta {
		clear(v.states)
		v.states = v.states[:0]
	}
	if len(resp.Removed) > 0 {
		gone := make(map[int]bool, len(resp.Removed))
		for _, k := range resp.Removed {
			if i, ok := v.find(k); ok {
				gone[i] = true
			}
		}
		kept := v.states[:0]
		for i, s := range v.states {
			if !gone[i] {
				kept = append(kept, s)
			}
		}
		clear(v.states[len(kept):])
		v.states = kept
	}
	added := false
	for _, s := range resp.Channels {
		s.Channel, s.Model = intern(s.Channel), intern(s.Model)
		s.Provider, s.Phase = intern(s.Provider), intern(s.Phase)
		if resp.Delta {
			if i, ok := v.find(ChannelKey{s.Channel, s.Model}); ok {
				v.states[i] = v.keep(s)
				continue
			}
		}
		v.states = append(v.states, v.keep(s))
		added = true
	}
	if added {
		// A full view, or keys new in a delta: sort once. A key repeated (no replica sends one)
		// is kept once.
		cmp := func(a, b T) int { return compareKeys(v.key(&a), v.key(&b)) }
		slices.SortStableFunc(v.states, cmp)
		n := len(v.states)
		v.states = slices.CompactFunc(v.states, func(a, b T) bool { return cmp(a, b) == 0 })
		clear(v.states[len(v.states):n])
	}
}

// Intern returns the one copy of s that views share.
func Intern(s string) string { return intern(s) }

func intern(s string) string { return unique.Make(s).Value() }
