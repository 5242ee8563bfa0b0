package main

import (
	"flag"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// goProxyMode runs this program as the Go standard library's reverse proxy in front of the
// upstream: the floor for "a Go net/http proxy in the path", next to nginx's for a C one. It does
// nothing but forward (no routing, health, metrics or body parsing).
const goProxyMode = "__go-reverse-proxy"

func runGoProxy(args []string) error {
	fs := flag.NewFlagSet(goProxyMode, flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to serve on")
	upstream := fs.String("upstream", "", "the upstream's host:port")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := url.Parse("http://" + *upstream)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		// Tuned as a production Go proxy would be: keep-alive to the upstream with room for the
		// saturation run's connections, no compression.
		Transport: &http.Transport{Proxy: nil, MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true},
		// Stream events go out as they arrive, as the gateway does.
		FlushInterval: -1,
		// Without a pool ReverseProxy allocates a 32 KiB copy buffer per answer.
		BufferPool: &bufferPool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /go-ready", func(http.ResponseWriter, *http.Request) {})
	mux.Handle("/", rp)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	return serveChild(ln, mux)
}

// bufferPool is httputil.BufferPool over a sync.Pool, as production Go proxies set one.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
