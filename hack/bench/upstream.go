package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The mock upstream is this same program started with upstreamMode as its first argument, so that
// the load generator, the upstream and the proxy are three processes and the proxy's CPU and memory
// can be read from /proc on their own. It answers as fast as net/http allows:
//
//   - POST .../chat/completions: a fixed small chat.completion JSON (about 300 bytes);
//     with "stream":true in the body, an event stream of X-Bench-Events chunks (default 32),
//     each flushed on its own, then data: [DONE]. The chunks go back to back, or with
//     X-Bench-Event-Gap (a Go duration, 0 to 100ms) one every gap from the first on, like a model
//     emitting tokens: chunk i is due i × gap after the first and [DONE] follows the last at once.
//     Each chunk's id carries the Unix time in ns at which it was written (chatcmpl-bench-<ns>),
//     so the client can time its transit.
//   - paths under /fo-a/ answer 503 when the request carries X-Bench-Fail (failover cost);
//   - paths under /eject-a/ answer 503 from POST /_bench/eject-fail on (ejection time);
//     the answer is the Unix time in ns at which the failing began.
//   - GET /_bench/stats: how many 503s each failing path has served.
const upstreamMode = "__upstream"

const (
	failHeader   = "X-Bench-Fail"
	eventsHeader = "X-Bench-Events"
	gapHeader    = "X-Bench-Event-Gap"
)

// maxEventGap bounds X-Bench-Event-Gap: 32 events 100 ms apart already make a 3-second stream.
const maxEventGap = 100 * time.Millisecond

// parseEventGap reads X-Bench-Event-Gap: empty is 0 (back to back); anything else must be a Go
// duration from 0 to maxEventGap, or the upstream answers 400 rather than measure something else.
func parseEventGap(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration", gapHeader, v)
	}
	if d < 0 || d > maxEventGap {
		return 0, fmt.Errorf("%s: %s is outside 0 to %s", gapHeader, d, maxEventGap)
	}
	return d, nil
}

var fixedBody = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the bench upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`)

var errorBody = []byte(`{"error":{"message":"bench upstream: injected failure","type":"server_error","param":null,"code":"bench_injected"}}`)

// A chunk is eventHead, the Unix time in ns at which it was written, then chunkTail (or lastTail
// for the last one, which finishes the answer and carries the usage).
const (
	stampID   = "chatcmpl-bench-"
	eventHead = `data: {"id":"` + stampID
	chunkTail = `","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"token "},"finish_reason":null}]}` + "\n\n"
	lastTail  = `","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":32,"total_tokens":44}}` + "\n\n"
	doneEvent = "data: [DONE]\n\n"
)

// appendChunk appends one stream chunk stamped with now.
func appendChunk(b []byte, now time.Time, last bool) []byte {
	b = append(b, eventHead...)
	b = strconv.AppendInt(b, now.UnixNano(), 10)
	if last {
		return append(b, lastTail...)
	}
	return append(b, chunkTail...)
}

type upstream struct {
	ejectFailing atomic.Bool
	ejectSince   atomic.Int64
	fo503        atomic.Int64
	eject503     atomic.Int64
	bufs         sync.Pool
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if strings.HasPrefix(path, "/_bench/") {
		u.control(w, r)
		return
	}
	buf, _ := u.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	_, _ = io.Copy(buf, io.LimitReader(r.Body, 1<<20))
	stream := bytes.Contains(buf.Bytes(), []byte(`"stream":true`))
	u.bufs.Put(buf)

	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	switch {
	case strings.HasPrefix(path, "/fo-a/") && r.Header.Get(failHeader) != "":
		u.fo503.Add(1)
		u.fail(w)
		return
	case strings.HasPrefix(path, "/eject-a/") && u.ejectFailing.Load():
		u.eject503.Add(1)
		u.fail(w)
		return
	}
	if !stream {
		h["Content-Length"] = []string{strconv.Itoa(len(fixedBody))}
		_, _ = w.Write(fixedBody)
		return
	}
	n := 32
	if v, err := strconv.Atoi(r.Header.Get(eventsHeader)); err == nil && v >= 1 && v <= 10000 {
		n = v
	}
	gap, err := parseEventGap(r.Header.Get(gapHeader))
	if err != nil {
		h["Content-Type"] = []string{"text/plain; charset=utf-8"}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, err.Error()+"\n")
		return
	}
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	var timer *time.Timer
	if gap > 0 {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	ev := make([]byte, 0, len(eventHead)+20+len(lastTail))
	var first time.Time
	for i := range n {
		// On a schedule from the first chunk, so that a late wake-up does not delay the rest.
		if i > 0 && gap > 0 {
			if wait := time.Until(first.Add(time.Duration(i) * gap)); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-r.Context().Done():
					return
				}
			}
		}
		now := time.Now()
		if i == 0 {
			first = now
		}
		ev = appendChunk(ev[:0], now, i == n-1)
		if _, err := w.Write(ev); err != nil {
			return
		}
		f.Flush()
	}
	_, _ = io.WriteString(w, doneEvent)
	f.Flush()
}

func (u *upstream) fail(w http.ResponseWriter) {
	w.Header()["Content-Length"] = []string{strconv.Itoa(len(errorBody))}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(errorBody)
}

func (u *upstream) control(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_bench/eject-fail":
		now := time.Now().UnixNano()
		if u.ejectFailing.CompareAndSwap(false, true) {
			u.ejectSince.Store(now)
		}
		fmt.Fprintf(w, "%d\n", u.ejectSince.Load())
	case "/_bench/eject-ok":
		u.ejectFailing.Store(false)
		fmt.Fprintln(w, "ok")
	case "/_bench/stats":
		fmt.Fprintf(w, "%d %d\n", u.fo503.Load(), u.eject503.Load())
	default:
		http.NotFound(w, r)
	}
}

// runUpstream serves the mock upstream until SIGTERM/SIGINT or until stdin closes (so it never
// outlives the bench), printing "LISTEN host:port" on stdout once it accepts connections.
func runUpstream(args []string) error {
	fs := flag.NewFlagSet(upstreamMode, flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	return serveChild(ln, &upstream{})
}

// serveChild serves h on ln until SIGTERM/SIGINT or until stdin closes: a child of the bench
// never outlives it.
func serveChild(ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent holds our stdin: EOF means it is gone
		stop()
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
