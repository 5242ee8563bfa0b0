package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFingerprintFollowsOnlyManifests: the poll's fingerprint changes with a manifest, not with
// a file the loader never reads (notes, editor swap files), which would trigger reads.
func TestFingerprintFollowsOnlyManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("gateway.yaml", "kind: Namespace\n")
	before, err := fingerprint(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("notes.txt", "on-call notes, edited every minute")
	write(".gateway.yaml.swp", "editor state")
	if after, _ := fingerprint(dir); !sameStamps(before, after) {
		t.Error("a file the loader never reads changed the fingerprint (and would trigger reads)")
	}
	write("gateway.yaml", "kind: Namespace\nmetadata: {name: x}\n")
	if after, _ := fingerprint(dir); sameStamps(before, after) {
		t.Error("an edited manifest did not change the fingerprint")
	}
	src := &FileSource{Path: dir}
	for name, want := range map[string]bool{"gateway.yaml": true, "b.json": true, "..data": true, "notes.txt": false, ".gateway.yaml.swp": false, "sub/x.yaml": false} {
		if got := src.relevant(filepath.Join(dir, name)); got != want {
			t.Errorf("an event on %s: relevant = %v", name, got)
		}
	}
	if !src.relevant(dir) {
		t.Error("an event on the config directory itself is not relevant")
	}
	one := &FileSource{Path: filepath.Join(dir, "gateway.yaml")}
	for name, want := range map[string]bool{"gateway.yaml": true, "..data": true, "other.yaml": false} {
		if got := one.relevant(filepath.Join(dir, name)); got != want {
			t.Errorf("single-file config, an event on %s: relevant = %v", name, got)
		}
	}
}

func TestKeyEnvName(t *testing.T) {
	if got := KeyEnvName("azure-eastus.v2"); got != "SWITCHYARD_KEY_AZURE_EASTUS_V2" {
		t.Errorf("KeyEnvName = %s", got)
	}
}

// TestStandaloneOverrideGetsThroughABrokenConfig: disabling a channel in the same edit as a
// mistake elsewhere still takes the channel out; the mistake is refused and reported.
func TestStandaloneOverrideGetsThroughABrokenConfig(t *testing.T) {
	r := newRig(t, rigConfig{})
	cfg := rigConfig{channelA: "disabled: true\ndisabledReason: INC-5"}.render(r.aURL, r.bURL) +
		"---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: typo}\nspec: {models: [x], channels: [{name: chan-z}]}\n"
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err == nil {
		t.Fatal("a config with a missing channel was accepted")
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Disabled" {
		t.Errorf("the override did not get through: chan-a is %s", p)
	}
	st := r.srv.ChannelsState().Config
	if !strings.Contains(st.Error, "chan-z") {
		t.Errorf("the rejection is not reported: %+v", st)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" {
		t.Errorf("status %d from %q", got.status, got.header.Get("X-Switchyard-Channel"))
	}
}
