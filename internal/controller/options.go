package controller

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Labels and annotations on the objects the controller writes. The proxy relies on the hash
// annotation and the data keys; they are part of the controller↔proxy contract.
const (
	ManagedByLabel       = "app.kubernetes.io/managed-by"
	ManagedByValue       = "switchyard"
	ConfigHashAnnotation = routing.HashAnnotation
	TableKey             = routing.ConfigMapKey
	CompressedTableKey   = routing.CompressedConfigMapKey
	CredentialsKey       = routing.CredentialsKey

	// FieldOwner is the server-side-apply field manager of everything the controller writes.
	FieldOwner = "switchyard-controller"
	// ReportingController names the controller in the Events it writes.
	ReportingController = "switchyard.io/controller"
)

// Defaults of Options.
const (
	DefaultConfigMapName = "switchyard-routing"
	// DefaultProxyService is the proxies' admin Service (config/proxy/admin_service.yaml), which
	// carries only the admin port; the client Service (switchyard-proxy) carries none.
	DefaultProxyService  = "switchyard-proxy-admin"
	DefaultAdminPortName = "admin"
	DefaultPollInterval  = 5 * time.Second
	// DefaultPollConcurrency is how many replicas are polled at once.
	DefaultPollConcurrency = 16
	// DefaultCompileDelay is how long the first event of a burst waits for the rest before the
	// table is compiled: the events of a `kubectl apply` of a directory arrive within it.
	DefaultCompileDelay = 100 * time.Millisecond
	// DefaultScoreStep is how far a health score must move before it is written again.
	DefaultScoreStep = 5
	// DefaultUnreachableAfter is how many polls in a row a replica may miss before it counts as
	// unreachable: one lost poll is not news worth a status write.
	DefaultUnreachableAfter = 2
	// DefaultJournalDedupWindow: the same transition (channel, model, from, to, rule) reported by
	// several replicas within this window is one journal entry.
	DefaultJournalDedupWindow = 2 * time.Minute
	// DefaultJournalMaxAge: proxy journal entries older than this are history, not news (a restarted
	// controller does not replay them; Kubernetes drops Events after an hour anyway).
	DefaultJournalMaxAge = 30 * time.Minute
)

// Options configure the controller. The zero value of every field but ProxyNamespace has a default.
type Options struct {
	// ProxyNamespace holds the routing ConfigMap and credentials Secret, and the proxy Service.
	ProxyNamespace string
	// ConfigMapName is the routing ConfigMap (default switchyard-routing).
	ConfigMapName string
	// CredentialsSecretName is the Secret holding provider keys (default <ConfigMapName>-credentials,
	// which is what `switchyard proxy --configmap NS/NAME` reads).
	CredentialsSecretName string
	// WatchNamespaces limits the ProviderChannels, RoutingPolicies and Secrets compiled into the
	// config to these namespaces; empty means all namespaces.
	WatchNamespaces []string

	// ProxyService is the proxies' admin Service, whose EndpointSlices list the replicas to poll
	// (default switchyard-proxy-admin); empty disables in-cluster discovery.
	ProxyService string
	// AdminPortName is the name of that Service's admin API port (default admin).
	AdminPortName string
	// AdminURLs are extra admin API roots to poll (proxies outside the cluster).
	AdminURLs []string
	// CompileDelay is how long an event that changes the table waits for others before the
	// compile (default 100ms): every event within it is one compile.
	CompileDelay time.Duration
	// PollInterval between polls of the admin API (default 5s).
	PollInterval time.Duration
	// PollTimeout bounds one replica's answers (live state, config and journal), from when its
	// turn comes (default: the poll interval, at most 5s).
	PollTimeout time.Duration
	// PollConcurrency is how many replicas are polled at once (default 16).
	PollConcurrency int
	// UnreachableAfter polls missed in a row make a replica unreachable (default 2).
	UnreachableAfter int
	// ScoreStep is the smallest health-score move that is written to status (default 5).
	ScoreStep int32
	// JournalDedupWindow and JournalMaxAge shape the Event journal (see the defaults).
	JournalDedupWindow time.Duration
	JournalMaxAge      time.Duration

	// Clock tells the time (status times, disabledUntil); tests inject a fake one.
	Clock clock.PassiveClock
	// HTTPClient polls the admin API (default: a client with PollTimeout).
	HTTPClient *http.Client
	// ReportingInstance names this controller process in Events (default: the hostname).
	ReportingInstance string
}

func (o *Options) complete() error {
	if o.ProxyNamespace == "" {
		return errors.New("the proxy namespace is required")
	}
	if o.ConfigMapName == "" {
		o.ConfigMapName = DefaultConfigMapName
	}
	if o.CredentialsSecretName == "" {
		o.CredentialsSecretName = o.ConfigMapName + routing.CredentialsSuffix
	}
	if o.AdminPortName == "" {
		o.AdminPortName = DefaultAdminPortName
	}
	for _, u := range o.AdminURLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("proxy admin URL %q is not an http:// or https:// URL", u)
		}
	}
	if o.CompileDelay <= 0 {
		o.CompileDelay = DefaultCompileDelay
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = min(o.PollInterval, 5*time.Second)
	}
	if o.PollConcurrency <= 0 {
		o.PollConcurrency = DefaultPollConcurrency
	}
	if o.UnreachableAfter <= 0 {
		o.UnreachableAfter = DefaultUnreachableAfter
	}
	if o.ScoreStep <= 0 {
		o.ScoreStep = DefaultScoreStep
	}
	if o.JournalDedupWindow <= 0 {
		o.JournalDedupWindow = DefaultJournalDedupWindow
	}
	if o.JournalMaxAge <= 0 {
		o.JournalMaxAge = DefaultJournalMaxAge
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.PollTimeout}
	}
	if o.ReportingInstance == "" {
		o.ReportingInstance = "switchyard-controller"
	}
	return nil
}

// CacheOptions limits the manager's cache to what the controller reads: the watched namespaces
// for channels, policies and Secrets (their metadata only: see secretReader), and only the one
// ConfigMap and the proxy's EndpointSlices in the proxy namespace. Build the manager with it.
func CacheOptions(o Options) cache.Options {
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{o.ProxyNamespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", orDefault(o.ConfigMapName, DefaultConfigMapName)),
		},
		&discoveryv1.EndpointSlice{}: {
			Namespaces: map[string]cache.Config{o.ProxyNamespace: {}},
		},
		// Secrets are cached as metadata only (see secretReader), and even metadata can carry a
		// Secret's values: a client-side `kubectl apply` copies the whole manifest, stringData
		// included, into the last-applied-configuration annotation.
		&corev1.Secret{}: {Transform: stripSecretMetadata},
	}}
	if len(o.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
		// The credentials Secret lives in the proxy namespace, watched or not.
		opts.DefaultNamespaces[o.ProxyNamespace] = cache.Config{}
	}
	return opts
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// stripSecretMetadata drops what in a Secret's metadata may repeat its data: the client-side
// apply annotation and the managed fields. Nothing the controller reads from the cache needs them
// (it matches Secrets by name and compares resourceVersions).
func stripSecretMetadata(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			if _, has := a[corev1.LastAppliedConfigAnnotation]; has {
				a = maps.Clone(a)
				delete(a, corev1.LastAppliedConfigAnnotation)
				o.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}
