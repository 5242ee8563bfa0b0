package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Models served by the bench configuration.
const (
	modelOverhead = "bench-model"    // policy "overhead": channels main, backup; defaults (chat, HealthScore)
	modelFailover = "bench-failover" // policy "failover": fo-a first; fo-a never ejected, so every marked request fails over
	modelEject    = "bench-eject"    // policy "eject": eject-a first, chat defaults
)

const benchKey = "sk-bench-not-a-real-key"

func channelDoc(name, base, region string, models ...string) string {
	ms := make([]string, len(models))
	for i, m := range models {
		ms[i] = "{name: " + m + "}"
	}
	return fmt.Sprintf(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: %s}
spec:
  provider: openai
  baseURL: %s
  credentialsRef: {name: bench-keys, key: k}
  models: [%s]
  failureDomain: {region: %s}
`, name, base, strings.Join(ms, ", "), region)
}

const secretDoc = `apiVersion: v1
kind: Secret
metadata: {name: bench-keys}
stringData: {k: ` + benchKey + `}
`

// mainConfig is the proxy configuration of every measurement but the scale one.
func mainConfig(up string) string {
	u := "http://" + up
	docs := []string{
		secretDoc,
		channelDoc("main", u+"/main/v1", "a", modelOverhead),
		channelDoc("backup", u+"/backup/v1", "b", modelOverhead),
		channelDoc("fo-a", u+"/fo-a/v1", "a", modelFailover),
		channelDoc("fo-b", u+"/fo-b/v1", "b", modelFailover),
		channelDoc("eject-a", u+"/eject-a/v1", "a", modelEject),
		channelDoc("eject-b", u+"/eject-b/v1", "b", modelEject),
		`apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: overhead}
spec:
  models: [` + modelOverhead + `]
  channels: [{name: main}, {name: backup}]
`,
		// The failover probe must fail over on every marked request, whatever the error rate:
		// detection and the score are turned off (within the CRD's bounds) and the retry budget is
		// opened, so fo-a stays first and healthy.
		`apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: failover}
spec:
  models: [` + modelFailover + `]
  channels: [{name: fo-a}, {name: fo-b}]
  strategy: Priority
  detection: {minRequests: 1000000, errorRatePercent: 100, consecutiveFailures: 10000}
  healthScore: {errorWeightPercent: 0, degradedBelow: 0, ejectBelow: 0}
  retry: {budgetPercent: 100}
`,
		`apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: eject}
spec:
  models: [` + modelEject + `]
  channels: [{name: eject-a}, {name: eject-b}]
  strategy: Priority
`,
	}
	return strings.Join(docs, "---\n")
}

// Scale configuration: scaleChannels channels in groups of scaleGroup, each group one policy whose
// scaleModels models every channel of the group serves: channels × models channel×model keys.
const (
	scaleChannels = 1000
	scaleModels   = 5
	scaleGroup    = 5
)

func scaleModel(group, i int) string { return fmt.Sprintf("sm-%03d-%d", group, i) }

// scaleTarget is the model the scale measurement sends to: one in the middle of the table.
var scaleTarget = scaleModel(scaleChannels/scaleGroup/2, 2)

func scaleConfig(up string) string {
	u := "http://" + up + "/main/v1"
	var b strings.Builder
	b.WriteString(secretDoc)
	for g := 0; g < scaleChannels/scaleGroup; g++ {
		models := make([]string, scaleModels)
		for i := range models {
			models[i] = scaleModel(g, i)
		}
		var refs []string
		for c := 0; c < scaleGroup; c++ {
			name := fmt.Sprintf("s-%04d", g*scaleGroup+c)
			refs = append(refs, "{name: "+name+"}")
			b.WriteString("---\n")
			b.WriteString(channelDoc(name, u, fmt.Sprintf("r%d", c), models...))
		}
		fmt.Fprintf(&b, `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: sp-%03d}
spec:
  models: [%s]
  channels: [%s]
`, g, strings.Join(models, ", "), strings.Join(refs, ", "))
	}
	return b.String()
}

func writeConfig(dir, name, content string) (string, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return d, os.WriteFile(filepath.Join(d, "config.yaml"), []byte(content), 0o644)
}

// proxyLoad compiles a config directory as `switchyard proxy --config` does (tests).
func proxyLoad(dir string) (*routing.Table, []routing.Problem, error) {
	return source.LoadFiles(dir, func(string) string { return "" })
}

// The clients measurement: benchClients GatewayClients, each with its own keys Secret, beside the
// main configuration; the load calls as benchClientTarget.
const benchClients = 1000

var benchClientTarget = benchClients / 2

func benchClientKey(i int) string { return fmt.Sprintf("sk-bench-client-%04d-5d1f0a8c3e7b2946", i) }

// clientsConfig is mainConfig with benchClients GatewayClients. Their models mix globs and names,
// as teams' would; their limits are far above the load, so every request is counted against all
// three limits and none is refused.
func clientsConfig(up string) string {
	var b strings.Builder
	b.WriteString(mainConfig(up))
	for i := 0; i < benchClients; i++ {
		models := `["bench-*"]`
		if i%2 == 1 {
			models = `["gpt-4o*", "claude-*", "` + modelOverhead + `"]`
		}
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Secret
metadata: {name: client-%04d-keys}
stringData: {current: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: client-%04d}
spec:
  keysSecretRef: {name: client-%04d-keys}
  models: %s
  limits: {requestsPerMinute: 10000000, tokensPerMinute: 1000000000, tokensPerDay: 100000000000}
`, i, benchClientKey(i), i, i, models)
	}
	return b.String()
}
