package proxy

import (
	"os"
	"path/filepath"
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
