package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestContentHashFollowsOnlyManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("gateway.yaml", "kind: Namespace\n")
	before, err := contentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("notes.txt", "on-call notes, edited every minute")
	write(".gateway.yaml.swp", "editor state")
	if after, _ := contentHash(dir); after != before {
		t.Error("a file the loader never reads changed the config hash (and would trigger reloads)")
	}
	write("gateway.yaml", "kind: Namespace\nmetadata: {name: x}\n")
	if after, _ := contentHash(dir); after == before {
		t.Error("an edited manifest did not change the config hash")
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
