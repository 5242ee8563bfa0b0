package clients

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Index is one table's clients, by key hash. Immutable once built.
type Index struct {
	// Required: every request needs a key; Reason says why, or why not, for the log and the
	// admin API.
	Required bool
	Reason   string
	Clients  int // GatewayClients in the table
	Replicas int // the proxy replicas the clients' limits are divided by
	// Entries has one entry per client; byHash one per valid key hash.
	Entries []*Entry
	byHash  map[string]*Entry
}

// Entry is one client of the served table and its limiter (kept across reloads).
type Entry struct {
	Client  *routing.Client
	ID      string
	Limiter *Limiter
}

// InvalidHash is a key hash of the table that is not what routing.KeyHash writes. Its value is
// never kept: it may be a key pasted by mistake.
type InvalidHash struct {
	Client        string
	Index, Length int
}

// NewIndex builds the client index of a table: limiter gives each client its limiter (the
// caller keeps them across reloads). requireKey is the proxy's own demand for keys, which holds
// with no client in the table too. A hash the controller cannot have written is left out and
// returned.
func NewIndex(t *routing.Table, requireKey bool, limiter func(*routing.Client) *Limiter) (*Index, []InvalidHash) {
	ix := &Index{byHash: map[string]*Entry{}, Clients: len(t.Clients), Replicas: max(t.ProxyReplicas, 1)}
	var invalid []InvalidHash
	for i := range t.Clients {
		c := &t.Clients[i]
		e := &Entry{Client: c, ID: c.ID(), Limiter: limiter(c)}
		ix.Entries = append(ix.Entries, e)
		for j, h := range c.KeyHashes {
			if !validKeyHash(h) {
				// The controller writes only hex SHA-256; anything else is a hand-edited or
				// corrupted table. The entry could never match a presented key's hash.
				invalid = append(invalid, InvalidHash{Client: e.ID, Index: j, Length: len(h)})
				continue
			}
			ix.byHash[h] = e
		}
	}
	switch {
	case ix.Clients > 0:
		ix.Required, ix.Reason = true, fmt.Sprintf("%d GatewayClient(s) in the config: every request needs one of their keys", ix.Clients)
	case requireKey:
		ix.Required, ix.Reason = true, "client keys are required (--require-client-key, or an API address other than loopback without --allow-anonymous) and no GatewayClient is configured: every request is refused with 401 until one is"
	default:
		ix.Reason = "no GatewayClient in the config and --require-client-key is not set: anyone who reaches the API port may call it"
	}
	return ix, invalid
}

// validKeyHash reports whether a table entry is what routing.KeyHash writes: 64 lower-case hex
// digits (Lookup compares it with the hex.EncodeToString of a presented key's SHA-256).
func validKeyHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Lookup is the client whose key is key, nil when there is none (ix may be nil: no table yet);
// keyID names the key (the first 8 hex digits of its hash) in the audit line either way.
func (ix *Index) Lookup(key string) (e *Entry, keyID string) {
	// Keys are at least 32 characters (routing.MinKeyLength), past the 32 bytes the compiler
	// converts a string on the stack for: a buffer of our own keeps the hashing allocation-free.
	var kb [128]byte
	sum := sha256.Sum256(append(kb[:0], key...))
	hash := hex.EncodeToString(sum[:])
	if ix != nil {
		e = ix.byHash[hash]
	}
	if e == nil || subtle.ConstantTimeCompare([]byte(hash), []byte(matchedHash(e, hash))) != 1 {
		return nil, hash[:8]
	}
	return e, hash[:8]
}

// matchedHash is the entry's own copy of the hash that found it.
func matchedHash(e *Entry, hash string) string {
	for _, h := range e.Client.KeyHashes {
		if len(h) == len(hash) && h == hash {
			return h
		}
	}
	return ""
}

// PresentedKey is the key a request carries: "Authorization: Bearer" (OpenAI SDKs), api-key
// (Azure OpenAI clients) or x-api-key (Anthropic clients), in that order.
func PresentedKey(h http.Header) string {
	if v := h.Get("Authorization"); v != "" {
		if scheme, tok, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	if v := strings.TrimSpace(h.Get("Api-Key")); v != "" {
		return v
	}
	return strings.TrimSpace(h.Get("X-Api-Key"))
}
