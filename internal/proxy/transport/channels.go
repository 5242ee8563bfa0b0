package transport

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/net/http/httpproxy"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Channels keeps one upstream transport per distinct TLS client configuration of the
// channels with spec.tls: channels that share a CA bundle and client certificate share
// connections, and a reload that keeps a configuration keeps its warm connections. Channels
// without spec.tls use the Server's default transport.
type Channels struct {
	mu   sync.Mutex
	byFP map[string]*Transport // by tlsFingerprint
}

// Update returns the transport of every channel of t with TLS settings, by channel ID, creating
// those not kept from the last table and closing the idle connections of those no longer used.
// A channel whose settings do not load (a table Compile did not check) gets a transport that
// fails each attempt with the reason: sending it without its CA or certificate would trust the
// wrong servers or be refused, and its ejection says something is wrong.
func (ct *Channels) Update(t *routing.Table) (map[string]http.RoundTripper, []error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	out := map[string]http.RoundTripper{}
	used := map[string]*Transport{}
	var errs []error
	for i := range t.Channels {
		ch := &t.Channels[i]
		if ch.TLS == nil {
			continue
		}
		cfg, err := t.TLSConfig(ch)
		if err != nil {
			errs = append(errs, err)
			out[ch.ID()] = failingTransport{err: fmt.Errorf("the channel's TLS settings do not load: %w", err)}
			continue
		}
		fp := tlsFingerprint(t, ch)
		tr := used[fp]
		if tr == nil {
			if tr = ct.byFP[fp]; tr == nil {
				tr = New(Config{TLS: cfg, Proxy: EnvProxy(httpproxy.FromEnvironment())})
			}
			used[fp] = tr
		}
		out[ch.ID()] = tr
	}
	for fp, tr := range ct.byFP {
		if used[fp] == nil {
			tr.CloseIdleConnections() // requests in flight finish on their connections
		}
	}
	ct.byFP = used
	return out, errs
}

// ConnStats sums the connection counts of the channels' own transports.
func (ct *Channels) ConnStats() (open, idle int) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, tr := range ct.byFP {
		o, i := tr.ConnStats()
		open, idle = open+o, idle+i
	}
	return open, idle
}

// tlsFingerprint identifies a channel's TLS client configuration: its CA bundle and its client
// certificate and key.
func tlsFingerprint(t *routing.Table, ch *routing.Channel) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(ch.TLS.CABundle), ch.TLS.CABundle)
	if ch.TLS.ClientCertificate {
		crt := t.Credentials[routing.CredentialPart(ch.ID(), routing.PartTLSCert)].Reveal()
		key := t.Credentials[routing.CredentialPart(ch.ID(), routing.PartTLSKey)].Reveal()
		fmt.Fprintf(h, "|%d:%s|%d:%s", len(crt), crt, len(key), key)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// failingTransport fails every request with err.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
