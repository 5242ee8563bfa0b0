// Package transport is the proxy's client to the providers: net/http's Transport set up for a
// gateway in front of LLM APIs (HTTP/2 where offered, forward proxies from the environment, no
// compression, the attempt's context as the only timeout), its connection counts for the
// metrics, and one transport per distinct TLS client configuration of the channels with
// spec.tls (Channels).
package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Transport is the upstream client: net/http's Transport, set up for a gateway in front
// of LLM providers, plus the connection counts behind switchyard_upstream_connections_open and
// _idle. It replaced a hand-written HTTP/1.1 client that ran each exchange on the handler's
// goroutine, saving net/http's goroutine hand-offs: on a realistic load (answers after
// 50-500 ms, streams of 200 events, up to 2,000 requests in flight) that saved about a tenth of
// the proxy's CPU per plain answer and almost nothing per stream over HTTP/1.1, while over HTTPS
// with HTTP/2, at 2,000 in flight, net/http took less CPU, far fewer connections and far less
// queueing (docs/benchmarks.md) — and the hand-written one had no HTTP/2, no forward proxies.
//
//   - HTTP/2 to providers that offer it over TLS (ALPN), HTTP/1.1 otherwise. With HTTP/2 a few
//     connections carry every request in flight (a new one opens when the server's stream limit
//     is reached); a connection that goes quiet is pinged, so a dead one is noticed before the
//     requests multiplexed on it time out one by one.
//   - HTTPS_PROXY, HTTP_PROXY and NO_PROXY (where data residency matters, egress goes through a
//     corporate proxy); https upstreams are tunnelled with CONNECT, so TLS still runs end to end
//     and is verified against the upstream's own name.
//   - Certificates are verified against the URL's host. The upstream URL comes from the channel,
//     never from the request.
//   - No compression is asked for: bytes pass through, and a decompressor would buffer streams.
//   - No response-header timeout: the attempt's own timers (request, first byte, stream idle)
//     bound every exchange through its context, and a non-streamed answer's headers come only
//     once the whole answer is generated.
//   - A request is sent again on another connection only when that cannot run it twice
//     (net/http's rule: nothing of it was written, or it is idempotent — GET, or an
//     Idempotency-Key header); a POST that met a closed connection after it was written is a
//     connection error, and failover decides.
//
// One transport serves one TLS client configuration (roots, client certificate): channels that
// need their own CA bundle or certificate would each get a transport of their own.
type Transport struct {
	rt    *http.Transport
	conns connCounts
}

// Config is what differs between upstream transports.
type Config struct {
	// TLS is the client TLS configuration for https upstreams (RootCAs, Certificates); nil: the
	// system roots, no client certificate. ServerName is always the URL's host.
	TLS *tls.Config
	// Proxy picks the forward proxy for a request (nil: none); see EnvProxy.
	Proxy func(*http.Request) (*url.URL, error)
	// Dial opens the TCP connections (nil: a net.Dialer with a 5 s timeout); tests resolve
	// names with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	// upstreamIdleTimeout is below the idle timeouts common in front of provider APIs (60 s and
	// up), so the gateway normally closes an idle connection first instead of finding out on a
	// request.
	upstreamIdleTimeout = 50 * time.Second
	// MaxIdlePerHost keeps every HTTP/1.1 connection a burst at the proxy's default in-flight
	// limit opened (proxy.DefaultMaxInFlight, which a proxy test keeps equal), so the next burst
	// does not dial and handshake again.
	MaxIdlePerHost = 1024
	// maxAnswerHeaderBytes: net/http allows 10 MB; no provider sends more than a few KiB.
	maxAnswerHeaderBytes = 1 << 20
)

func New(cfg Config) *Transport {
	t := &Transport{}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tlsCfg := &tls.Config{}
	if cfg.TLS != nil {
		tlsCfg = cfg.TLS.Clone()
		tlsCfg.ServerName = "" // net/http sets it from each URL
	}
	if tlsCfg.ClientSessionCache == nil {
		tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(0) // a reconnect resumes instead of a full handshake
	}
	t.rt = &http.Transport{
		Proxy: cfg.Proxy,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return t.conns.opened(c), nil
		},
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 5 * time.Second,
		// A custom DialContext or TLS configuration turns HTTP/2 off unless asked for.
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           0, // no limit across hosts; per host below
		MaxIdleConnsPerHost:    MaxIdlePerHost,
		MaxConnsPerHost:        0,
		IdleConnTimeout:        upstreamIdleTimeout,
		MaxResponseHeaderBytes: maxAnswerHeaderBytes,
		HTTP2: &http.HTTP2Config{
			// A connection silent this long is pinged, and closed when the ping goes unanswered.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
		},
	}
	return t
}

// Default is the upstream client of a proxy whose Options leave Transport nil: the
// system roots, and the forward proxy of the environment.
func Default() http.RoundTripper {
	return New(Config{Proxy: EnvProxy(httpproxy.FromEnvironment())})
}

// EnvProxy is net/http's ProxyFromEnvironment for an explicit configuration (which
// httpproxy.FromEnvironment reads from HTTPS_PROXY, HTTP_PROXY and NO_PROXY, or their lower-case
// forms, when called; net/http's own reads them once per process). As there, requests to
// localhost and loopback addresses never go through the proxy.
func EnvProxy(cfg *httpproxy.Config) func(*http.Request) (*url.URL, error) {
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil
	}
	f := cfg.ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return f(r.URL) }
}

// RoundTrip implements http.RoundTripper. The request's context bounds everything, including the
// body read. The connection that carries the exchange counts as busy until its answer's body is
// read to the end or closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{}
	ex.trace.GotConn = ex.gotConn
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &ex.trace))
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		ex.done()
		return nil, err
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		ex.done()
		return resp, nil
	}
	resp.Body = &exchangeBody{ReadCloser: resp.Body, ex: ex}
	return resp, nil
}

// CloseIdleConnections closes every idle connection (http.Client calls it).
func (t *Transport) CloseIdleConnections() { t.rt.CloseIdleConnections() }

// ConnStats reports the open connections and how many of them carry no exchange (metrics).
func (t *Transport) ConnStats() (open, idle int) {
	return int(t.conns.open.Load()), int(t.conns.idle.Load())
}

// connCounts counts the transport's TCP connections (to upstreams or to a forward proxy) and,
// among them, those with no exchange in progress: idle HTTP/1.1 connections in the pool and
// HTTP/2 connections with no stream open.
type connCounts struct {
	open, idle atomic.Int64
}

func (cc *connCounts) opened(c net.Conn) *countedConn {
	cc.open.Add(1)
	cc.idle.Add(1) // until its first exchange, a moment later
	return &countedConn{Conn: c, counts: cc}
}

// countedConn is a connection that keeps connCounts up to date.
type countedConn struct {
	net.Conn
	counts *connCounts
	// state is the number of exchanges in progress times 2, plus 1 once closed.
	state atomic.Int64
}

// begin counts an exchange on c; false when c is closed already (then end must not be called).
func (c *countedConn) begin() bool {
	for {
		s := c.state.Load()
		if s&1 != 0 {
			return false
		}
		if c.state.CompareAndSwap(s, s+2) {
			if s == 0 {
				c.counts.idle.Add(-1)
			}
			return true
		}
	}
}

func (c *countedConn) end() {
	if s := c.state.Add(-2); s == 0 {
		c.counts.idle.Add(1)
	}
}

func (c *countedConn) Close() error {
	for {
		s := c.state.Load()
		if s&1 != 0 {
			return c.Conn.Close()
		}
		if c.state.CompareAndSwap(s, s|1) {
			c.counts.open.Add(-1)
			if s == 0 {
				c.counts.idle.Add(-1)
			}
			return c.Conn.Close()
		}
	}
}

// exchange is one RoundTrip: the connection it was given (net/http reports it through the
// trace; a request sent again gets another one) until its answer is done with.
type exchange struct {
	trace    httptrace.ClientTrace
	conn     atomic.Pointer[countedConn]
	finished atomic.Bool
}

func (ex *exchange) gotConn(info httptrace.GotConnInfo) {
	c := info.Conn
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cc, ok := c.(*countedConn)
	if !ok || !cc.begin() {
		cc = nil
	}
	if prev := ex.conn.Swap(cc); prev != nil {
		prev.end() // the earlier try on another connection is over
	}
}

func (ex *exchange) done() {
	if ex.finished.CompareAndSwap(false, true) {
		if c := ex.conn.Swap(nil); c != nil {
			c.end()
		}
	}
}

// exchangeBody ends its exchange at the end of the body, on a read error or on Close.
type exchangeBody struct {
	io.ReadCloser
	ex *exchange
}

func (b *exchangeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.ex.done()
	}
	return n, err
}

func (b *exchangeBody) Close() error {
	err := b.ReadCloser.Close()
	b.ex.done()
	return err
}
