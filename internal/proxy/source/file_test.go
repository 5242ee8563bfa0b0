package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
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

// TestKeyEnvNeverCrossesNamespaces: a namespaced channel takes its key only from
// SWITCHYARD_KEY_<NAMESPACE>_<NAME>, and two channels whose variables collide refuse the config.
func TestKeyEnvNeverCrossesNamespaces(t *testing.T) {
	ch := func(ns, name string) v1alpha1.ProviderChannel {
		return v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://" + name + ".example/v1", Models: []v1alpha1.ChannelModel{{Name: "m-" + ns}}}}
	}
	pol := func(ns, channel string) v1alpha1.RoutingPolicy {
		return v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: v1alpha1.RoutingPolicySpec{
			Models: []string{"m-" + ns}, Channels: []v1alpha1.ChannelRef{{Name: channel}}}}
	}
	env := map[string]string{"SWITCHYARD_KEY_PROD_OPENAI": "sk-prod"}
	in := routing.Inputs{Channels: []v1alpha1.ProviderChannel{ch("prod", "openai"), ch("dev", "prod-openai")},
		Policies: []v1alpha1.RoutingPolicy{pol("prod", "openai"), pol("dev", "prod-openai")}}
	c, err := compileInputs(in, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := c.table
	if k := tbl.Credentials["prod/openai"]; k.Reveal() != "sk-prod" {
		t.Errorf("prod/openai has key %q", k.Reveal())
	}
	if _, ok := tbl.Credentials["dev/prod-openai"]; ok {
		t.Error("dev/prod-openai took prod/openai's key")
	}
	in = routing.Inputs{Channels: []v1alpha1.ProviderChannel{ch("a", "b-c"), ch("a-b", "c")}, Policies: []v1alpha1.RoutingPolicy{pol("a", "b-c"), pol("a-b", "c")}}
	if _, err := compileInputs(in, func(string) string { return "" }, nil); err == nil || !strings.Contains(err.Error(), "SWITCHYARD_KEY_A_B_C") {
		t.Errorf("colliding variables: %v", err)
	}
}
