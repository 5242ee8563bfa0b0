package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// h1Transport is the upstream client: HTTP/1.1 with keep-alive, each exchange run start to end on
// the calling goroutine. net/http's Transport hands every request to a per-connection write
// goroutine and every response back from a per-connection read goroutine; on a loaded 2-core
// machine those two hand-offs (scheduler wake-ups, futex calls) were the largest cost we could
// remove (docs/benchmarks.md). Here the handler's goroutine writes the request and parses the
// answer itself (http.Request.Write and http.ReadResponse do the protocol), so a proxied request
// costs two socket writes and the reads, and no goroutine switch. Only a body over 64 KiB is
// written from a second goroutine, so that an upstream refusing it early (413) is heard.
//
// What it gives up: HTTP/2 to upstreams — provider APIs speak HTTP/1.1 fine, but it takes one
// connection per request in flight (pooled, TLS sessions resumed; switchyard_upstream_connections_*
// count them: on a cloud NAT each holds a port) — and net/http's background reader that notices a
// server closing an idle connection. Instead an idle connection is checked just before reuse (a non-blocking peek:
// data or EOF means the server is done with it). A request is sent once more, on a newly dialled
// connection, only when that cannot bill it twice — net/http's rule: the reused connection failed
// while the request was being written (the server had closed it), or before any byte of answer
// when the request is idempotent (GET, HEAD, or an Idempotency-Key header). A POST that was
// written whole and then met a closed connection is a connection error: failover decides.
type h1Transport struct {
	open           atomic.Int64 // connections dialled and not closed yet
	sessions       tls.ClientSessionCache
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
	raw       net.Conn // the TCP connection under it, for the liveness peek and for closing
	lim       limitReader
	br        *bufio.Reader // reads through lim
	bw        *bufio.Writer
	idleSince time.Time
	closed    atomic.Bool
	open      *atomic.Int64
}

// close closes the TCP connection once. Never tls.Conn.Close: it sends a close_notify alert
// with a 5 s write deadline of its own, which on a connection whose send buffer is full (an
// upstream that stopped reading a large request) would hold the request 5 s past its timeout.
func (c *h1Conn) close() {
	if c.closed.CompareAndSwap(false, true) {
		c.raw.Close()
		c.open.Add(-1)
	}
}

// limitReader ends a read with errHeadersTooLarge after n bytes; n is lifted after the headers.
type limitReader struct {
	r io.Reader
	n int64
}

var errHeadersTooLarge = fmt.Errorf("upstream answer headers exceed %d KiB", maxHeaderBytes>>10)

const (
	maxHeaderBytes   = 1 << 20 // net/http allows 10 MB; no provider sends more than a few KiB
	maxInformational = 5       // 1xx answers before the real one, as net/http allows
	// inlineWriteMax: a larger body is written while the answer is read (see exchange).
	inlineWriteMax = 64 << 10
	unlimited      = math.MaxInt64
)

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadersTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	if l.n != unlimited {
		l.n -= int64(n)
	}
	return n, err
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
		sessions:    tls.NewLRUClientSessionCache(0), // a reconnect resumes instead of a full handshake
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
				c.close()
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
		if reused && try == 0 && ctx.Err() == nil && retryable(req, err) {
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
		c.close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("upstream request: %w (%w)", ctx.Err(), err)
		}
		return nil, err
	}
	write := func() error {
		if err := req.Write(c.bw); err != nil {
			return sendError{err}
		}
		if err := c.bw.Flush(); err != nil {
			return sendError{err}
		}
		return nil
	}
	writeDone := true
	if req.ContentLength >= 0 && req.ContentLength <= inlineWriteMax {
		if err := write(); err != nil {
			return fail(err)
		}
	} else {
		// A large body is written by another goroutine while this one waits for the answer: an
		// upstream may refuse it (413, 400) after the headers and close, and its answer must
		// reach the client, not the write error that follows. (Small bodies fit in the socket
		// buffers; writing them inline saves a goroutine hand-off per request.)
		wrote := make(chan error, 1)
		go func() { wrote <- write() }()
		resp, err := t.readAnswer(c, req)
		if err != nil {
			select {
			case werr := <-wrote:
				if werr != nil {
					err = werr // the send had failed already: the server never had the whole request
				}
			default:
				c.close() // ends the write still blocked on it
				<-wrote
			}
			return fail(err)
		}
		select {
		case werr := <-wrote:
			writeDone = werr == nil
		default:
			writeDone = false // an early answer: the rest of the body is not wanted
		}
		return t.answer(c, req, resp, stop, writeDone), nil
	}
	resp, err := t.readAnswer(c, req)
	if err != nil {
		return fail(err)
	}
	return t.answer(c, req, resp, stop, writeDone), nil
}

// readAnswer reads the answer's status line and headers, past any 1xx.
func (t *h1Transport) readAnswer(c *h1Conn, req *http.Request) (*http.Response, error) {
	c.lim.n = maxHeaderBytes
	defer func() { c.lim.n = unlimited }()
	// An answer that never started reads as io.EOF here; ReadResponse would make it
	// io.ErrUnexpectedEOF, which is also what a cut-off answer gives.
	if _, err := c.br.Peek(1); err != nil {
		return nil, err
	}
	for range maxInformational + 1 {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		// 1xx answers (103 Early Hints, a 100 Continue never asked for) precede the real one.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("upstream sent more than %d informational (1xx) answers", maxInformational)
}

// answer wires the answer's body to the connection's fate.
func (t *h1Transport) answer(c *h1Conn, req *http.Request, resp *http.Response, stop func() bool, writeDone bool) *http.Response {
	// After 101 Switching Protocols the connection speaks something else; after an early answer
	// part of the request may still be unsent.
	reusable := writeDone && !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody || resp.ContentLength == 0 {
		resp.Body = http.NoBody
		t.release(c, stop, reusable)
		return resp
	}
	resp.Body = &h1Body{rc: resp.Body, t: t, c: c, stop: stop, reusable: reusable}
	return resp
}

// release puts c back in the pool when its exchange ended cleanly, and closes it otherwise.
func (t *h1Transport) release(c *h1Conn, stop func() bool, reusable bool) {
	// stop reports false when the context's end already moved the deadline: the connection is
	// unusable even though the answer was complete.
	if !stop() || !reusable || c.br.Buffered() > 0 || t.maxIdlePerHost <= 0 {
		c.close()
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
		evicted.close()
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
		c.close()
	}
}

func (t *h1Transport) dial(ctx context.Context, scheme, key, addr, host string) (*h1Conn, error) {
	raw, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn := raw
	if scheme == "https" {
		cfg := &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12, ClientSessionCache: t.sessions}
		if t.tlsConfig != nil {
			cfg = t.tlsConfig.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
			if cfg.ClientSessionCache == nil {
				cfg.ClientSessionCache = t.sessions
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
	t.open.Add(1)
	c := &h1Conn{key: key, conn: conn, raw: raw, bw: bufio.NewWriterSize(conn, 8<<10), open: &t.open}
	c.lim = limitReader{r: conn, n: unlimited}
	c.br = bufio.NewReaderSize(&c.lim, 16<<10)
	return c, nil
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
		c.close()
	}
}

// closeExpired closes the connections idle for idleTimeout, which get would refuse anyway: a
// host no request goes to any more must not hold its sockets open.
func (t *h1Transport) closeExpired() { t.closeIdle(t.idleTimeout) }

// CloseIdleConnections closes every idle connection (http.Client calls it).
func (t *h1Transport) CloseIdleConnections() { t.closeIdle(0) }

// connStats reports the open connections and how many of them are idle in the pool (metrics).
func (t *h1Transport) connStats() (open, idle int) { return int(t.open.Load()), t.idleCount() }

// idleCount is the number of pooled connections.
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
// it earlier closes the connection (draining an unknown remainder could take long). Unlike
// net/http's, it is not safe for a Close concurrent with a Read: the proxy reads and closes a
// body on one goroutine, and a stalled read is ended through the request's context.
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
			b.c.close()
		}
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done {
		b.done = true
		b.stop()
		b.c.close()
	}
	return nil
}

// sendError marks a failure to send the request.
type sendError struct{ err error }

func (e sendError) Error() string { return "writing the request: " + e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// retryable reports whether a request that failed on a reused connection may be sent again on
// a new one without the risk of running it twice: the server had closed the connection while
// the request was being written (it does not act on half a request), or the request is
// idempotent and the connection ended before any byte of answer.
func retryable(req *http.Request, err error) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false // the body cannot be sent again
	}
	var se sendError
	if errors.As(err, &se) {
		return true
	}
	closed := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	return closed && idempotent(req)
}

func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
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
