package demo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"
)

// Bounds on what writeFailedRequests prints: enough to say why, not a second log.
const (
	maxFailedShown = 10
	maxLinesShown  = 8
)

// writeFailedRequests lists the client requests that failed, each with what the proxy's access
// log says of its attempts (by X-Request-Id), so a client-visible error in the demo says which
// request it was and why. Nothing is written when every request succeeded.
func writeFailedRequests(w io.Writer, results []outcome, start time.Time, accessLog string) {
	var failed []outcome
	for _, o := range results {
		if !o.OK {
			failed = append(failed, o)
		}
	}
	if len(failed) == 0 {
		return
	}
	lines := accessLines(accessLog, failed)
	fmt.Fprintf(w, "\nFailed client requests (%d; the proxy's access log: %s)\n", len(failed), accessLog)
	for i, o := range failed {
		if i == maxFailedShown {
			fmt.Fprintf(w, "  ... and %d more\n", len(failed)-maxFailedShown)
			break
		}
		kind := "non-streamed"
		if o.Stream {
			kind = "streamed"
		}
		id := o.RequestID
		if id == "" {
			id = "(no X-Request-Id: the proxy did not answer)"
		}
		fmt.Fprintf(w, "  %s %s %s %s: %s after %s, request %s\n", fmtOffset(o.At.Sub(start)), o.Model, kind, o.Channel, o.Kind,
			o.Latency.Round(time.Millisecond), id)
		ls := lines[o.RequestID]
		if o.RequestID != "" && len(ls) == 0 {
			fmt.Fprintf(w, "    (no attempt in the access log: the proxy answered without calling a provider)\n")
		}
		for j, l := range ls {
			if j == maxLinesShown {
				fmt.Fprintf(w, "    ... %d more attempts\n", len(ls)-maxLinesShown)
				break
			}
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// accessLines reads the access log's lines of the failed requests, by request id.
func accessLines(path string, failed []outcome) map[string][]string {
	want := map[string]bool{}
	for _, o := range failed {
		if o.RequestID != "" {
			want[o.RequestID] = true
		}
	}
	out := map[string][]string{}
	f, err := os.Open(path)
	if err != nil || len(want) == 0 {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	key := []byte(`"requestId":"`)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.Index(line, key)
		if i < 0 {
			continue
		}
		rest := line[i+len(key):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 || !want[string(rest[:end])] {
			continue
		}
		out[string(rest[:end])] = append(out[string(rest[:end])], string(line))
	}
	return out
}

// fmtOffset is a time since the demo began as the journal shows it (m:ss.s).
func fmtOffset(d time.Duration) string {
	d = max(d, 0)
	return fmt.Sprintf("%d:%04.1f", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
}
