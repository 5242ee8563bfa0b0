package crdvalidation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func object(t *testing.T, kind, name, ns, spec string) *unstructured.Unstructured {
	t.Helper()
	doc := fmt.Sprintf("apiVersion: switchyard.io/v1alpha1\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", kind, name, ns, indent(spec))
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	return u
}

func indent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

const validChannel = `
provider: openai
baseURL: https://api.example.com/v1
models: [{name: gpt-4o}]
`

const validPolicy = `
models: [gpt-4o]
channels: [{name: a}]
`

// TestValidObjectsAccepted guards the invalid table below: its base objects must be valid, so
// each rejection is caused by the one field the case changes.
func TestValidObjectsAccepted(t *testing.T) {
	ns := newNamespace(t)
	for i, c := range []struct{ kind, spec string }{
		{"ProviderChannel", validChannel},
		{"RoutingPolicy", validPolicy},
		{"RoutingPolicy", "models: [x]\nchannelSelector: {matchLabels: {team: a}}\nrecovery: {rampSteps: [100], cooldown: 1m, maxCooldown: 1m}"},
		{"RoutingPolicy", validPolicy + "scenario: batch\ndetection: {recentErrorWindow: 2m}\nrecovery: {maxCooldown: 10m}\nfallbackModels: [gpt-4o-mini]"},
		{"RoutingPolicy", validPolicy + "detection: {window: 2m, recentErrorWindow: 2m}\nrecovery: {maxCooldown: 5m}"},
		{"RoutingPolicy", validPolicy + "acceptFallbackFrom: [team-a, search-2, \"*\"]"},
		{"RoutingPolicy", validPolicy + "streamRecovery: Continue\nmaxContinuations: 2"},
		{"RoutingPolicy", validPolicy + "streamRecovery: Error\nmaxContinuations: 0"},
		{"RoutingPolicy", validPolicy + "streamRecovery: Error"},
		// 0 turns the timeout-rate rule off (chat's default, written out as the contract shows it).
		{"RoutingPolicy", validPolicy + "scenario: batch\ndetection: {timeoutRatePercent: 0}"},
		{"RoutingPolicy", validPolicy + "pii: {mode: Mask, detectors: [email, kz-iin], restore: false, customDetectors: [{name: employee-id, pattern: 'EMP-[0-9]{6}'}]}"},
		{"RoutingPolicy", validPolicy + "pii: {mode: \"Off\", customDetectors: [{name: ticket, pattern: 'T-\\d+'}]}"},
		{"ProviderChannel", "provider: anthropic\nbaseURL: https://api.example.com/v1\nmodels: [{name: claude-sonnet-4-5, upstreamModel: claude-sonnet-4-5-20250929, capabilities: {prefill: true, contextWindow: 200000, maxOutputTokens: 64000, vision: true, tools: true}}, {name: claude-haiku}]"},
		{"ProviderChannel", validChannel + "disabled: true\ndisabledUntil: \"2026-11-30T12:30:00Z\"\ndisabledReason: INC-1\ntimeouts: {request: 30s, fallbackRequest: 30s}\nfaultInjection: {hang: true}"},
	} {
		if err := env.Client.Create(context.Background(), object(t, c.kind, fmt.Sprintf("ok-%d", i), ns, c.spec)); err != nil {
			t.Errorf("valid %s %d rejected: %v", c.kind, i, err)
		}
	}
}

func TestInvalidObjectsRejected(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name, kind, spec string
		// want are substrings of the API server's message: the field path first.
		want []string
	}{
		{"unknown provider", "ProviderChannel", strings.Replace(validChannel, "openai", "gemini", 1), []string{"spec.provider", `Unsupported value: "gemini"`}},
		{"baseURL not http", "ProviderChannel", strings.Replace(validChannel, "https://api.example.com/v1", "ftp://api.example.com/v1", 1), []string{"spec.baseURL", "http:// or https://"}},
		{"baseURL not a URL", "ProviderChannel", strings.Replace(validChannel, "https://api.example.com/v1", "api example", 1), []string{"spec.baseURL", "http:// or https://"}},
		{"no models", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[]", 1), []string{"spec.models", "at least 1"}},
		{"models missing", "ProviderChannel", "provider: openai\nbaseURL: https://x.example/v1", []string{"spec.models", "Required"}},
		{"duplicate model", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[{name: gpt-4o}, {name: gpt-4o}]", 1), []string{"spec.models[1]", "Duplicate value"}},
		{"weight zero", "ProviderChannel", validChannel + "weight: 0", []string{"spec.weight", "greater than or equal to 1"}},
		{"weight too big", "ProviderChannel", validChannel + "weight: 1001", []string{"spec.weight", "less than or equal to 1000"}},
		{"fallback exceeds request", "ProviderChannel", validChannel + "timeouts: {request: 10s, fallbackRequest: 20s}", []string{"spec.timeouts.fallbackRequest", "fallbackRequest must not exceed request"}},
		{"zero duration", "ProviderChannel", validChannel + "timeouts: {firstByte: 0s}", []string{"spec.timeouts.firstByte", "must be a positive duration"}},
		{"duration not a duration", "ProviderChannel", validChannel + "timeouts: {streamIdle: 10 seconds}", []string{"spec.timeouts.streamIdle", "should match"}},
		{"disabledUntil without disabled", "ProviderChannel", validChannel + "disabledUntil: \"2026-11-30T12:30:00Z\"", []string{"spec.disabledUntil", "only allowed with disabled: true"}},
		{"disabledReason with disabled false", "ProviderChannel", validChannel + "disabled: false\ndisabledReason: INC-1", []string{"spec.disabledReason", "only allowed with disabled: true"}},
		{"fault without a fault", "ProviderChannel", validChannel + "faultInjection: {percent: 10, onlyMarked: true}", []string{"spec.faultInjection", "needs at least one of abortStatus, delay or hang"}},
		{"abortStatus below 400", "ProviderChannel", validChannel + "faultInjection: {abortStatus: 302}", []string{"spec.faultInjection.abortStatus", "greater than or equal to 400"}},
		{"abortStatus above 599", "ProviderChannel", validChannel + "faultInjection: {abortStatus: 600}", []string{"spec.faultInjection.abortStatus", "less than or equal to 599"}},
		{"fault percent above 100", "ProviderChannel", validChannel + "faultInjection: {abortStatus: 503, percent: 101}", []string{"spec.faultInjection.percent", "less than or equal to 100"}},
		{"credentialsRef without key", "ProviderChannel", validChannel + "credentialsRef: {name: k}", []string{"spec.credentialsRef.key", "credentialsRef.key is required for this provider"}},
		{"channels and selector", "RoutingPolicy", validPolicy + "channelSelector: {matchLabels: {a: b}}", []string{"spec", "exactly one of channels or channelSelector is required"}},
		{"neither channels nor selector", "RoutingPolicy", "models: [gpt-4o]", []string{"spec", "exactly one of channels or channelSelector is required"}},
		{"ramp not increasing", "RoutingPolicy", validPolicy + "recovery: {rampSteps: [5, 50, 15, 100]}", []string{"spec.recovery.rampSteps", "strictly increasing"}},
		{"ramp repeats a step", "RoutingPolicy", validPolicy + "recovery: {rampSteps: [5, 5, 100]}", []string{"spec.recovery.rampSteps", "strictly increasing"}},
		{"ramp not ending at 100", "RoutingPolicy", validPolicy + "recovery: {rampSteps: [5, 15, 50]}", []string{"spec.recovery.rampSteps", "must end at 100"}},
		{"ramp step zero", "RoutingPolicy", validPolicy + "recovery: {rampSteps: [0, 100]}", []string{"spec.recovery.rampSteps[0]", "greater than or equal to 1"}},
		{"maxCooldown below cooldown", "RoutingPolicy", validPolicy + "recovery: {cooldown: 5m, maxCooldown: 1m}", []string{"spec.recovery.maxCooldown", "maxCooldown must be at least cooldown"}},
		{"error rate above 100", "RoutingPolicy", validPolicy + "detection: {errorRatePercent: 101}", []string{"spec.detection.errorRatePercent", "less than or equal to 100"}},
		{"negative timeout rate", "RoutingPolicy", validPolicy + "detection: {timeoutRatePercent: -1}", []string{"spec.detection.timeoutRatePercent", "greater than or equal to 0"}},
		{"minRequests zero", "RoutingPolicy", validPolicy + "detection: {minRequests: 0}", []string{"spec.detection.minRequests", "greater than or equal to 1"}},
		{"negative window", "RoutingPolicy", validPolicy + "detection: {window: -5s}", []string{"spec.detection.window", "should match"}},
		{"unknown scenario", "RoutingPolicy", validPolicy + "scenario: interactive", []string{"spec.scenario", `Unsupported value: "interactive"`}},
		{"unknown strategy", "RoutingPolicy", validPolicy + "strategy: RoundRobin", []string{"spec.strategy", `Unsupported value: "RoundRobin"`}},
		{"duplicate policy model", "RoutingPolicy", "models: [gpt-4o, gpt-4o]\nchannels: [{name: a}]", []string{"spec.models[1]", "Duplicate value"}},
		{"duplicate channel ref", "RoutingPolicy", "models: [gpt-4o]\nchannels: [{name: a}, {name: a}]", []string{"spec.channels[1]", "Duplicate value"}},
		{"no policy models", "RoutingPolicy", "models: []\nchannels: [{name: a}]", []string{"spec.models", "at least 1"}},
		{"backoff max below base", "RoutingPolicy", validPolicy + "retry: {backoff: {base: 2s, max: 1s}}", []string{"spec.retry.backoff.max", "max must be at least base"}},
		{"ejectBelow above degradedBelow", "RoutingPolicy", validPolicy + "healthScore: {degradedBelow: 40, ejectBelow: 60}", []string{"spec.healthScore.ejectBelow", "ejectBelow must not exceed degradedBelow"}},
		{"maxAttempts zero", "RoutingPolicy", validPolicy + "retry: {maxAttempts: 0}", []string{"spec.retry.maxAttempts", "greater than or equal to 1"}},
		{"policy weight too big", "RoutingPolicy", "models: [gpt-4o]\nchannels: [{name: a, weight: 5000}]", []string{"spec.channels[0].weight", "less than or equal to 1000"}},
		{"capabilities output over context", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[{name: c, capabilities: {contextWindow: 1000, maxOutputTokens: 2000}}]", 1), []string{"spec.models[0].capabilities.maxOutputTokens", "maxOutputTokens must not exceed contextWindow"}},
		{"capabilities zero context", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[{name: c, capabilities: {contextWindow: 0}}]", 1), []string{"spec.models[0].capabilities.contextWindow", "greater than or equal to 1"}},
		{"capabilities zero output", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[{name: c, capabilities: {maxOutputTokens: 0}}]", 1), []string{"spec.models[0].capabilities.maxOutputTokens", "greater than or equal to 1"}},
		{"capabilities vision not a bool", "ProviderChannel", strings.Replace(validChannel, "[{name: gpt-4o}]", "[{name: c, capabilities: {vision: maybe}}]", 1), []string{"spec.models[0].capabilities.vision", "boolean"}},
		{"recentErrorWindow over the window", "RoutingPolicy", validPolicy + "detection: {window: 30s, recentErrorWindow: 45s}", []string{"spec.detection.recentErrorWindow", "must not exceed the window in effect"}},
		{"recentErrorWindow over chat's window", "RoutingPolicy", validPolicy + "detection: {recentErrorWindow: 2m}", []string{"spec.detection.recentErrorWindow", "must not exceed the window in effect"}},
		{"maxCooldown below chat's cooldown", "RoutingPolicy", validPolicy + "recovery: {maxCooldown: 1m}", []string{"spec.recovery.maxCooldown", "at least the cooldown in effect"}},
		{"maxCooldown below batch's cooldown", "RoutingPolicy", validPolicy + "scenario: batch\nrecovery: {maxCooldown: 8m}", []string{"spec.recovery.maxCooldown", "at least the cooldown in effect"}},
		{"fallback onto itself", "RoutingPolicy", validPolicy + "fallbackModels: [gpt-4o-mini, gpt-4o]", []string{"spec.fallbackModels", "must not name a model this policy routes"}},
		{"context overflow onto itself", "RoutingPolicy", validPolicy + "contextOverflowModels: [gpt-4o]", []string{"spec.contextOverflowModels", "must not name a model this policy routes"}},
		{"acceptFallbackFrom not a namespace", "RoutingPolicy", validPolicy + "acceptFallbackFrom: [team-a, Team_B]", []string{"spec.acceptFallbackFrom[1]", "DNS-1123 label"}},
		{"streamRecovery unknown", "RoutingPolicy", validPolicy + "streamRecovery: Retry", []string{"spec.streamRecovery", "Unsupported value"}},
		{"maxContinuations negative", "RoutingPolicy", validPolicy + "maxContinuations: -1", []string{"spec.maxContinuations", "greater than or equal to 0"}},
		{"maxContinuations too many", "RoutingPolicy", validPolicy + "maxContinuations: 11", []string{"spec.maxContinuations", "less than or equal to 10"}},
		{"maxContinuations with Error", "RoutingPolicy", validPolicy + "streamRecovery: Error\nmaxContinuations: 2", []string{"spec.maxContinuations", "no effect with streamRecovery Error"}},
		{"acceptFallbackFrom glob", "RoutingPolicy", validPolicy + "acceptFallbackFrom: [\"team-*\"]", []string{"spec.acceptFallbackFrom[0]", "DNS-1123 label"}},
		{"pii mode unknown", "RoutingPolicy", validPolicy + "pii: {mode: Redact}", []string{"spec.pii.mode", `Unsupported value: "Redact"`}},
		{"pii mode Off unquoted (YAML reads false)", "RoutingPolicy", validPolicy + "pii: {mode: Off}", []string{"spec.pii.mode", "must be of type string"}},
		{"pii unknown detector", "RoutingPolicy", validPolicy + "pii: {mode: Mask, detectors: [email, passport]}", []string{"spec.pii.detectors[1]", `Unsupported value: "passport"`}},
		{"pii duplicate detector", "RoutingPolicy", validPolicy + "pii: {mode: Mask, detectors: [email, email]}", []string{"spec.pii.detectors[1]", "Duplicate value"}},
		{"pii custom name upper-case", "RoutingPolicy", validPolicy + "pii: {mode: Mask, customDetectors: [{name: Employee_ID, pattern: x}]}", []string{"spec.pii.customDetectors[0].name", "should match"}},
		{"pii custom name a builtin's", "RoutingPolicy", validPolicy + "pii: {mode: Mask, customDetectors: [{name: email, pattern: x}]}", []string{"spec.pii.customDetectors[0].name", "must not be a builtin detector's"}},
		{"pii custom name twice", "RoutingPolicy", validPolicy + "pii: {mode: Mask, customDetectors: [{name: a, pattern: x}, {name: a, pattern: y}]}", []string{"spec.pii.customDetectors[1]", "Duplicate value"}},
		{"pii custom pattern empty", "RoutingPolicy", validPolicy + "pii: {mode: Mask, customDetectors: [{name: a, pattern: ''}]}", []string{"spec.pii.customDetectors[0].pattern", "at least 1"}},
		{"pii custom pattern too long", "RoutingPolicy", validPolicy + "pii: {mode: Mask, customDetectors: [{name: a, pattern: '" + strings.Repeat("x", 1025) + "'}]}", []string{"spec.pii.customDetectors[0].pattern", "may not be more than 1024"}},
		{"acceptFallbackFrom duplicate", "RoutingPolicy", validPolicy + "acceptFallbackFrom: [team-a, team-a]", []string{"spec.acceptFallbackFrom[1]", "Duplicate value"}},
	}
	if len(cases) < 20 {
		t.Fatalf("the issue asks for at least 20 invalid objects, have %d", len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), object(t, c.kind, fmt.Sprintf("bad-%d", i), ns, c.spec))
			if err == nil {
				t.Fatalf("accepted, want rejection naming %q", c.want[0])
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestSamplesAccepted applies every sample with kubectl, as a user would: the top-level samples
// together, and each sample directory (standalone, demo) in a namespace of its own.
func TestSamplesAccepted(t *testing.T) {
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, f := range files {
		out, stderr, err := env.Kubectl(nil, "apply", "-n", ns, "-f", f)
		if err != nil {
			t.Errorf("kubectl apply -f %s: %v\n%s%s", filepath.Base(f), err, out, stderr)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*", ""))
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		dns := newNamespace(t)
		if out, stderr, err := env.Kubectl(nil, "apply", "-n", dns, "-f", d); err != nil {
			t.Errorf("kubectl apply -f %s: %v\n%s%s", d, err, out, stderr)
		}
	}
	var pcs unstructured.UnstructuredList
	pcs.SetAPIVersion("switchyard.io/v1alpha1")
	pcs.SetKind("ProviderChannelList")
	if err := env.Client.List(context.Background(), &pcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pcs.Items) < 4 {
		t.Errorf("want at least 4 ProviderChannels from the samples, got %d", len(pcs.Items))
	}
	// Defaults the CRD applies: weight and the policy's scenario, strategy and panicRouting.
	out, _, err := env.Kubectl(nil, "get", "rp", "chat-gpt4o-mini", "-n", ns, "-o", "jsonpath={.spec.scenario} {.spec.strategy} {.spec.panicRouting}")
	if err != nil || out != "chat HealthScore true" {
		t.Errorf("defaults: got %q (%v), want %q", out, err, "chat HealthScore true")
	}
}

// TestKubectlExperience checks short names, the category and the printer columns as kubectl shows them.
func TestKubectlExperience(t *testing.T) {
	ns := newNamespace(t)
	if _, stderr, err := env.Kubectl(nil, "apply", "-n", ns, "-f", filepath.Join(env.Root, "config", "samples", "chat-gpt4o.yaml")); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	rl, err := dc.ServerResourcesForGroupVersion("switchyard.io/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	// Not "pc": built-in PriorityClasses claim it, and kubectl warns every user who types it (and
	// resolves it to them). "pch" is unambiguous.
	want := map[string]string{"providerchannels": "pch", "routingpolicies": "rp"}
	for _, r := range rl.APIResources {
		short, ok := want[r.Name]
		if !ok {
			continue
		}
		delete(want, r.Name)
		if strings.Join(r.ShortNames, ",") != short {
			t.Errorf("%s short names = %v, want [%s]", r.Name, r.ShortNames, short)
		}
		if strings.Join(r.Categories, ",") != "switchyard" {
			t.Errorf("%s categories = %v, want [switchyard]", r.Name, r.Categories)
		}
	}
	if len(want) > 0 {
		t.Errorf("resources not served: %v", want)
	}

	for _, c := range []struct{ args, header string }{
		{"get providerchannels", "NAME PROVIDER PHASE REPLICAS SCORE TRAFFIC DISABLED READY AGE"},
		{"get providerchannels.switchyard.io", "NAME PROVIDER PHASE REPLICAS SCORE TRAFFIC DISABLED READY AGE"},
		{"get pch", "NAME PROVIDER PHASE REPLICAS SCORE TRAFFIC DISABLED READY AGE"},
		{"get rp", "NAME SCENARIO MODELS READY AVAILABLE AGE"},
		// -o wide adds the last transition's reason and time (and the panic flag).
		{"get pch -o wide", "NAME PROVIDER PHASE REPLICAS SCORE TRAFFIC DISABLED READY AGE REASON LAST TRANSITION PANIC"},
		{"get rp -o wide", "NAME SCENARIO MODELS READY AVAILABLE AGE REASON LAST TRANSITION"},
	} {
		out, stderr, err := env.Kubectl(nil, append(strings.Fields(c.args), "-n", ns)...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", c.args, err, stderr)
		}
		first := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ")
		if first != c.header {
			t.Errorf("kubectl %s header = %q, want %q\n%s", c.args, first, c.header, out)
		}
		if !strings.Contains(out, "azure-eastus") && !strings.Contains(out, "chat-gpt4o") {
			t.Errorf("kubectl %s lists nothing:\n%s", c.args, out)
		}
	}
	out, stderr, err := env.Kubectl(nil, "get", "switchyard", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get switchyard: %v\n%s", err, stderr)
	}
	for _, w := range []string{"providerchannel.switchyard.io/openai-direct", "routingpolicy.switchyard.io/chat-gpt4o"} {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl get switchyard does not list %s:\n%s", w, out)
		}
	}
}

// TestKubectlApplyInvalid shows the error a user sees for a bad manifest, and that nothing was created.
func TestKubectlApplyInvalid(t *testing.T) {
	ns := newNamespace(t)
	f := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata:\n  name: bad\nspec:\n  models: [gpt-4o]\n  channels: [{name: a}]\n  recovery:\n    rampSteps: [5, 50, 15]\n"
	if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := env.Kubectl(nil, "apply", "-n", ns, "-f", f)
	if err == nil {
		t.Fatal("kubectl apply of an invalid manifest succeeded")
	}
	t.Logf("kubectl apply prints:\n%s", stderr)
	for _, w := range []string{"spec.recovery.rampSteps", "strictly increasing", "must end at 100"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("kubectl error does not mention %q:\n%s", w, stderr)
		}
	}
	if out, _, _ := env.Kubectl(nil, "get", "rp", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("an invalid object was stored: %s", out)
	}
}
