package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Publisher is the compile step of the CompileReconciler: it compiles every watched object of
// the inputKinds (with the Secrets channels reference) from the cache and, when the result has no
// problems and differs from what is published, writes the credentials Secret and the routing
// ConfigMap. Compiling the whole set each time keeps the step level-based: whichever object
// changed, the output is a function of all of them.
type Publisher struct {
	client  client.Client
	secrets *secretReader
	opts    Options

	// mu serialises Sync, so that two calls never race on the writes (the compile reconciler
	// runs one at a time; tests and benchmarks call it directly).
	mu sync.Mutex
	// lastGood is the last config known to be good (written by us, or found intact at start-up);
	// it restores the ConfigMap and Secret when they are deleted or edited while problems hold
	// publishing back.
	lastGood *rendered
	// memo is the last compile and its rendering, by the fingerprint of its inputs: a pass whose
	// inputs did not change (our own ConfigMap write coming back, a Secret's metadata edit, a
	// resync) costs the gather and the fingerprint, not a compile and render (tens of
	// milliseconds at 5,000 channel×model keys).
	memo *syncMemo
	// replicas returns the ready proxy replicas, for the clients' limit shares (Setup sets it to
	// the poller's count; nil: 1).
	replicas func() int
}

// syncMemo is a compile of inputs with a given fingerprint and, when nothing held part of it
// back, its rendered form.
type syncMemo struct {
	fingerprint string
	table       *routing.Table
	problems    []routing.Problem
	rendered    *rendered
	// clientProblems are the GatewayClients' (routing.CompileClients), kept apart from problems:
	// a client with a problem is left out and holds nothing else back.
	clientProblems []routing.Problem
}

// fingerprint identifies what Compile reads of the inputs: each object's identity (UID),
// generation (spec), creation time (the older policy wins a contest) and labels (selectors), and
// each Secret's resourceVersion. Status writes change none of these.
func fingerprint(in routing.Inputs) string {
	h := sha256.New()
	for _, k := range inputKinds {
		for _, m := range k.Objects(&in) {
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00", k.Kind, m.GetNamespace(), m.GetName(), m.GetUID(), m.GetGeneration(), m.GetCreationTimestamp().Unix())
			labels := m.GetLabels()
			for _, l := range slices.Sorted(maps.Keys(labels)) {
				fmt.Fprintf(h, "%s=%s\x00", l, labels[l])
			}
			h.Write([]byte{1})
		}
	}
	for i := range in.Secrets {
		s := &in.Secrets[i]
		fmt.Fprintf(h, "Secret\x00%s\x00%s\x00%s\x00%s\x00", s.Namespace, s.Name, s.UID, s.ResourceVersion)
	}
	reserved := slices.Sorted(maps.Keys(in.ReservedSecrets))
	fmt.Fprintf(h, "reserved\x00%v", reserved)
	return hex.EncodeToString(h.Sum(nil))
}

// NewPublisher returns a Publisher for the given options (completed by Setup).
func NewPublisher(c client.Client, api client.Reader, opts Options) *Publisher {
	return &Publisher{client: c, secrets: newSecretReader(c, api), opts: opts}
}

// SyncResult is what one compile produced and what the proxies are being served.
type SyncResult struct {
	// Compiled is the table compiled from the current objects; only served when Problems is empty.
	Compiled *routing.Table
	Problems []routing.Problem
	// ClientProblems are the GatewayClients' problems; such a client is left out of the table.
	ClientProblems []routing.Problem
	// Published is the table in the ConfigMap after this sync (nil when there is none), with the
	// keys from the credentials Secret.
	Published *routing.Table
	// HeldBack is true when problems kept part of the compiled table from being published.
	HeldBack bool
	// Held says, for each object with a problem, whether it serves its last good form or is left
	// out of the published config.
	Held []routing.Held
	// PublishedHash is Published's hash, set by Sync: hashing a table at scale costs as much as
	// encoding it, and every status reconcile reads it.
	PublishedHash string
	// objects are the objects compiled, of every inputKind.
	objects []objectID
	// compiledIndex and publishedIndex look up Compiled and Published (set by index).
	compiledIndex, publishedIndex *tableLookup
}

// index builds the lookups of both tables; call it once the result is complete.
func (r *SyncResult) index() {
	c, p := indexTable(r.Compiled), indexTable(r.Published)
	r.compiledIndex, r.publishedIndex = &c, &p
}

// compiled and published look up the two tables, by the index when there is one.
func (r *SyncResult) compiled() tableLookup {
	if r.compiledIndex != nil {
		return *r.compiledIndex
	}
	return tableLookup{table: r.Compiled}
}

func (r *SyncResult) published() tableLookup {
	if r.publishedIndex != nil {
		return *r.publishedIndex
	}
	return tableLookup{table: r.Published}
}

// publishedHash is the hash of the published table ("" when there is none).
func (r *SyncResult) publishedHash() string {
	switch {
	case r.PublishedHash != "":
		return r.PublishedHash
	case r.Published != nil:
		return r.Published.Hash()
	}
	return ""
}

// rendered is a table in its published form.
type rendered struct {
	table       *routing.PublishedTable
	credentials []byte
	hash        string
}

// render turns a table into the ConfigMap's and the Secret's content (routing.EncodeTable and
// routing.EncodeCredentials define the form). A table that cannot fit is a terminal error: only
// a change to the channels or policies, which reconciles again, can make it fit.
func render(t *routing.Table) (*rendered, error) {
	table, err := routing.EncodeTable(t)
	if err == nil {
		var creds []byte
		if creds, err = routing.EncodeCredentials(t.Credentials); err == nil {
			return &rendered{table: table, credentials: creds, hash: table.Hash}, nil
		}
	}
	if errors.Is(err, routing.ErrTooLarge) {
		return nil, reconcile.TerminalError(err)
	}
	return nil, err
}

// objects are r as a ConfigMap and a Secret (content only), for parsePublished.
func (r *rendered) objects() (*corev1.ConfigMap, *corev1.Secret) {
	return &corev1.ConfigMap{Data: r.table.Data, BinaryData: r.table.BinaryData},
		&corev1.Secret{Data: map[string][]byte{CredentialsKey: r.credentials}}
}

// parsePublished reads a table back from a ConfigMap and credentials Secret (either may be nil),
// as the proxy does (routing.DecodeTable), in either form. It returns nil when the ConfigMap is
// missing or does not hold a table.
func parsePublished(cm *corev1.ConfigMap, sec *corev1.Secret) *routing.Table {
	if cm == nil {
		return nil
	}
	t, err := routing.DecodeTable(cm.Data, cm.BinaryData)
	if err != nil {
		return nil
	}
	t.Credentials = map[string]routing.Secret{}
	if sec != nil {
		if keys, err := routing.DecodeCredentials(sec.Data[CredentialsKey]); err == nil {
			for i := range t.Channels {
				if k, ok := routing.KeyFor(keys, &t.Channels[i]); ok {
					t.Credentials[t.Channels[i].ID()] = k
				}
			}
		}
	}
	return t
}

// configMapIntact reports whether a ConfigMap holds exactly r (in r's form: a switch between
// plain and compressed is a change), with the labels and hash.
func (r *rendered) configMapIntact(cm *corev1.ConfigMap) bool {
	return cm != nil && r.table.Equal(cm.Data, cm.BinaryData) && cm.Annotations[ConfigHashAnnotation] == r.hash &&
		cm.Labels[ManagedByLabel] == ManagedByValue
}

func (r *rendered) secretIntact(s *corev1.Secret) bool {
	return s != nil && bytes.Equal(s.Data[CredentialsKey], r.credentials) && s.Annotations[ConfigHashAnnotation] == r.hash &&
		s.Labels[ManagedByLabel] == ManagedByValue
}

// Sync compiles and publishes. See Publisher.
func (p *Publisher) Sync(ctx context.Context) (*SyncResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	in, err := p.gather(ctx)
	if err != nil {
		return nil, err
	}
	replicas := p.proxyReplicas()
	fp := fingerprint(in) + clientsFingerprint(in, replicas)
	if p.memo == nil || p.memo.fingerprint != fp {
		table, problems := routing.Compile(in)
		p.memo = &syncMemo{fingerprint: fp, table: table, problems: problems}
		p.memo.clientProblems = compileClientsInto(table, in, replicas)
	}
	// The memo's table and problems are shared by every result: nobody modifies them.
	table, problems := p.memo.table, slices.Clone(p.memo.problems)
	cm, sec, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	res := &SyncResult{Compiled: table, Problems: problems, ClientProblems: p.memo.clientProblems, objects: objectsOf(&in)}

	served := table
	if len(routing.Blocking(problems)) > 0 {
		// Per-object isolation: every object that compiled is published as compiled; one with a
		// problem keeps its last good form, or is left out when it never had one. The on-call
		// override of every channel gets through, restored ones included.
		res.HeldBack = true
		if p.lastGood == nil {
			p.adoptLastGood(cm, sec)
		}
		var last *routing.Table
		if p.lastGood != nil {
			last = parsePublished(p.lastGood.objects())
		}
		isolated, held, more := routing.Isolate(table, problems, last)
		res.Held = held
		res.Problems = append(res.Problems, more...)
		served = routing.WithOverrides(isolated, in.Channels)
		// Clients are compiled on their own and never held back by a channel or policy.
		served.Clients, served.ProxyReplicas = table.Clients, table.ProxyReplicas
	}
	// Both objects are rendered, and so known to fit, before either is written: a Secret written
	// for a table whose ConfigMap the API server then refuses would leave the proxies waiting
	// for a match that never comes (they keep serving, but a restarted one could not start).
	want := p.memo.rendered
	if served != table || want == nil {
		if want, err = render(served); err != nil {
			return nil, err
		}
		if served == table {
			p.memo.rendered = want
		}
	}
	recordNotServed(res.Held, res.ClientProblems)
	// The Secret goes first, so a proxy that reloads on the ConfigMap finds the keys of new channels.
	if !want.secretIntact(sec) {
		if err := p.applySecret(ctx, want); err != nil {
			return nil, err
		}
		logf.FromContext(ctx).Info("Updated credentials Secret", "secret", p.opts.ProxyNamespace+"/"+p.opts.CredentialsSecretName, "hash", want.hash,
			"bytes", len(want.credentials))
	}
	if !want.configMapIntact(cm) {
		if err := p.applyConfigMap(ctx, want); err != nil {
			return nil, err
		}
		logf.FromContext(ctx).Info("Updated ConfigMap", "configMap", p.opts.ProxyNamespace+"/"+p.opts.ConfigMapName, "hash", want.hash,
			"bytes", want.table.Size(), "compressed", want.table.Compressed())
	}
	p.lastGood = want
	res.PublishedHash = want.hash
	if res.HeldBack {
		res.Published = parsePublished(want.objects())
	} else {
		res.Published = table
	}
	res.index()
	return res, nil
}

// adoptLastGood takes the ConfigMap and Secret found at start-up as the last good config, when
// they are intact (their hash matches their content).
func (p *Publisher) adoptLastGood(cm *corev1.ConfigMap, sec *corev1.Secret) {
	t := parsePublished(cm, sec)
	if t == nil || sec == nil || t.Hash() != cm.Annotations[ConfigHashAnnotation] {
		return
	}
	// Only the table's key: parsePublished read exactly one of them.
	table := &routing.PublishedTable{Hash: t.Hash()}
	if v, ok := cm.Data[TableKey]; ok {
		table.Data = map[string]string{TableKey: v}
	} else {
		table.BinaryData = map[string][]byte{CompressedTableKey: cm.BinaryData[CompressedTableKey]}
	}
	p.lastGood = &rendered{table: table, credentials: sec.Data[CredentialsKey], hash: t.Hash()}
}

// gather lists the objects a table is compiled from: every object of the inputKinds in the
// watched namespaces and the Secrets their channels reference.
func (p *Publisher) gather(ctx context.Context) (routing.Inputs, error) {
	var in routing.Inputs
	namespaces := p.opts.WatchNamespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		for _, k := range inputKinds {
			if err := k.List(ctx, p.client, ns, &in); err != nil {
				return in, err
			}
		}
	}
	seen := map[client.ObjectKey]bool{}
	for i := range in.Channels {
		pc := &in.Channels[i]
		for _, name := range routing.SecretNames(pc) {
			key := client.ObjectKey{Namespace: pc.Namespace, Name: name}
			if seen[key] {
				continue
			}
			seen[key] = true
			switch s, err := p.secrets.get(ctx, key); {
			case apierrors.IsNotFound(err):
				// Compile reports the missing Secret on the channel.
			case err != nil:
				return in, fmt.Errorf("failed to get Secret %s: %w", key, err)
			default:
				in.Secrets = append(in.Secrets, *s)
			}
		}
	}
	if err := p.gatherClients(ctx, &in, seen); err != nil {
		return in, err
	}
	seen[p.credentialsKey()] = true
	p.secrets.retain(seen)
	ck := p.credentialsKey()
	in.ReservedSecrets = map[string]bool{ck.Namespace + "/" + ck.Name: true}
	return in, nil
}

// current returns the published ConfigMap and Secret, nil when missing.
func (p *Publisher) current(ctx context.Context) (*corev1.ConfigMap, *corev1.Secret, error) {
	cm := &corev1.ConfigMap{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: p.opts.ProxyNamespace, Name: p.opts.ConfigMapName}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("failed to get ConfigMap: %w", err)
		}
		cm = nil
	}
	sec, err := p.secrets.get(ctx, p.credentialsKey())
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("failed to get credentials Secret: %w", err)
		}
		sec = nil
	}
	return cm, sec, nil
}

func (p *Publisher) credentialsKey() client.ObjectKey {
	return client.ObjectKey{Namespace: p.opts.ProxyNamespace, Name: p.opts.CredentialsSecretName}
}

func (p *Publisher) labels() map[string]string {
	return map[string]string{ManagedByLabel: ManagedByValue}
}

// The writes are server-side applies: idempotent, so a cache that lags behind our own last write
// costs one no-op request rather than a conflict.
func (p *Publisher) applyConfigMap(ctx context.Context, r *rendered) error {
	cm := corev1ac.ConfigMap(p.opts.ConfigMapName, p.opts.ProxyNamespace).
		WithLabels(p.labels()).
		WithAnnotations(map[string]string{ConfigHashAnnotation: r.hash}).
		WithData(r.table.Data).
		WithBinaryData(r.table.BinaryData)
	if err := p.client.Apply(ctx, cm, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply ConfigMap %s/%s: %w", p.opts.ProxyNamespace, p.opts.ConfigMapName, err)
	}
	return nil
}

func (p *Publisher) applySecret(ctx context.Context, r *rendered) error {
	s := corev1ac.Secret(p.opts.CredentialsSecretName, p.opts.ProxyNamespace).
		WithType(corev1.SecretTypeOpaque).
		WithLabels(p.labels()).
		WithLabels(map[string]string{routing.InternalSecretLabel: "true"}). // no channel may reference it
		WithAnnotations(map[string]string{ConfigHashAnnotation: r.hash}).
		WithData(map[string][]byte{CredentialsKey: r.credentials})
	if err := p.client.Apply(ctx, s, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply Secret %s/%s: %w", p.opts.ProxyNamespace, p.opts.CredentialsSecretName, err)
	}
	return nil
}

// problemsFor returns the problems of one object.
func problemsFor(problems []routing.Problem, kind, namespace, name string) []routing.Problem {
	var out []routing.Problem
	for _, p := range problems {
		if p.Kind == kind && p.Namespace == namespace && p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// problemObjects names the objects with problems, for the "held back by" message.
func problemObjects(problems []routing.Problem) []string {
	var out []string
	for _, p := range problems {
		s := fmt.Sprintf("%s %s/%s (%s)", p.Kind, p.Namespace, p.Name, p.Reason)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
