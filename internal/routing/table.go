// Package routing turns ProviderChannel, RoutingPolicy and Secret objects into the plain routing
// table the proxy runs on. Compile is pure: the controller (writing a ConfigMap) and the standalone
// proxy (reading manifest files) call the same function, so a manifest means the same thing in and
// out of a cluster. CRD types never reach the request path; this table does.
//
// Provider keys travel in Table.Credentials, which is never serialised with the table: the
// controller writes them to a Secret, and Secret redacts itself when printed.
package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// Table is the compiled routing table.
type Table struct {
	// Channels sorted by ID (namespace/name). IDs are unique across the table; two teams may each
	// have a channel named "openai".
	Channels []Channel `json:"channels"`
	// Policies in Compile's order: oldest first (creation time, then namespace/name), the order
	// in which a contested model goes to the older policy.
	Policies []Policy `json:"policies"`
	// Credentials maps a channel ID to its provider key, and CredentialPart(ID, part) to the
	// channel's other secret material (a client certificate's key). Never serialised with the
	// table.
	Credentials map[string]Secret `json:"-"`
	// Clients are the compiled GatewayClients (CompileClients), sorted by ID: hashes of their
	// keys, never the keys. A proxy older than clients ignores the field (encoding/json skips
	// unknown members) and serves openly, as it did before; upgrade the proxies first.
	Clients []Client `json:"clients,omitempty"`
	// ProxyReplicas is the number of ready proxy replicas the controller saw when it published
	// (set only when there are clients): each replica enforces 1/ProxyReplicas of every client
	// limit. 0 (standalone) counts as 1.
	ProxyReplicas int `json:"proxyReplicas,omitempty"`
}

// Channel is one compiled ProviderChannel.
type Channel struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Generation is the ProviderChannel's metadata.generation this form was compiled from; the
	// proxies report it, so the controller can tell which generation they serve (Programmed).
	Generation int64  `json:"generation,omitempty"`
	Provider   string `json:"provider"`
	// BaseURL is the API root; "" for a bedrock or vertex channel whose endpoint is derived
	// from Region.
	BaseURL string `json:"baseURL"`
	// Region is a bedrock channel's AWS region or a vertex channel's location; Project a vertex
	// channel's Google Cloud project.
	Region    string         `json:"region,omitempty"`
	Project   string         `json:"project,omitempty"`
	Models    []ChannelModel `json:"models"`
	Weight    int            `json:"weight"`
	Timeouts  Timeouts       `json:"timeouts"`
	Domain    FailureDomain  `json:"failureDomain"`
	Residency string         `json:"residency,omitempty"`
	// HasCredentials says whether Table.Credentials holds a key for this channel.
	HasCredentials bool            `json:"hasCredentials,omitempty"`
	Disabled       bool            `json:"disabled,omitempty"`
	DisabledUntil  *time.Time      `json:"disabledUntil,omitempty"`
	DisabledReason string          `json:"disabledReason,omitempty"`
	Fault          *FaultInjection `json:"faultInjection,omitempty"`
	// TLS is the channel's CA bundle and client certificate (spec.tls); nil: the system roots.
	TLS *ChannelTLS `json:"tls,omitempty"`
}

// ID is the channel's identity everywhere a channel is named at run time (the health engine, the
// policies' candidates, the credentials, the admin API, the journal, the access log): its
// namespace/name, or its name alone when it has no namespace (standalone manifests may omit it).
func (c *Channel) ID() string { return ChannelID(c.Namespace, c.Name) }

// ChannelID is the ID of the channel namespace/name; see Channel.ID.
func ChannelID(namespace, name string) string { return QualifiedName(namespace, name) }

// ChannelModel maps the public model name to the name sent upstream.
type ChannelModel struct {
	Name         string       `json:"name"`
	Upstream     string       `json:"upstream"`
	Capabilities Capabilities `json:"capabilities"`
}

// Capabilities of a model on a channel, resolved: the spec's values over the provider's defaults
// (see DefaultCapabilities). A zero ContextWindow or MaxOutputTokens is unknown.
type Capabilities struct {
	Prefill         bool `json:"prefill,omitempty"`
	ContextWindow   int  `json:"contextWindow,omitempty"`
	MaxOutputTokens int  `json:"maxOutputTokens,omitempty"`
	Vision          bool `json:"vision,omitempty"`
	Tools           bool `json:"tools,omitempty"`
}

// Model returns the channel's entry for a public model name.
func (c *Channel) Model(model string) (*ChannelModel, bool) {
	for i := range c.Models {
		if c.Models[i].Name == model {
			return &c.Models[i], true
		}
	}
	return nil, false
}

// Timeouts of one channel, resolved (no zero values).
type Timeouts struct {
	Request         time.Duration `json:"request"`
	FallbackRequest time.Duration `json:"fallbackRequest"`
	FirstByte       time.Duration `json:"firstByte"`
	StreamIdle      time.Duration `json:"streamIdle"`
}

// FailureDomain is what a channel shares with others.
type FailureDomain struct {
	Region  string `json:"region,omitempty"`
	Account string `json:"account,omitempty"`
	Egress  string `json:"egress,omitempty"`
}

// Differs reports whether two domains differ in any declared dimension. Two channels that declare
// nothing are assumed to share a domain: a fallback is only "preferred" on evidence.
func (d FailureDomain) Differs(o FailureDomain) bool {
	return d.Region != o.Region || d.Account != o.Account || d.Egress != o.Egress
}

// FaultInjection is a compiled drill.
type FaultInjection struct {
	Percent     int           `json:"percent"`
	AbortStatus int           `json:"abortStatus,omitempty"`
	Delay       time.Duration `json:"delay,omitempty"`
	Hang        bool          `json:"hang,omitempty"`
	OnlyMarked  bool          `json:"onlyMarked,omitempty"`
	Until       *time.Time    `json:"until,omitempty"`
}

// Policy is one compiled RoutingPolicy.
type Policy struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Generation is the RoutingPolicy's metadata.generation this form was compiled from.
	Generation int64 `json:"generation,omitempty"`
	// Models are the public model names the policy routes.
	Models []string `json:"models"`
	// Channels are the candidates in order (list order, or name order for a selector), already
	// filtered by requireResidency.
	Channels              []PolicyChannel `json:"channels"`
	Strategy              string          `json:"strategy"`
	Scenario              string          `json:"scenario"`
	Settings              health.Settings `json:"settings"`
	Retry                 Retry           `json:"retry"`
	FallbackModels        []string        `json:"fallbackModels,omitempty"`
	ContextOverflowModels []string        `json:"contextOverflowModels,omitempty"`
	AcceptFallbackFrom    []string        `json:"acceptFallbackFrom,omitempty"`
	RequireResidency      []string        `json:"requireResidency,omitempty"`
	PanicRouting          bool            `json:"panicRouting"`
	// StreamRecovery is "Continue" or "Error" and MaxContinuations bounds a request's
	// continuation attempts (see the proxy's recovery.go).
	StreamRecovery   string `json:"streamRecovery"`
	MaxContinuations int    `json:"maxContinuations"`
	// PII is the policy's personal-data masking; nil when it is off.
	PII *PII `json:"pii,omitempty"`
	// Rollout is how much traffic the policy steers; nil is Enforce for every request (the
	// default, and the form of every table compiled before rollouts existed).
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Rollout is a policy's spec.rollout, compiled.
type Rollout struct {
	// DryRun: the policy's rules run on a shadow of every channel×model and are journaled;
	// every request follows the listed channels in order.
	DryRun bool `json:"dryRun,omitempty"`
	// Percent is the share of requests (1-100, by cohort hash) that get the policy's failover
	// and ejection; the rest follow the listed channels in order.
	Percent int `json:"percent"`
}

// PolicyChannel is one candidate channel with its effective weight for this policy.
type PolicyChannel struct {
	// Channel is the channel's ID (namespace/name).
	Channel string `json:"channel"`
	Weight  int    `json:"weight"`
}

// Retry bounds attempts per client request.
type Retry struct {
	MaxAttempts   int           `json:"maxAttempts"`
	BudgetPercent int           `json:"budgetPercent"`
	BackoffBase   time.Duration `json:"backoffBase"`
	BackoffMax    time.Duration `json:"backoffMax"`
}

// Secret is a provider key. It prints as "[redacted]" in every format so that logging a struct
// that holds one cannot leak it; Reveal is the one way to read it.
type Secret struct{ value string }

// NewSecret wraps a key.
func NewSecret(v string) Secret { return Secret{value: v} }

// Reveal returns the key, for the one place that sends it upstream.
func (s Secret) Reveal() string { return s.value }

// String implements fmt.Stringer.
func (s Secret) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return "[redacted]" }

// MarshalJSON never writes the key.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Hash is the content hash of the table without credentials: equal tables hash equal.
func (t *Table) Hash() string {
	b, err := json.Marshal(t)
	if err != nil {
		// The table holds only plain values; Marshal cannot fail on it.
		panic(err)
	}
	return hashJSON(b)
}

// hashJSON is Hash of a table's compact JSON.
func hashJSON(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ObjectKey names an object in Table.Generations and the proxies' admin API: kind/namespace/name.
func ObjectKey(kind, namespace, name string) string {
	return kind + "/" + QualifiedName(namespace, name)
}

// Generations maps every object in the table (ObjectKey) to the generation it was compiled from.
func (t *Table) Generations() map[string]int64 {
	out := make(map[string]int64, len(t.Channels)+len(t.Policies))
	for _, c := range t.Channels {
		out[ObjectKey("ProviderChannel", c.Namespace, c.Name)] = c.Generation
	}
	for _, p := range t.Policies {
		out[ObjectKey("RoutingPolicy", p.Namespace, p.Name)] = p.Generation
	}
	for _, c := range t.Clients {
		out[ObjectKey("GatewayClient", c.Namespace, c.Name)] = c.Generation
	}
	return out
}

// Channel returns the channel with the given ID (see Channel.ID).
func (t *Table) Channel(id string) (*Channel, bool) {
	for i := range t.Channels {
		if t.Channels[i].ID() == id {
			return &t.Channels[i], true
		}
	}
	return nil, false
}

// Policy returns the policy namespace/name; a nil table has none.
func (t *Table) Policy(namespace, name string) (*Policy, bool) {
	if t == nil {
		return nil, false
	}
	for i := range t.Policies {
		if t.Policies[i].Namespace == namespace && t.Policies[i].Name == name {
			return &t.Policies[i], true
		}
	}
	return nil, false
}

// PolicyFor returns the policy that routes a public model name.
func (t *Table) PolicyFor(model string) (*Policy, bool) {
	for i := range t.Policies {
		for _, m := range t.Policies[i].Models {
			if m == model {
				return &t.Policies[i], true
			}
		}
	}
	return nil, false
}

// Upstream returns the upstream model name a channel uses for a public model.
func (c *Channel) Upstream(model string) (string, bool) {
	for _, m := range c.Models {
		if m.Name == model {
			return m.Upstream, true
		}
	}
	return "", false
}

// How the controller publishes a table for the proxies, and how `switchyard proxy --configmap`
// reads it: one definition for both sides (EncodeTable, DecodeTable, EncodeCredentials and
// DecodeCredentials in published.go).
//
// The table goes into ONE ConfigMap, never shards: the proxy's Role may read exactly that object
// and the credentials Secret by resourceNames, and one object is written atomically, so a proxy
// cannot see half of a table. A small table is plain indented JSON under ConfigMapKey, so that
// `kubectl get cm -o yaml` stays readable where people read it; past PlainTableLimit it is gzip of
// compact JSON under CompressedConfigMapKey in binaryData. The proxy's admin API does not serve
// the table (only its hash and load state), so the ConfigMap is where people read it.
//
// Measured with routingtest.ScaleInputs (1,000 channels × 5 models, 1,000 policies): 2.8 MB
// indented and 1.8 MB compact (the API server refuses both: over 1 MiB), 36 KB gzipped; 154 KB
// gzipped with every name, URL and setting made unique (12× instead of 50×). Compression alone
// leaves about 6× headroom under MaxObjectBytes even then, so the table is not sharded.
const (
	// ConfigMapKey holds the table as indented JSON (no keys) in the routing ConfigMap's data,
	// when that is at most PlainTableLimit bytes. It is also what every earlier controller wrote.
	ConfigMapKey = "table.json"
	// CompressedConfigMapKey holds the table as gzip of compact JSON in the routing ConfigMap's
	// binaryData, when indented JSON would exceed PlainTableLimit. Read it with
	//   kubectl get cm NAME -o jsonpath='{.binaryData.table\.json\.gz}' | base64 -d | gunzip
	CompressedConfigMapKey = "table.json.gz"
	// PlainTableLimit is the largest table published as plain JSON: about 90 channels and 90
	// policies (1.4 KB each, indented). Beyond it nobody reads the JSON in a terminal, and every
	// proxy replica receives the whole object on each change, so the smaller form wins.
	PlainTableLimit = 256 << 10
	// MaxObjectBytes bounds the data of the ConfigMap and of the Secret. The API server refuses
	// more than 1 MiB of data per object; this leaves room for the metadata and managedFields.
	MaxObjectBytes = 900 << 10
	// CredentialsKey holds the keys (JSON object, channel ID → key) in the credentials Secret. Keys
	// do not compress; at 1,000 channels with 164-character keys it is 197 KB.
	CredentialsKey = "credentials.json"
	// HashAnnotation carries Table.Hash on both objects; the proxy applies them when they match.
	HashAnnotation = "switchyard.io/config-hash"
	// CredentialsSuffix names the default credentials Secret: <ConfigMap name>-credentials.
	CredentialsSuffix = "-credentials"
)

// SplitChannelID is the inverse of ChannelID: "" and the name for an ID without a namespace.
// Object names cannot contain "/", so the first one separates the two.
func SplitChannelID(id string) (namespace, name string) {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return id[:i], id[i+1:]
	}
	return "", id
}
