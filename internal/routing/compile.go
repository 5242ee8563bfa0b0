package routing

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
	"github.com/switchyard-io/switchyard/internal/provider/vertex"
)

// Inputs are the objects a table is compiled from.
type Inputs struct {
	Channels []v1alpha1.ProviderChannel
	Policies []v1alpha1.RoutingPolicy
	Secrets  []corev1.Secret
	// Clients are compiled by CompileClients, not Compile (their keys Secrets are in Secrets).
	Clients []v1alpha1.GatewayClient
	// KeyOverrides maps a channel ID (see Channel.ID) to a key that wins over its credentialsRef (standalone
	// mode fills it from SWITCHYARD_KEY_<CHANNEL> environment variables).
	KeyOverrides map[string]string
	// ReservedSecrets are Secrets ("namespace/name") no channel may reference, labelled or not:
	// the controller's own credentials Secret, which holds every team's keys.
	ReservedSecrets map[string]bool
}

// InternalSecretLabel marks a Secret as Switchyard's own (the controller labels its credentials
// Secret with it, value "true"): no ProviderChannel may reference it, or a team could send every
// other team's keys, as a Bearer token, to a baseURL of its choosing.
const InternalSecretLabel = "switchyard.io/internal"

// Problem is one reason an object cannot be compiled. Problems are reported on the object's status
// (controller) or refused as a whole with the last good table still serving (standalone).
type Problem struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Reason is CamelCase, for a condition's reason.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Reasons a Problem carries.
const (
	ReasonInvalidSpec         = "InvalidSpec"
	ReasonUnsupportedProvider = "UnsupportedProvider"
	ReasonSecretNotFound      = "SecretNotFound"
	ReasonSecretKeyNotFound   = "SecretKeyNotFound"
	ReasonDuplicateChannel    = "DuplicateChannelName"
	ReasonChannelNotFound     = "ChannelNotFound"
	ReasonChannelNotReady     = "ChannelNotReady"
	ReasonModelNotServed      = "ModelNotServed"
	ReasonModelConflict       = "ModelConflict"
	ReasonUnknownModel        = "UnknownModel"
	ReasonRefNotPermitted     = "RefNotPermitted"
	// ReasonFallbackNotAccepted: a fallback or context-overflow model is routed by a policy in
	// another namespace whose acceptFallbackFrom does not list this policy's namespace.
	ReasonFallbackNotAccepted = "FallbackNotAccepted"
)

// HoldsBack reports whether the problem keeps its object from being published as compiled. A
// fallback or context-overflow model that cannot be followed (no policy routes it, or its policy's
// namespace does not accept this one's) does not: the policy still serves its own models, and the
// proxy skips such a hop. Holding the policy back would let another team's change (a policy
// broken or removed, a consent withdrawn) freeze this team's edits.
func (p Problem) HoldsBack() bool {
	return !(p.Kind == "RoutingPolicy" && (p.Reason == ReasonUnknownModel || p.Reason == ReasonFallbackNotAccepted))
}

// Blocking returns the problems that hold their object back (see HoldsBack).
func Blocking(problems []Problem) []Problem {
	var out []Problem
	for _, p := range problems {
		if p.HoldsBack() {
			out = append(out, p)
		}
	}
	return out
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s", p.Kind, QualifiedName(p.Namespace, p.Name), p.Message)
}

// Compile builds the routing table. It is pure and deterministic: the same inputs give the same
// table (and Hash) whatever their order. The table is only safe to serve as a whole when no
// Problem that HoldsBack is returned (Isolate serves the rest).
func Compile(in Inputs) (*Table, []Problem) {
	c := compiler{secrets: map[string]*corev1.Secret{}, reserved: in.ReservedSecrets}
	for i := range in.Secrets {
		s := &in.Secrets[i]
		c.secrets[QualifiedName(s.Namespace, s.Name)] = s
	}
	t := &Table{Credentials: map[string]Secret{}}

	// Channels are namespaced: two teams may each have one named "openai". Only the same
	// namespace/name twice (two standalone manifest files) is a duplicate.
	channels := slices.Clone(in.Channels)
	sort.Slice(channels, func(i, j int) bool {
		return ChannelID(channels[i].Namespace, channels[i].Name) < ChannelID(channels[j].Namespace, channels[j].Name)
	})
	byKey := map[string]*v1alpha1.ProviderChannel{}
	for i := range channels {
		pc := &channels[i]
		id := ChannelID(pc.Namespace, pc.Name)
		if i > 0 && ChannelID(channels[i-1].Namespace, channels[i-1].Name) == id {
			c.problem("ProviderChannel", pc.Namespace, pc.Name, ReasonDuplicateChannel,
				fmt.Sprintf("ProviderChannel %s is declared twice", id))
			continue
		}
		ch, key, ok := c.channel(pc)
		if !ok {
			continue
		}
		tlsSettings, parts, ok := c.channelTLS(pc)
		if !ok {
			continue
		}
		ch.TLS = tlsSettings
		for part, v := range parts {
			t.Credentials[CredentialPart(id, part)] = NewSecret(v)
		}
		if override, ok := in.KeyOverrides[id]; ok && override != "" {
			if msg := checkOverride(pc.Spec.Provider, override); msg != "" {
				c.problem("ProviderChannel", pc.Namespace, pc.Name, ReasonInvalidSpec, msg)
				continue
			}
			key, ch.HasCredentials = override, true
		}
		if ch.HasCredentials {
			t.Credentials[id] = NewSecret(key)
		}
		t.Channels = append(t.Channels, ch)
		byKey[QualifiedName(pc.Namespace, pc.Name)] = pc
	}

	// The older policy keeps a contested model: a newcomer must not take it over from the one
	// serving it (standalone manifests have no timestamps and fall back to name order).
	policies := slices.Clone(in.Policies)
	sort.SliceStable(policies, func(i, j int) bool {
		ti, tj := policies[i].CreationTimestamp, policies[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return QualifiedName(policies[i].Namespace, policies[i].Name) < QualifiedName(policies[j].Namespace, policies[j].Name)
	})
	claimed := map[string]string{} // model -> policy that routes it
	for i := range policies {
		rp := &policies[i]
		p, ok := c.policy(rp, channels, byKey, t)
		if !ok {
			continue
		}
		conflict := false
		for _, m := range p.Models {
			if other, taken := claimed[m]; taken {
				c.problem("RoutingPolicy", rp.Namespace, rp.Name, ReasonModelConflict,
					fmt.Sprintf("model %q is already routed by RoutingPolicy %s; one policy per model", m, other))
				conflict = true
			}
		}
		if conflict {
			continue
		}
		for _, m := range p.Models {
			claimed[m] = QualifiedName(rp.Namespace, rp.Name)
		}
		t.Policies = append(t.Policies, p)
	}
	c.checkFallbacks(t)
	return t, c.problems
}

type compiler struct {
	reserved map[string]bool
	secrets  map[string]*corev1.Secret
	problems []Problem
}

func (c *compiler) problem(kind, ns, name, reason, msg string) {
	c.problems = append(c.problems, Problem{Kind: kind, Namespace: ns, Name: name, Reason: reason, Message: msg})
}

// channel compiles one ProviderChannel and resolves its key. ok is false when it has a problem.
func (c *compiler) channel(pc *v1alpha1.ProviderChannel) (ch Channel, key string, ok bool) {
	spec := &pc.Spec
	bad := func(reason, format string, args ...any) (Channel, string, bool) {
		c.problem("ProviderChannel", pc.Namespace, pc.Name, reason, fmt.Sprintf(format, args...))
		return Channel{}, "", false
	}
	cloud := spec.Provider == v1alpha1.ProviderBedrock || spec.Provider == v1alpha1.ProviderVertex
	switch spec.Provider {
	case v1alpha1.ProviderOpenAI, v1alpha1.ProviderAzureOpenAI, v1alpha1.ProviderAnthropic:
		if spec.Region != "" {
			return bad(ReasonInvalidSpec, "spec.region: only used by bedrock and vertex (failureDomain.region describes where a channel runs)")
		}
		if spec.Project != "" {
			return bad(ReasonInvalidSpec, "spec.project: only used by vertex")
		}
		if spec.BaseURL == "" {
			return bad(ReasonInvalidSpec, "spec.baseURL: required for provider %q (only bedrock and vertex derive it from region)", spec.Provider)
		}
	case v1alpha1.ProviderBedrock:
		if err := bedrock.Validate(spec); err != nil {
			return bad(ReasonInvalidSpec, "%v", err)
		}
	case v1alpha1.ProviderVertex:
		if err := vertex.Validate(spec); err != nil {
			return bad(ReasonInvalidSpec, "%v", err)
		}
	default:
		return bad(ReasonInvalidSpec, "spec.provider: unsupported value %q: supported values: \"openai\", \"azure-openai\", \"anthropic\", \"bedrock\", \"vertex\"", spec.Provider)
	}
	// bedrock and vertex derive their endpoint from region when baseURL is absent.
	if !cloud || spec.BaseURL != "" {
		if msg := checkBaseURL(spec.Provider, spec.BaseURL); msg != "" {
			return bad(ReasonInvalidSpec, "%s", msg)
		}
	}
	if len(spec.Models) == 0 {
		return bad(ReasonInvalidSpec, "spec.models: at least one model is required")
	}
	seen := map[string]bool{}
	for i, m := range spec.Models {
		if m.Name == "" {
			return bad(ReasonInvalidSpec, "spec.models[%d].name: required", i)
		}
		if seen[m.Name] {
			return bad(ReasonInvalidSpec, "spec.models[%d].name: duplicate model %q", i, m.Name)
		}
		seen[m.Name] = true
		up := m.UpstreamModel
		if up == "" {
			up = m.Name
		}
		caps, msg := resolveCapabilities(spec.Provider, m.Capabilities)
		if msg != "" {
			return bad(ReasonInvalidSpec, "spec.models[%d].capabilities.%s", i, msg)
		}
		ch.Models = append(ch.Models, ChannelModel{Name: m.Name, Upstream: up, Capabilities: caps})
	}
	ch.Weight = int(spec.Weight)
	if ch.Weight == 0 {
		ch.Weight = DefaultWeight
	}
	if ch.Weight < 1 || ch.Weight > 1000 {
		return bad(ReasonInvalidSpec, "spec.weight: %d is outside 1-1000", spec.Weight)
	}
	var err error
	if ch.Timeouts, err = ResolveTimeouts(spec.Timeouts); err != nil {
		return bad(ReasonInvalidSpec, "%v", err)
	}
	if !spec.Disabled && (spec.DisabledUntil != nil || spec.DisabledReason != "") {
		return bad(ReasonInvalidSpec, "spec.disabledUntil and spec.disabledReason are only allowed with disabled: true")
	}
	if spec.FaultInjection != nil {
		if ch.Fault, err = compileFault(spec.FaultInjection); err != nil {
			return bad(ReasonInvalidSpec, "%v", err)
		}
	}
	if ref := spec.CredentialsRef; ref != nil {
		if c.reserved[QualifiedName(pc.Namespace, ref.Name)] {
			return bad(ReasonRefNotPermitted, "spec.credentialsRef: Secret %s is Switchyard's own credentials Secret; a channel may reference only its team's Secrets", QualifiedName(pc.Namespace, ref.Name))
		}
		s, found := c.secrets[QualifiedName(pc.Namespace, ref.Name)]
		if found && s.Labels[InternalSecretLabel] == "true" {
			return bad(ReasonRefNotPermitted, "spec.credentialsRef: Secret %s is labelled %s=true (Switchyard's own); a channel may reference only its team's Secrets", QualifiedName(pc.Namespace, ref.Name), InternalSecretLabel)
		}
		if !found {
			return bad(ReasonSecretNotFound, "spec.credentialsRef: Secret %s not found", QualifiedName(pc.Namespace, ref.Name))
		}
		v, reason, msg := credentialsOf(spec.Provider, s, ref)
		if msg != "" {
			return bad(reason, "%s", msg)
		}
		key, ch.HasCredentials = v, true
	}
	ch.Name, ch.Namespace, ch.Generation = pc.Name, pc.Namespace, pc.Generation
	ch.Provider = string(spec.Provider)
	ch.BaseURL = strings.TrimRight(spec.BaseURL, "/")
	ch.Region, ch.Project = spec.Region, spec.Project
	if spec.FailureDomain != nil {
		ch.Domain = FailureDomain{Region: spec.FailureDomain.Region, Account: spec.FailureDomain.Account, Egress: spec.FailureDomain.Egress}
	}
	ch.Residency = spec.Residency
	ch.Disabled = spec.Disabled
	ch.DisabledReason = spec.DisabledReason
	ch.DisabledUntil = timePtr(spec.DisabledUntil)
	return ch, key, true
}

// checkBaseURL returns why a channel's baseURL cannot be used, or "". Requests go to baseURL + the
// API path, and the table that carries baseURL is published (routing ConfigMap, admin API), so it
// must be a plain http(s)://host/path: credentials belong in the Secret of credentialsRef, and a
// query or fragment would end up in the middle of every upstream URL. The message never quotes the
// value as written, only redactURL's scheme://host/path of it.
func checkBaseURL(provider v1alpha1.Provider, raw string) string {
	shown := redactURL(raw)
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(raw, "@"), err == nil && u.User != nil:
		// An unparsable value with an "@" is userinfo with characters a URL does not allow there.
		return fmt.Sprintf("spec.baseURL must not carry credentials (%q): put the key in a Secret and reference it with spec.credentialsRef", shown)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "":
		return fmt.Sprintf("spec.baseURL: %q is not an http:// or https:// URL", shown)
	case u.Hostname() == "":
		return fmt.Sprintf("spec.baseURL: %q has no host", shown)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#"):
		msg := fmt.Sprintf("spec.baseURL must not carry a query string or fragment (%q): requests go to baseURL + the API path, so a query or fragment would land in the middle of every upstream URL", shown)
		if provider == v1alpha1.ProviderAzureOpenAI || strings.Contains(strings.ToLower(u.RawQuery), "api-version") {
			msg += "; the azure-openai provider speaks Azure's v1 API (https://<resource>.openai.azure.com/openai/v1), which takes no api-version"
		}
		return msg
	}
	return ""
}

// redactURL shows a baseURL as scheme://host/path, for messages: everything up to the last "@"
// (userinfo, even when the value does not parse), the query and the fragment are dropped.
func redactURL(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	return prefix + rest
}

func isScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

func compileFault(f *v1alpha1.FaultInjection) (*FaultInjection, error) {
	// The CRD defaults percent to 100; standalone manifests skip the API server, so do it here too.
	out := &FaultInjection{Percent: 100, Hang: f.Hang, OnlyMarked: f.OnlyMarked, Until: timePtr(f.Until)}
	if f.Percent != nil {
		out.Percent = int(*f.Percent)
	}
	if out.Percent < 0 || out.Percent > 100 {
		return nil, fmt.Errorf("spec.faultInjection.percent: %d is outside 0-100", out.Percent)
	}
	if f.AbortStatus != nil {
		out.AbortStatus = int(*f.AbortStatus)
		if out.AbortStatus < 400 || out.AbortStatus > 599 {
			return nil, fmt.Errorf("spec.faultInjection.abortStatus: %d is outside 400-599", out.AbortStatus)
		}
	}
	if f.Delay != nil {
		r := resolver{}
		r.duration(&out.Delay, f.Delay, "spec.faultInjection.delay")
		if r.err != nil {
			return nil, r.err
		}
	}
	if out.AbortStatus == 0 && out.Delay == 0 && !out.Hang {
		return nil, fmt.Errorf("spec.faultInjection: needs at least one of abortStatus, delay or hang")
	}
	return out, nil
}

// policy compiles one RoutingPolicy against the compiled channels.
func (c *compiler) policy(rp *v1alpha1.RoutingPolicy, channels []v1alpha1.ProviderChannel, byKey map[string]*v1alpha1.ProviderChannel, t *Table) (Policy, bool) {
	bad := func(reason, format string, args ...any) (Policy, bool) {
		c.problem("RoutingPolicy", rp.Namespace, rp.Name, reason, fmt.Sprintf(format, args...))
		return Policy{}, false
	}
	spec := &rp.Spec
	if len(spec.Models) == 0 {
		return bad(ReasonInvalidSpec, "spec.models: at least one model is required")
	}
	if (len(spec.Channels) > 0) == (spec.ChannelSelector != nil) {
		return bad(ReasonInvalidSpec, "spec: exactly one of channels or channelSelector is required")
	}
	eff, err := ResolvePolicy(spec)
	if err != nil {
		return bad(ReasonInvalidSpec, "%v", err)
	}
	p := Policy{
		Name: rp.Name, Namespace: rp.Namespace, Generation: rp.Generation,
		Models:                slices.Clone(spec.Models),
		Strategy:              eff.Strategy,
		Scenario:              eff.Scenario,
		Settings:              eff.Settings,
		Retry:                 eff.Retry,
		FallbackModels:        slices.Clone(spec.FallbackModels),
		ContextOverflowModels: slices.Clone(spec.ContextOverflowModels),
		AcceptFallbackFrom:    slices.Clone(spec.AcceptFallbackFrom),
		RequireResidency:      slices.Clone(spec.RequireResidency),
		PanicRouting:          eff.PanicRouting,
		StreamRecovery:        eff.StreamRecovery,
		MaxContinuations:      eff.MaxContinuations,
	}
	if p.PII, err = compilePII(spec.PII); err != nil {
		return bad(ReasonInvalidSpec, "%v", err)
	}
	if p.Rollout, err = compileRollout(spec.Rollout); err != nil {
		return bad(ReasonInvalidSpec, "%v", err)
	}

	// Candidates: the listed channels in list order, or the selected ones in name order.
	var refs []v1alpha1.ChannelRef
	if spec.ChannelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.ChannelSelector)
		if err != nil {
			return bad(ReasonInvalidSpec, "spec.channelSelector: %v", err)
		}
		for i := range channels {
			if channels[i].Namespace == rp.Namespace && sel.Matches(labels.Set(channels[i].Labels)) {
				refs = append(refs, v1alpha1.ChannelRef{Name: channels[i].Name})
			}
		}
	} else {
		refs = spec.Channels
	}
	for _, ref := range refs {
		pc, found := byKey[QualifiedName(rp.Namespace, ref.Name)]
		if !found {
			if _, exists := findChannel(channels, rp.Namespace, ref.Name); exists {
				return bad(ReasonChannelNotReady, "spec.channels: ProviderChannel %s is not ready (see its status)", QualifiedName(rp.Namespace, ref.Name))
			}
			return bad(ReasonChannelNotFound, "spec.channels: ProviderChannel %s not found", QualifiedName(rp.Namespace, ref.Name))
		}
		ch, _ := t.Channel(ChannelID(pc.Namespace, pc.Name))
		if len(p.RequireResidency) > 0 && !slices.Contains(p.RequireResidency, ch.Residency) {
			continue // never a candidate, not even in panic routing
		}
		w := ch.Weight
		if ref.Weight != nil {
			w = int(*ref.Weight)
		}
		p.Channels = append(p.Channels, PolicyChannel{Channel: ch.ID(), Weight: w})
	}
	for _, m := range p.Models {
		served := false
		for _, pcand := range p.Channels {
			ch, _ := t.Channel(pcand.Channel)
			if _, ok := ch.Upstream(m); ok {
				served = true
				break
			}
		}
		if !served {
			msg := fmt.Sprintf("model %q is served by none of the policy's channels", m)
			if len(p.RequireResidency) > 0 {
				msg = fmt.Sprintf("model %q is served by none of the policy's channels with residency in %v", m, p.RequireResidency)
			}
			return bad(ReasonModelNotServed, "%s", msg)
		}
	}
	return p, true
}

func findChannel(channels []v1alpha1.ProviderChannel, ns, name string) (*v1alpha1.ProviderChannel, bool) {
	for i := range channels {
		if channels[i].Namespace == ns && channels[i].Name == name {
			return &channels[i], true
		}
	}
	return nil, false
}

// credentialsOf reads a channel's credentials from its Secret: the key credentialsRef names, or
// for bedrock and vertex the adapter's own form of them (SecretValue). On failure, reason and msg
// (naming the field and the key) are the problem's.
func credentialsOf(p v1alpha1.Provider, s *corev1.Secret, ref *v1alpha1.SecretKeyRef) (v, reason, msg string) {
	switch p {
	case v1alpha1.ProviderBedrock:
		v, err := bedrock.SecretValue(s)
		if err != nil {
			return "", ReasonSecretKeyNotFound, err.Error()
		}
		return v, "", ""
	case v1alpha1.ProviderVertex:
		key := vertex.SecretKeyOf(ref)
		if _, found := secretValue(s, key); !found {
			return "", ReasonSecretKeyNotFound, fmt.Sprintf("spec.credentialsRef: Secret %s has no key %q", QualifiedName(s.Namespace, s.Name), key)
		}
		v, err := vertex.SecretValue(s, key)
		if err != nil {
			return "", ReasonInvalidSpec, err.Error()
		}
		return v, "", ""
	}
	v, found := secretValue(s, ref.Key)
	if !found {
		return "", ReasonSecretKeyNotFound, fmt.Sprintf("spec.credentialsRef: Secret %s has no key %q", QualifiedName(s.Namespace, s.Name), ref.Key)
	}
	return v, "", ""
}

// checkOverride says why a key override cannot be a channel's credentials, or "": bedrock takes
// the JSON SecretValue makes ({"accessKeyId","secretAccessKey","sessionToken"}), vertex a
// service-account key file. The message never quotes the value.
func checkOverride(p v1alpha1.Provider, v string) string {
	switch p {
	case v1alpha1.ProviderBedrock:
		if _, err := bedrock.ParseCredentials(v); err != nil {
			return "credentials override: " + err.Error()
		}
	case v1alpha1.ProviderVertex:
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "override"}, StringData: map[string]string{vertex.SecretKey: v}}
		if _, err := vertex.SecretValue(s, vertex.SecretKey); err != nil {
			return "credentials override: " + err.Error()
		}
	}
	return ""
}

func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	if v, ok := s.Data[key]; ok {
		return string(v), true
	}
	return "", false
}

// QualifiedName is an object's namespace/name, or its name alone outside namespaces (standalone).
func QualifiedName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func timePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// compileRollout translates spec.rollout: nil for Enforce at 100% (the policy steers every
// request, as without the field). The CRD's schema refuses what it refuses here too; the
// standalone proxy reads manifests that no API server checked.
func compileRollout(r *v1alpha1.Rollout) (*Rollout, error) {
	if r == nil {
		return nil, nil
	}
	out := &Rollout{Percent: 100}
	if r.Percent != nil {
		out.Percent = int(*r.Percent)
	}
	if out.Percent < 1 || out.Percent > 100 {
		return nil, fmt.Errorf("spec.rollout.percent: %d is not within 1-100", out.Percent)
	}
	switch r.Mode {
	case "", v1alpha1.RolloutEnforce:
	case v1alpha1.RolloutDryRun:
		if out.Percent != 100 {
			return nil, fmt.Errorf("spec.rollout.percent: must be 100 with mode DryRun (a dry run steers no request), not %d", out.Percent)
		}
		out.DryRun = true
	default:
		return nil, fmt.Errorf("spec.rollout.mode: %q is not Enforce or DryRun", r.Mode)
	}
	if !out.DryRun && out.Percent == 100 {
		return nil, nil
	}
	return out, nil
}
