package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// The broken-stream scene, played once the traffic has stopped: one streamed answer is cut
// halfway on the channel that serves it, and the proxy finishes it on another (stream recovery,
// docs/streams.md). The client reads one stream; the scene checks it is byte for byte the answer
// the same request gets unbroken, and shows how the proxy finished it (its own
// switchyard_stream_continuations_total) and the client-visible gap at the seam.

// brokenStreamText is the scene's answer; its pieces are cut at character boundaries, so the
// multi-byte dash travels whole.
const brokenStreamText = "A stream cut halfway is finished on another channel: every byte once, in order — none lost, none repeated."

// brokenStreamPiece is the size of the answer's chunks, in bytes (at most; a character is never split).
const brokenStreamPiece = 8

// brokenStreamChunkDelay paces the scene's chunks like a model's tokens, so the seam's gap can be
// told from the gaps of an unbroken stream.
const brokenStreamChunkDelay = 20 * time.Millisecond

// BrokenStream is what the scene saw.
type BrokenStream struct {
	Model    string
	Cut      string // the channel whose stream was cut
	Finisher string // the channel the continuation or regeneration ran on ("" if the proxy did not say)
	Result   string // continued or spliced: how the proxy finished it (its metric); "" if it did not
	Sent     int    // bytes the client had when the stream was cut
	Total    int    // bytes of the whole answer
	Got      string // the text the client read
	Unbroken string // the text of the same request, unbroken
	Complete bool   // the stream ended as a complete answer (no in-band error)
	Seam     time.Duration
}

// OK: the client read the unbroken answer, whole, in one stream.
func (b BrokenStream) OK() bool { return b.Complete && b.Got == b.Unbroken && b.Result != "" }

func (b BrokenStream) render(w io.Writer) {
	fmt.Fprintf(w, "\nBroken stream (after the traffic stopped): one streamed %s answer, cut on %s after %d of its %d bytes\n", b.Model, b.Cut, b.Sent, b.Total)
	if !b.OK() {
		fmt.Fprintf(w, "  NOT recovered: the client read %q (complete %v, proxy's result %q); unbroken: %q\n", b.Got, b.Complete, b.Result, b.Unbroken)
		return
	}
	how := "continued with the text sent as the assistant prefill"
	if b.Result == "spliced" {
		how = "regenerated and spliced (no prefill-capable channel; the request is deterministic, temperature 0, and the new answer began with the bytes sent)"
	}
	fmt.Fprintf(w, "  finished on %s: %s (switchyard_stream_continuations_total{result=%q})\n", b.Finisher, how, b.Result)
	gap := fmt.Sprintf("%s from the cut to the next chunk (an unbroken stream's chunks: every %s", b.Seam.Round(100*time.Microsecond), brokenStreamChunkDelay)
	fmt.Fprintf(w, "  the client read one stream of %d bytes, byte for byte the unbroken answer; %s)\n", len(b.Got), gap)
}

// runePieces cuts s into pieces of at most n bytes at character boundaries, as "3,7,12" splits.
func runePieces(s string, n int) (splits []int) {
	last := 0
	prev := 0
	for i := range s {
		if i-last > n && prev > last {
			splits = append(splits, prev)
			last = prev
		}
		prev = i
	}
	if len(s)-last > n && prev > last {
		splits = append(splits, prev)
	}
	return splits
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// brokenStream plays the scene on the first model of the failing channel.
func (m *monitor) brokenStream(ctx context.Context, apiBase string) (BrokenStream, error) {
	out := BrokenStream{Model: m.mk.Models[0], Total: len(brokenStreamText)}
	var serving []string
	for _, ch := range m.st.Table.Channels {
		if _, ok := ch.Upstream(out.Model); ok {
			serving = append(serving, ch.Name)
		}
	}
	if len(serving) < 2 {
		return out, fmt.Errorf("model %s has %d channel(s): a broken stream needs another to finish on", out.Model, len(serving))
	}
	splits := runePieces(brokenStreamText, brokenStreamPiece)
	set := func(channel string, b *mockprovider.Behavior) error {
		up, _ := m.st.channel(channel).Upstream(out.Model)
		return setBehavior(ctx, m.hc, mockBase(m.st, channel), up, b)
	}
	defer func() {
		for _, ch := range serving {
			_ = set(ch, nil) // back to the mock's default
		}
	}()
	// Every channel answers the scene's text in chunks for the unbroken answer. For the broken one,
	// the others continue a prefill when they get one (or answer whole), in one chunk: the mock
	// cuts its pieces at byte offsets of the whole text, which in the rest after a prefill would
	// fall inside the dash.
	answer := mockprovider.Behavior{Mode: mockprovider.ModeContinue, Text: brokenStreamText, Splits: joinInts(splits), ChunkDelay: brokenStreamChunkDelay}
	rest := mockprovider.Behavior{Mode: mockprovider.ModeContinue, Text: brokenStreamText}
	for _, ch := range serving {
		if err := set(ch, &answer); err != nil {
			return out, err
		}
	}
	body := fmt.Sprintf(`{"model":%q,"stream":true,"temperature":0,"messages":[{"role":"user","content":"Tell me about broken streams."}]}`, out.Model)
	unbroken, err := m.streamOnce(ctx, apiBase, body)
	if err != nil {
		return out, fmt.Errorf("the unbroken answer: %w", err)
	}
	out.Unbroken, out.Cut = unbroken.text, unbroken.channel
	if !unbroken.complete || out.Cut == "" {
		return out, fmt.Errorf("the unbroken answer did not complete (%q via %q)", unbroken.text, unbroken.channel)
	}
	// Cut the stream of the channel that answered, halfway.
	after := len(splits) / 2
	out.Sent = splits[after-1]
	cut := answer
	cut.Mode, cut.After = mockprovider.ModeCut, after
	if err := set(out.Cut, &cut); err != nil {
		return out, err
	}
	for _, ch := range serving {
		if ch != out.Cut {
			if err := set(ch, &rest); err != nil {
				return out, err
			}
		}
	}
	before, err := m.scrape(ctx)
	if err != nil {
		return out, err
	}
	got, err := m.streamOnce(ctx, apiBase, body)
	if err != nil {
		return out, fmt.Errorf("the broken answer: %w", err)
	}
	out.Got, out.Complete = got.text, got.complete
	out.Seam = got.gapAfter(out.Sent)
	after2, err := m.scrape(ctx)
	if err != nil {
		return out, err
	}
	// How the proxy finished it, and where: its recoveries by result, its successful attempts by
	// channel.
	results := func(mt Metrics) map[string]float64 {
		return mt.SumBy("switchyard_stream_continuations_total", map[string]string{"model": out.Model}, "result")
	}
	wins := func(mt Metrics) map[string]float64 {
		return mt.SumBy("switchyard_upstream_attempts_total", map[string]string{"model": out.Model, "outcome": "success"}, "channel")
	}
	for result, n := range results(after2) {
		if n > results(before)[result] && (result == "continued" || result == "spliced") {
			out.Result = result
		}
	}
	for ch, n := range wins(after2) {
		if n > wins(before)[ch] {
			out.Finisher = ch
		}
	}
	return out, nil
}

// scrape reads the proxy's metrics.
func (m *monitor) scrape(ctx context.Context) (Metrics, error) {
	b, err := get(ctx, m.hc, m.admin+"/metrics")
	if err != nil {
		return nil, err
	}
	return ParseMetrics(bytes.NewReader(b))
}

// clientStream is a streamed chat answer as a client read it: its text, when each text chunk
// arrived (with the bytes read by then), and whether it completed.
type clientStream struct {
	text     string
	channel  string
	complete bool
	at       []time.Time
	upto     []int
}

// gapAfter is the time from the chunk that brought the client to n bytes to the next chunk.
func (c clientStream) gapAfter(n int) time.Duration {
	for i := range c.upto {
		if c.upto[i] >= n && i+1 < len(c.at) {
			return c.at[i+1].Sub(c.at[i])
		}
	}
	return 0
}

func (m *monitor) streamOnce(ctx context.Context, apiBase, body string) (clientStream, error) {
	var out clientStream
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiBase+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return out, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	out.channel = resp.Header.Get("X-Switchyard-Channel")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 16<<10), 1<<20)
	var text strings.Builder
	errored := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			out.complete = !errored
			continue
		}
		var ev struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			errored = true
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" {
				text.WriteString(c.Delta.Content)
				out.at, out.upto = append(out.at, time.Now()), append(out.upto, text.Len())
			}
		}
	}
	out.text = text.String()
	return out, sc.Err()
}
