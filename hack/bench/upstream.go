package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
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
//     with "stream":true in the body, an event stream of X-Stainless-Bench-Events chunks
//     (default 32), each flushed on its own, then data: [DONE]. The chunks go back to back, or
//     with X-Stainless-Bench-Event-Gap (a Go duration, 0 to 100ms) one every gap from the first
//     on, like a model emitting tokens: chunk i is due i × gap after the first and [DONE]
//     follows the last at once. With X-Stainless-Bench-Event-Gap-Max (from the gap to 100ms)
//     each gap is a random one between the two. Each chunk's id carries the Unix time in ns at
//     which it was written (chatcmpl-bench-<ns>), so the client can time its transit.
//     X-Stainless-Bench-Delay (a Go duration, 0 to 5s) holds a plain answer that long before it
//     is sent, and a stream's first chunk that long after its headers: a model thinking (the
//     realistic run, realistic.go).
//   - paths under /fo-a/ answer 503 when the request carries X-Stainless-Bench-Fail (failover cost);
//   - paths under /eject-a/ answer 503 from POST /_bench/eject-fail on (ejection time);
//     the answer is the Unix time in ns at which the failing began.
//   - GET /_bench/stats: how many 503s each failing path has served.
const upstreamMode = "__upstream"

// The bench's request headers. The proxy forwards only an allowlist of client headers, on which
// the OpenAI SDKs' own X-Stainless-* metadata is, so the bench's controls carry that prefix to
// reach the upstream through it.
const (
	failHeader   = "X-Stainless-Bench-Fail"
	eventsHeader = "X-Stainless-Bench-Events"
	gapHeader    = "X-Stainless-Bench-Event-Gap"
	gapMaxHeader = "X-Stainless-Bench-Event-Gap-Max"
	delayHeader  = "X-Stainless-Bench-Delay"
)

// maxDelay bounds X-Stainless-Bench-Delay.
const maxDelay = 5 * time.Second

// parseDelay reads X-Stainless-Bench-Delay: empty is 0; otherwise a Go duration from 0 to maxDelay.
func parseDelay(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxDelay {
		return 0, fmt.Errorf("%s: %q is not a duration from 0 to %s", delayHeader, v, maxDelay)
	}
	return d, nil
}

// parseGapMax reads X-Stainless-Bench-Event-Gap-Max against the gap: empty is the gap itself.
func parseGapMax(v string, gap time.Duration) (time.Duration, error) {
	if v == "" {
		return gap, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < gap || d > maxEventGap {
		return 0, fmt.Errorf("%s: %q is not a duration from the gap (%s) to %s", gapMaxHeader, v, gap, maxEventGap)
	}
	return d, nil
}

// sleepCtx waits d or until ctx ends; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// maxEventGap bounds X-Stainless-Bench-Event-Gap: 32 events 100 ms apart already make a 3-second stream.
const maxEventGap = 100 * time.Millisecond

// parseEventGap reads X-Stainless-Bench-Event-Gap: empty is 0 (back to back); anything else must be a Go
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
	delay, err := parseDelay(r.Header.Get(delayHeader))
	if err != nil {
		badRequest(w, err)
		return
	}
	if !stream {
		if !sleepCtx(r.Context(), delay) {
			return
		}
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
		badRequest(w, err)
		return
	}
	gapMax, err := parseGapMax(r.Header.Get(gapMaxHeader), gap)
	if err != nil {
		badRequest(w, err)
		return
	}
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if delay > 0 {
		f.Flush() // the headers now, the first chunk after the delay
		if !sleepCtx(r.Context(), delay) {
			return
		}
	}
	var timer *time.Timer
	if gapMax > 0 {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	ev := make([]byte, 0, len(eventHead)+20+len(lastTail))
	var first time.Time
	var due time.Duration // chunk i's place in the schedule, from the first chunk
	for i := range n {
		// On a schedule from the first chunk, so that a late wake-up does not delay the rest.
		if i > 0 && gapMax > 0 {
			due += gap
			if gapMax > gap {
				due += rand.N(gapMax - gap + 1)
			}
			if wait := time.Until(first.Add(due)); wait > 0 {
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

func badRequest(w http.ResponseWriter, err error) {
	w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, err.Error()+"\n")
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
// outlives the bench), printing "LISTEN host:port" on stdout once it accepts connections. With
// --tls-listen it also serves HTTPS there (HTTP/2 and HTTP/1.1 by ALPN, as providers do) and
// prints "LISTEN-TLS host:port".
func runUpstream(args []string) error {
	fs := flag.NewFlagSet(upstreamMode, flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to serve on")
	tlsListen := fs.String("tls-listen", "", "also serve HTTPS on this loopback address")
	certFile := fs.String("tls-cert", "", "with --tls-listen: the certificate (PEM)")
	keyFile := fs.String("tls-key", "", "with --tls-listen: its key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	u := &upstream{}
	if *tlsListen == "" {
		fmt.Printf("LISTEN %s\n", ln.Addr())
		return serveChild(ln, u)
	}
	tln, err := net.Listen("tcp", *tlsListen)
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN-TLS %s\n", tln.Addr())
	fmt.Printf("LISTEN %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- serveChildTLS(tln, u, *certFile, *keyFile) }()
	err = serveChild(ln, u)
	if terr := <-errc; err == nil {
		err = terr
	}
	return err
}

// serveChild serves h on ln until SIGTERM/SIGINT or until stdin closes: a child of the bench
// never outlives it.
func serveChild(ln net.Listener, h http.Handler) error {
	return serveChildTLS(ln, h, "", "")
}

// serveChildTLS is serveChild over TLS when certFile is set.
func serveChildTLS(ln net.Listener, h http.Handler, certFile, keyFile string) error {
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
	var err error
	if certFile != "" {
		err = srv.ServeTLS(ln, certFile, keyFile)
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
