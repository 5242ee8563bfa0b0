package routing

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// LoadManifests reads ProviderChannel, RoutingPolicy and Secret manifests from a YAML file or a
// directory of them (*.yaml, *.yml, *.json; not recursive), the same objects one would
// `kubectl apply`. Other kinds (a Namespace, say) are skipped. Unknown fields are errors that name
// the file and the document, since a typo in a standalone config would otherwise be silently ignored.
func LoadManifests(path string) (Inputs, error) {
	files, err := ManifestFiles(path)
	if err != nil {
		return Inputs{}, err
	}
	var in Inputs
	for _, f := range files {
		if err := loadFile(f, &in); err != nil {
			return Inputs{}, err
		}
	}
	return in, nil
}

// ManifestFiles lists the files LoadManifests reads at path, sorted.
func ManifestFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read config directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		files = append(files, filepath.Join(path, e.Name()))
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml, *.yml or *.json files in %s", path)
	}
	return files, nil
}

func loadFile(path string, in *Inputs) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to read config: %w", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := decodeObject(raw, in); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func decodeObject(raw []byte, in *Inputs) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || (meta.Kind == "" && meta.APIVersion == "") {
		return nil // a comment-only document
	}
	group := v1alpha1.GroupVersion.String()
	switch {
	case meta.APIVersion == group && meta.Kind == "ProviderChannel":
		var pc v1alpha1.ProviderChannel
		if err := yaml.UnmarshalStrict(raw, &pc); err != nil {
			return fmt.Errorf("ProviderChannel: %w", err)
		}
		in.Channels = append(in.Channels, pc)
	case meta.APIVersion == group && meta.Kind == "RoutingPolicy":
		var rp v1alpha1.RoutingPolicy
		if err := yaml.UnmarshalStrict(raw, &rp); err != nil {
			return fmt.Errorf("RoutingPolicy: %w", err)
		}
		in.Policies = append(in.Policies, rp)
	case meta.APIVersion == "v1" && meta.Kind == "Secret":
		var s corev1.Secret
		if err := yaml.UnmarshalStrict(raw, &s); err != nil {
			return fmt.Errorf("Secret: %w", err)
		}
		in.Secrets = append(in.Secrets, s)
	case strings.HasPrefix(meta.APIVersion, "switchyard.io/"):
		return fmt.Errorf("unknown kind %s %s", meta.APIVersion, meta.Kind)
	}
	return nil
}
