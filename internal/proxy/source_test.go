package proxy

import (
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestStandaloneOverrideGetsThroughABrokenConfig: disabling a channel in the same edit as a
// mistake elsewhere takes the channel out; the mistake (a policy pointing at nothing) is left out
// and reported, the rest serves.
func TestStandaloneOverrideGetsThroughABrokenConfig(t *testing.T) {
	r := newRig(t, rigConfig{})
	cfg := rigConfig{channelA: "disabled: true\ndisabledReason: INC-5"}.render(r.aURL, r.bURL) +
		"---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: typo}\nspec: {models: [x], channels: [{name: chan-z}]}\n"
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("one bad policy refused the whole config: %v", err)
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Disabled" {
		t.Errorf("the override did not get through: chan-a is %s", p)
	}
	st := r.srv.ChannelsState().Config
	if !strings.Contains(st.Error, "RoutingPolicy typo (left out)") || !strings.Contains(st.Error, "chan-z") {
		t.Errorf("the policy left out is not reported: %+v", st)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" {
		t.Errorf("status %d from %q", got.status, got.header.Get("X-Switchyard-Channel"))
	}
}

// thirdChannel is a channel chan-c and a policy routing o3 over it, appended to the rig's
// manifests; spec goes into chan-c's spec.
func thirdChannel(aURL, spec string) string {
	return `---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-c}
spec:
  provider: openai
  baseURL: ` + aURL + `/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: o3}]
` + indent(spec) + `
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: third}
spec: {models: [o3], channels: [{name: chan-c}]}
`
}

// TestStandaloneIsolatesABadChannel: a new channel with an invalid field among good ones is left
// out and named (log, admin API, switchyard_config_stale) while the others serve, and so is the
// policy that has no other channel; fixing the file brings both in and clears the report.
func TestStandaloneIsolatesABadChannel(t *testing.T) {
	r := newRig(t, rigConfig{})
	writeFile(t, r.dir, rigConfig{}.render(r.aURL, r.bURL)+thirdChannel(r.aURL, "weight: 5000"))
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("one bad channel refused the whole config: %v", err)
	}
	for _, m := range []string{"gpt-4o", "gpt-4o-mini"} {
		if got := r.post("/v1/chat/completions", chat(m, false)); got.status != 200 {
			t.Errorf("%s beside a bad channel: status %d: %s", m, got.status, got.body)
		}
	}
	if got := r.post("/v1/chat/completions", chat("o3", false)); got.status == 200 {
		t.Errorf("o3 served through a channel with a problem: %s", got.header.Get("X-Switchyard-Channel"))
	}
	st := r.srv.ChannelsState().Config
	if !strings.Contains(st.Error, "ProviderChannel chan-c (left out): spec.weight") || !strings.Contains(st.Error, "RoutingPolicy third (left out)") {
		t.Errorf("config.error does not name what was left out: %q", st.Error)
	}
	named := false
	for _, p := range st.Problems {
		named = named || p.Kind == "ProviderChannel" && p.Name == "chan-c" && p.Reason == routing.ReasonInvalidSpec
	}
	if !named {
		t.Errorf("config.problems does not name chan-c: %+v", st.Problems)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "Held back a config object with a problem") || !strings.Contains(logs, `"name":"chan-c"`) {
		t.Errorf("no log line names chan-c:\n%s", logs)
	}
	if got := r.metric("switchyard_config_stale"); got != "1" {
		t.Errorf("switchyard_config_stale = %q while an object is held back", got)
	}

	writeFile(t, r.dir, rigConfig{}.render(r.aURL, r.bURL)+thirdChannel(r.aURL, ""))
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	if got := r.post("/v1/chat/completions", chat("o3", false)); got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-c" {
		t.Errorf("the fixed channel does not serve: status %d from %q: %s", got.status, got.header.Get("X-Switchyard-Channel"), got.body)
	}
	if st := r.srv.ChannelsState().Config; st.Error != "" || len(st.Problems) != 0 {
		t.Errorf("the report did not clear after the fix: %+v", st)
	}
	if got := r.metric("switchyard_config_stale"); got != "0" {
		t.Errorf("switchyard_config_stale = %q after the fix", got)
	}
}

// TestStandaloneBrokenEditKeepsTheLastGoodForm: an edit that breaks a channel that served keeps
// its last good form serving, named as such; a config with nothing left to serve is refused and
// the last good config keeps serving.
func TestStandaloneBrokenEditKeepsTheLastGoodForm(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.write(rigConfig{channelB: "weight: 5000"})
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("a broken edit of one channel refused the whole config: %v", err)
	}
	if e := r.configError(); !strings.Contains(e, "ProviderChannel chan-b (its last good form serves): spec.weight") {
		t.Errorf("config.error = %q", e)
	}
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" {
		t.Errorf("chan-b's last good form does not serve: status %d from %q", got.status, got.header.Get("X-Switchyard-Channel"))
	}
	r.A.SetDefault(mockprovider.Behavior{})

	hash := r.srv.ChannelsState().Config.Hash
	writeFile(t, r.dir, "apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: x}\nspec: {models: [m], channels: [{name: missing}]}\n")
	if err := r.src.Load(r.srv); err == nil || !strings.Contains(err.Error(), "nothing else to serve") {
		t.Fatalf("a config with nothing to serve: %v", err)
	}
	if st := r.srv.ChannelsState().Config; st.Hash != hash || !strings.Contains(st.Error, "missing") {
		t.Errorf("the last good config does not keep serving: %+v", st)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
		t.Errorf("after a wholly broken config: %d", got.status)
	}
}
