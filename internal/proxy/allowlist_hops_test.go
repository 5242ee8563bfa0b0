package proxy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// Client keys of the allow-list tests: one client may call small alone, the other small and large.
const (
	smallOnlyKey = "sk-client-small-only-0a7e3c91d5b24f68"
	bothKey      = "sk-client-small-and-large-6c2d8e0f1b"
)

// smallAndLarge: small on channel small-a (mock A), falling back to large on channel large-b
// (mock B), and overflowing to large too; two clients, one allowed small only.
const smallAndLarge = `apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: small-a}
spec:
  provider: openai
  baseURL: %[1]s/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: small}]
  ` + defaultTimeouts + `
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: large-b}
spec:
  provider: azure-openai
  baseURL: %[2]s/openai/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: large}]
  ` + defaultTimeouts + `
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: small}
spec:
  models: [small]
  channels: [{name: small-a}]
  fallbackModels: [large]
  contextOverflowModels: [large]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: large}
spec:
  models: [large]
  channels: [{name: large-b}]
---
apiVersion: v1
kind: Secret
metadata: {name: small-only-keys}
stringData: {k: ` + smallOnlyKey + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: small-only}
spec:
  keysSecretRef: {name: small-only-keys}
  models: [small]
---
apiVersion: v1
kind: Secret
metadata: {name: both-keys}
stringData: {k: ` + bothKey + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: both}
spec:
  keysSecretRef: {name: both-keys}
  models: [small, large]
`

// fallbackModels and contextOverflowModels hops are checked against the client's models: a client
// allowed only small never gets an answer from large, and gets the failure it would have had
// without the hop (the 503, the provider's context_length_exceeded); its audit line names the
// hop it skipped. A client allowed both gets large's answer, and its audit line names large as
// the model that answered.
func TestFallbackAndOverflowHopsStayWithinTheClientsModels(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Options{Path: logPath})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.Audit = log })
	r.writeClients(fmt.Sprintf(smallAndLarge, r.aURL, r.bURL))
	small := func(key string) reply {
		return r.post("/v1/chat/completions", chat("small", false), "Authorization", "Bearer "+key)
	}

	r.A.SetBehavior("small", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	if rep := small(smallOnlyKey); rep.status != 503 || r.B.Requests("large") != 0 {
		t.Errorf("fallback, small only: %d, large asked %d times: %s", rep.status, r.B.Requests("large"), rep.body)
	}
	if rep := small(bothKey); rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "large" {
		t.Errorf("fallback, both: %d model %q: %s", rep.status, rep.header.Get("X-Switchyard-Model"), rep.body)
	}
	before := r.B.Requests("large")
	r.A.SetBehavior("small", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	if rep := small(smallOnlyKey); rep.status != 400 || errorCode(t, rep.body) != "context_length_exceeded" || r.B.Requests("large") != before {
		t.Errorf("overflow, small only: %d, large asked %d times: %s", rep.status, r.B.Requests("large")-before, rep.body)
	}
	if rep := small(bothKey); rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "large" {
		t.Errorf("overflow, both: %d model %q: %s", rep.status, rep.header.Get("X-Switchyard-Model"), rep.body)
	}
	r.A.SetBehavior("small", mockprovider.Behavior{})
	if rep := small(smallOnlyKey); rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "small" {
		t.Errorf("small answers: %d %s", rep.status, rep.body)
	}

	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []audit.Line
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var line audit.Line
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if line.Record != "" {
			continue // the end record Close writes
		}
		lines = append(lines, line)
	}
	want := []struct {
		client  string
		status  int
		served  string
		skipped []string
	}{
		{"small-only", 503, "", []string{"large"}},
		{"both", 200, "large", nil},
		{"small-only", 400, "", []string{"large"}},
		{"both", 200, "large", nil},
		{"small-only", 200, "small", nil},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(lines), len(want), raw)
	}
	for i, w := range want {
		l := lines[i]
		if l.Client != w.client || l.Model != "small" || l.Status != w.status || l.ServedModel != w.served || !slices.Equal(l.SkippedModels, w.skipped) {
			t.Errorf("audit line %d: client %q model %q status %d servedModel %q skippedModels %v; want %q small %d %q %v",
				i+1, l.Client, l.Model, l.Status, l.ServedModel, l.SkippedModels, w.client, w.status, w.served, w.skipped)
		}
	}
}
