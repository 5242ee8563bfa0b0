package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/routing"
)

const sampleDir = "../../config/samples/demo"

func TestPrepareManifests(t *testing.T) {
	dst := t.TempDir()
	ports := map[string]int{"provider-a": 41001, "provider-b": 41002}
	st, err := prepareManifests(sampleDir, dst, ports, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.firstChannel() != "provider-a" {
		t.Errorf("failing channel = %q", st.firstChannel())
	}
	if strings.Join(st.Models, ",") != "gpt-4o,gpt-4o-mini" {
		t.Errorf("models = %v", st.Models)
	}
	if up, _ := st.channel("provider-a").Upstream("gpt-4o"); up != "gpt-4o-2024-08-06" {
		t.Errorf("upstream of gpt-4o on provider-a = %q", up)
	}
	// What the proxy will read: the same objects, ports substituted, paths kept.
	in, err := routing.LoadManifests(filepath.Join(dst, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	urls := map[string]string{}
	for _, c := range tbl.Channels {
		urls[c.Name] = c.BaseURL
	}
	if urls["provider-a"] != "http://127.0.0.1:41001/v1" || urls["provider-b"] != "http://127.0.0.1:41002/openai/v1" {
		t.Errorf("baseURLs = %v", urls)
	}
	if tbl.Credentials["provider-a"].Reveal() != "sk-demo-provider-a" {
		t.Error("the key of provider-a did not survive the rewrite")
	}
	s := st.policyFor("gpt-4o").Settings
	if s.Window != 10*time.Second || s.Cooldown != 10*time.Second || s.RampHold != 8*time.Second || s.ProbeInterval != 2*time.Second ||
		s.MinRequests != 20 || s.ConsecutiveFailures != 5 || len(s.RampSteps) != 4 {
		t.Errorf("demo settings = %+v", s)
	}
	if tbl.Hash() != st.Table.Hash() {
		t.Error("the written manifests compile to another table than the demo's own")
	}
}

func TestPrepareManifestsScalesTimings(t *testing.T) {
	st, err := prepareManifests(sampleDir, t.TempDir(), map[string]int{"provider-a": 1, "provider-b": 2}, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	s := st.policyFor("gpt-4o-mini").Settings
	want := map[string][2]time.Duration{
		"window":        {s.Window, 3 * time.Second},
		"recent":        {s.RecentErrorWindow, 1500 * time.Millisecond},
		"cooldown":      {s.Cooldown, 3 * time.Second},
		"maxCooldown":   {s.MaxCooldown, 12 * time.Second},
		"probeInterval": {s.ProbeInterval, 600 * time.Millisecond},
		"rampHold":      {s.RampHold, 2400 * time.Millisecond},
		"ejectAfter":    {s.EjectAfter, 4500 * time.Millisecond},
		// Latency limits are not timelines.
		"probeMaxLatency": {s.ProbeMaxLatency, 2 * time.Second},
		"latencyP95":      {s.LatencyP95, 20 * time.Second},
	}
	for name, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
	// A tiny scale keeps the engine's limits.
	st, err = prepareManifests(sampleDir, t.TempDir(), map[string]int{"provider-a": 1, "provider-b": 2}, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.policyFor("gpt-4o").Settings; s.Window != 2*time.Second || s.RecentErrorWindow != time.Second || s.Cooldown != 500*time.Millisecond {
		t.Errorf("settings at scale 0.01 = %+v", s)
	}
}

func TestPrepareManifestsRefusesRemoteProviders(t *testing.T) {
	src := t.TempDir()
	b, err := os.ReadFile(filepath.Join(sampleDir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	remote := strings.Replace(string(b), "http://127.0.0.1:9101/v1", "https://api.openai.com/v1", 1)
	if err := os.WriteFile(filepath.Join(src, "gateway.yaml"), []byte(remote), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = prepareManifests(src, t.TempDir(), map[string]int{"provider-a": 1, "provider-b": 2}, 1)
	if err == nil || !strings.Contains(err.Error(), "only runs against local mock providers") {
		t.Errorf("err = %v", err)
	}
	if _, err := prepareManifests(sampleDir, t.TempDir(), map[string]int{"provider-a": 1}, 1); err == nil {
		t.Error("a channel without a port was accepted")
	}
}

func TestFindConfig(t *testing.T) {
	// From internal/demo the repository's config/samples/demo is two levels up.
	p, err := findConfig(DefaultConfigDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p, "gateway.yaml")); err != nil {
		t.Errorf("found %s without gateway.yaml", p)
	}
	if _, err := findConfig("no/such/dir"); err == nil {
		t.Error("a missing config was found")
	}
}
