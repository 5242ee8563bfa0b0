package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// Client is one compiled GatewayClient. It carries the SHA-256 of each of its keys, never a key:
// the table travels in a ConfigMap, and a hash of a random key reveals nothing a caller could
// present.
type Client struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Generation is the GatewayClient's metadata.generation (Programmed).
	Generation int64 `json:"generation,omitempty"`
	// KeyHashes are the lower-case hex SHA-256 of each accepted key, sorted.
	KeyHashes []string `json:"keyHashes"`
	// Models are the allowed public model names, as globs ('*' any run, '?' one character).
	Models    []string     `json:"models,omitempty"`
	Limits    ClientLimits `json:"limits,omitempty"`
	ExpiresAt *time.Time   `json:"expiresAt,omitempty"`
	Disabled  bool         `json:"disabled,omitempty"`
}

// ClientLimits are a client's limits for the whole gateway; 0 is no limit. Each proxy replica
// enforces its share (see Table.ProxyReplicas).
type ClientLimits struct {
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	TokensPerMinute   int64 `json:"tokensPerMinute,omitempty"`
	TokensPerDay      int64 `json:"tokensPerDay,omitempty"`
	// MaxInFlight bounds the client's requests being served at once.
	MaxInFlight int64 `json:"maxInFlight,omitempty"`
}

// ID is the client's namespace/name (its name alone without a namespace).
func (c *Client) ID() string { return QualifiedName(c.Namespace, c.Name) }

// Allows reports whether the client may use a public model name.
func (c *Client) Allows(model string) bool {
	for _, g := range c.Models {
		if Glob(g, model) {
			return true
		}
	}
	return false
}

// ReasonKeyConflict: a key of this client is also a key of another client.
const ReasonKeyConflict = "KeyConflict"

// ReasonWeakKey: a key of this client is too short or a placeholder to guess (see MinKeyLength).
const ReasonWeakKey = "WeakKey"

// MinKeyLength is the shortest client key accepted. The table holds unsalted SHA-256 of the keys,
// which is enough only because a key is long and random: 32 characters of hex are 128 bits, too
// many to guess at the proxy or to brute-force from a hash (docs/security.md).
const MinKeyLength = 32

// keyPlaceholder marks the samples' key values: long enough to pass the length rule, and refused
// by name so a copied sample fails clearly instead of serving with a key anyone can read.
const keyPlaceholder = "replace-me"

// minKeyDistinct is the fewest distinct characters a key must hold: a long run of one or two
// characters ("aaaa…", "abab…") is as guessable as a short key.
const minKeyDistinct = 8

// KeyID names a key in logs, audit lines and status without revealing it: the first 8 hex digits
// of its SHA-256, as the proxy's audit line names the key a request presented.
func KeyID(key string) string { return KeyHash(key)[:8] }

// keyWeakness says why a key (white space trimmed) is refused, or "" when it is long and varied
// enough. It is never given the key's value to print.
func keyWeakness(key string) string {
	switch {
	case len(key) < MinKeyLength:
		return fmt.Sprintf("is shorter than %d characters", MinKeyLength)
	case strings.Contains(strings.ToLower(key), keyPlaceholder):
		return fmt.Sprintf("is the samples' placeholder (it contains %q)", keyPlaceholder)
	}
	var seen [256]bool
	distinct := 0
	for i := 0; i < len(key); i++ {
		if !seen[key[i]] {
			seen[key[i]] = true
			distinct++
		}
	}
	if distinct < minKeyDistinct {
		return fmt.Sprintf("repeats fewer than %d distinct characters", minKeyDistinct)
	}
	return ""
}

// KeyHash is the hex SHA-256 of a client key, the form the table and the proxy compare.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// CompileClients compiles the GatewayClients of in with their keys Secrets. It is separate from
// Compile: a client with a problem is left out of the table (its callers get 401, which fails
// closed) and holds back no channel or policy. Clients are sorted by ID; a key that two clients
// share is a problem on the later one, which is left out.
func CompileClients(in Inputs) ([]Client, []Problem) {
	secrets := make(map[string]*corev1.Secret, len(in.Secrets))
	for i := range in.Secrets {
		s := &in.Secrets[i]
		secrets[QualifiedName(s.Namespace, s.Name)] = s
	}
	gcs := slices.Clone(in.Clients)
	sort.Slice(gcs, func(i, j int) bool {
		return QualifiedName(gcs[i].Namespace, gcs[i].Name) < QualifiedName(gcs[j].Namespace, gcs[j].Name)
	})
	var out []Client
	var problems []Problem
	owner := map[string]string{} // key hash -> client ID
	for i := range gcs {
		gc := &gcs[i]
		id := QualifiedName(gc.Namespace, gc.Name)
		bad := func(reason, format string, args ...any) {
			problems = append(problems, Problem{Kind: "GatewayClient", Namespace: gc.Namespace, Name: gc.Name, Reason: reason,
				Message: fmt.Sprintf(format, args...)})
		}
		if i > 0 && QualifiedName(gcs[i-1].Namespace, gcs[i-1].Name) == id {
			bad(ReasonInvalidSpec, "GatewayClient %s is declared twice", id)
			continue
		}
		c, ok := compileClient(gc, secrets, in.ReservedSecrets, bad)
		if !ok {
			continue
		}
		conflict := ""
		for _, h := range c.KeyHashes {
			if o, taken := owner[h]; taken {
				conflict = o
				break
			}
		}
		if conflict != "" {
			bad(ReasonKeyConflict, "spec.keysSecretRef: Secret %s holds a key that GatewayClient %s accepts too; every key must name one client",
				QualifiedName(gc.Namespace, gc.Spec.KeysSecretRef.Name), conflict)
			continue
		}
		for _, h := range c.KeyHashes {
			owner[h] = id
		}
		out = append(out, c)
	}
	return out, problems
}

func compileClient(gc *v1alpha1.GatewayClient, secrets map[string]*corev1.Secret, reserved map[string]bool, bad func(string, string, ...any)) (Client, bool) {
	spec := &gc.Spec
	ref := QualifiedName(gc.Namespace, spec.KeysSecretRef.Name)
	if spec.KeysSecretRef.Name == "" {
		bad(ReasonInvalidSpec, "spec.keysSecretRef.name is required")
		return Client{}, false
	}
	for _, g := range spec.Models {
		if g == "" || strings.ContainsAny(g, "[]\\ \t\n") {
			bad(ReasonInvalidSpec, "spec.models: %q is not a model name glob ('*' and '?' only)", g)
			return Client{}, false
		}
	}
	if reserved[ref] {
		bad(ReasonRefNotPermitted, "spec.keysSecretRef: Secret %s is Switchyard's own credentials Secret; a client may reference only its team's Secrets", ref)
		return Client{}, false
	}
	s, found := secrets[ref]
	if found && s.Labels[InternalSecretLabel] == "true" {
		bad(ReasonRefNotPermitted, "spec.keysSecretRef: Secret %s is labelled %s=true (Switchyard's own); a client may reference only its team's Secrets", ref, InternalSecretLabel)
		return Client{}, false
	}
	if !found {
		bad(ReasonSecretNotFound, "spec.keysSecretRef: Secret %s not found", ref)
		return Client{}, false
	}
	hashes, weak := clientKeyHashes(s)
	if len(weak) > 0 {
		// Named by data entry and keyId, never by value: the message lands in status and Events.
		bad(ReasonWeakKey, "spec.keysSecretRef: Secret %s: %s; a key must be at least %d random characters (e.g. openssl rand -hex 24)",
			ref, strings.Join(weak, "; "), MinKeyLength)
		return Client{}, false
	}
	if len(hashes) == 0 {
		bad(ReasonSecretKeyNotFound, "spec.keysSecretRef: Secret %s holds no key (every non-empty data value is one)", ref)
		return Client{}, false
	}
	c := Client{Name: gc.Name, Namespace: gc.Namespace, Generation: gc.Generation, KeyHashes: hashes,
		Models: slices.Clone(spec.Models), ExpiresAt: timePtr(spec.ExpiresAt), Disabled: spec.Disabled}
	if l := spec.Limits; l != nil {
		c.Limits = ClientLimits{RequestsPerMinute: deref(l.RequestsPerMinute), TokensPerMinute: deref(l.TokensPerMinute), TokensPerDay: deref(l.TokensPerDay)}
		if l.MaxInFlight != nil {
			c.Limits.MaxInFlight = int64(*l.MaxInFlight)
		}
		if c.Limits.RequestsPerMinute < 0 || c.Limits.TokensPerMinute < 0 || c.Limits.TokensPerDay < 0 || c.Limits.MaxInFlight < 0 {
			bad(ReasonInvalidSpec, "spec.limits: limits must be positive")
			return Client{}, false
		}
	}
	return c, true
}

// clientKeyHashes hashes every non-empty value of a keys Secret (data and stringData), sorted and
// without repeats, and describes each weak one (keyWeakness) by its entry and keyId, sorted.
// Surrounding white space is dropped: a key file written with a trailing newline (kubectl create
// secret --from-file) must still match the key a client sends in a header.
func clientKeyHashes(s *corev1.Secret) (hashes, weak []string) {
	add := func(entry, v string) {
		if v = strings.TrimSpace(v); v != "" {
			hashes = append(hashes, KeyHash(v))
			if why := keyWeakness(v); why != "" {
				weak = append(weak, fmt.Sprintf("key %q (keyId %s) %s", entry, KeyID(v), why))
			}
		}
	}
	for k, v := range s.Data {
		add(k, string(v))
	}
	for k, v := range s.StringData {
		add(k, v)
	}
	slices.Sort(hashes)
	slices.Sort(weak)
	return slices.Compact(hashes), slices.Compact(weak)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// Glob matches name against a pattern of literal characters, '*' (any run, empty included) and
// '?' (one character). Model names may hold '/', which path.Match would not let '*' cross.
func Glob(pattern, name string) bool {
	// The classic iterative matcher: on a mismatch, let the last '*' swallow one more character.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
