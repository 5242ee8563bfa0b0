package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Transport is the upstream client: HTTP/1.1 with keep-alive, each exchange run start to end on
// the calling goroutine. net/http's Transport hands every request to a per-connection write
// goroutine and every response back from a per-connection read goroutine; on a loaded 2-core
// machine those two hand-offs (scheduler wake-ups, futex calls) were most of what the proxy added
// to a request (docs/benchmarks.md). Here the handler's goroutine writes the request and parses
// the answer itself (http.Request.Write and http.ReadResponse do the protocol), so a proxied
// request costs two socket writes and the reads, and no goroutine switch.
//
// What it gives up: HTTP/2 to upstreams (provider APIs speak HTTP/1.1 fine; one connection per
// request in flight, pooled) and net/http's background reader that notices a server closing an
// idle connection. Instead an idle connection is checked just before reuse (a non-blocking peek:
// data or EOF means the server is done with it). What the peek cannot see — the server closing in
// the microseconds between the peek and the request — ends the exchange before a single byte of
// answer; then the request is sent once more on a newly dialled connection. That can repeat a
// request the server read before it closed without answering; a server closing an idle
// connection has not read it, and the alternative is to count our own pool's race as the
// channel's failure and fail over, which would send it again anyway.
type h1Transport struct {
	dialer         *net.Dialer
	tlsConfig      *tls.Config // nil: the defaults, with the URL's host as server name
	tlsTimeout     time.Duration
	maxIdlePerHost int
	idleTimeout    time.Duration
	now            func() time.Time

	mu   sync.Mutex
	idle map[string][]*h1Conn // per scheme://host:port, most recently used last
}

// h1Conn is one upstream connection.
type h1Conn struct {
	key       string
	conn      net.Conn // TLS or plain: what requests are written to
	raw       net.Conn // the TCP connection under it, for the liveness peek
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

func newH1Transport() *h1Transport {
	return &h1Transport{
		dialer:         &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		tlsTimeout:     5 * time.Second,
		maxIdlePerHost: 256,
		// Below the idle timeouts common in front of provider APIs (60 s and up), so the gateway
		// normally closes first instead of finding out on a request.
		idleTimeout: 50 * time.Second,
		now:         time.Now,
		idle:        map[string][]*h1Conn{},
	}
}

// errBadScheme: the compiler only accepts http and https base URLs; anything else is a bug.
var errBadScheme = errors.New("upstream URL scheme must be http or https")

// aLongTimeAgo is a deadline in the past: setting it makes a blocked read or write return now.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip implements http.RoundTripper. The request's context bounds everything, including the
// body read: when it ends, the connection's deadline is moved into the past and the connection is
// closed, never reused.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, addr, err := connKey(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			closeBody(req)
			return nil, fmt.Errorf("upstream request: %w", err)
		}
		var c *h1Conn
		reused := false
		if try == 0 { // a retry dials: the other idle connections may be just as stale
			c, reused = t.get(key)
		}
		if c == nil {
			if c, err = t.dial(ctx, req.URL.Scheme, key, addr, req.URL.Hostname()); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		if try > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				c.conn.Close()
				return nil, err
			}
			r2 := *req
			r2.Body = body
			req = &r2
		}
		resp, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		// A reused connection that failed before any answer arrived was most likely closed by
		// the server while idle: send it once more on a new connection when the body allows.
		if reused && try == 0 && ctx.Err() == nil && staleConnError(err) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) {
			continue
		}
		return nil, err
	}
}

// exchange writes req on c and reads the answer's header. On error c is closed.
func (t *h1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("upstream request: %w (%w)", ctx.Err(), err)
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(sendError{err})
	}
	if err := c.bw.Flush(); err != nil {
		return fail(sendError{err})
	}
	// An answer that never started reads as io.EOF here; ReadResponse would make it
	// io.ErrUnexpectedEOF, which is also what a cut-off answer gives. Only the first may be retried.
	if _, err := c.br.Peek(1); err != nil {
		return fail(err)
	}
	var resp *http.Response
	for {
		var err error
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// 1xx answers (103 Early Hints, a 100 Continue never asked for) precede the real one.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	// After 101 Switching Protocols the connection speaks something else.
	reusable := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody || resp.ContentLength == 0 {
		resp.Body = http.NoBody
		t.release(c, stop, reusable)
		return resp, nil
	}
	resp.Body = &h1Body{rc: resp.Body, t: t, c: c, stop: stop, reusable: reusable}
	return resp, nil
}

// release puts c back in the pool when its exchange ended cleanly, and closes it otherwise.
func (t *h1Transport) release(c *h1Conn, stop func() bool, reusable bool) {
	// stop reports false when the context's end already moved the deadline: the connection is
	// unusable even though the answer was complete.
	if !stop() || !reusable || c.br.Buffered() > 0 || t.maxIdlePerHost <= 0 {
		c.conn.Close()
		return
	}
	c.idleSince = t.now()
	var evicted *h1Conn
	t.mu.Lock()
	list := t.idle[c.key]
	if len(list) >= t.maxIdlePerHost {
		evicted = list[0] // the longest idle
		copy(list, list[1:])
		list = list[:len(list)-1]
	}
	t.idle[c.key] = append(list, c)
	t.mu.Unlock()
	if evicted != nil {
		evicted.conn.Close()
	}
}

// get takes the most recently used idle connection for key that is still open, or nil.
func (t *h1Transport) get(key string) (*h1Conn, bool) {
	now := t.now()
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			return nil, false
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(c.idleSince) < t.idleTimeout && peekAlive(c.raw) {
			return c, true
		}
		c.conn.Close()
	}
}

func (t *h1Transport) dial(ctx context.Context, scheme, key, addr, host string) (*h1Conn, error) {
	raw, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn := raw
	if scheme == "https" {
		cfg := &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
		if t.tlsConfig != nil {
			cfg = t.tlsConfig.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
			cfg.NextProtos = []string{"http/1.1"}
		}
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.tlsTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	return &h1Conn{key: key, conn: conn, raw: raw, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 8<<10)}, nil
}

// closeIdle closes idle connections: those idle for olderThan or longer, or all when it is 0.
func (t *h1Transport) closeIdle(olderThan time.Duration) {
	now := t.now()
	var doomed []*h1Conn
	t.mu.Lock()
	for key, list := range t.idle {
		keep := list[:0]
		for _, c := range list {
			if olderThan > 0 && now.Sub(c.idleSince) < olderThan {
				keep = append(keep, c)
			} else {
				doomed = append(doomed, c)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(t.idle, key)
		} else {
			t.idle[key] = keep
		}
	}
	t.mu.Unlock()
	for _, c := range doomed {
		c.conn.Close()
	}
}

// closeExpired closes the connections idle for idleTimeout, which get would refuse anyway: a
// host no request goes to any more must not hold its sockets open.
func (t *h1Transport) closeExpired() { t.closeIdle(t.idleTimeout) }

// CloseIdleConnections closes every idle connection (http.Client calls it).
func (t *h1Transport) CloseIdleConnections() { t.closeIdle(0) }

// idleCount is the number of pooled connections (tests).
func (t *h1Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, list := range t.idle {
		n += len(list)
	}
	return n
}

// h1Body is an answer's body. Reading it to the end returns the connection to the pool; closing
// it earlier closes the connection (draining an unknown remainder could take long).
type h1Body struct {
	rc       io.ReadCloser
	t        *h1Transport
	c        *h1Conn
	stop     func() bool
	reusable bool
	done     bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.done = true
		if err == io.EOF {
			b.t.release(b.c, b.stop, b.reusable)
		} else {
			b.stop()
			b.c.conn.Close()
		}
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done {
		b.done = true
		b.stop()
		b.c.conn.Close()
	}
	return nil
}

// sendError marks a failure to send the request.
type sendError struct{ err error }

func (e sendError) Error() string { return "writing the request: " + e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// staleConnError: the failure of a request on a connection the server had already closed.
func staleConnError(err error) bool {
	var we sendError
	return errors.As(err, &we) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func connKey(req *http.Request) (key, addr string, err error) {
	u := req.URL
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
	default:
		return "", "", fmt.Errorf("%w: %q", errBadScheme, u.Scheme)
	}
	addr = net.JoinHostPort(u.Hostname(), port)
	return u.Scheme + "://" + addr, addr, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
