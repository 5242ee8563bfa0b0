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
	"syscall"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// MaxManifestBytes is the largest manifest file LoadManifests reads. A routing config is a few
// kilobytes; a file far beyond that is a mistake (a log or a dump in the config directory).
const MaxManifestBytes = 4 << 20

// LoadManifests reads ProviderChannel, RoutingPolicy, GatewayClient and Secret manifests from a YAML file or a
// directory of them (*.yaml, *.yml, *.json; not recursive), the same objects one would
// `kubectl apply`. Other kinds (a Namespace, say) are skipped. Unknown fields are errors that name
// the file and the document, since a typo in a standalone config would otherwise be silently ignored.
func LoadManifests(path string) (Inputs, error) {
	files, err := ReadManifestFiles(path)
	if err != nil {
		return Inputs{}, err
	}
	return ParseManifests(files)
}

// ManifestFile is one manifest file as read from disk.
type ManifestFile struct {
	Path string
	Data []byte
}

// ReadManifestFiles reads the files LoadManifests would parse, each once. Only regular files are
// read (a symlink to one, as in a mounted ConfigMap, is fine), each at most MaxManifestBytes; a
// named pipe or a device is refused without blocking on it. When some files are refused, the
// others are returned with the error, so a caller can still look at what was readable.
func ReadManifestFiles(path string) ([]ManifestFile, error) {
	names, err := ManifestFiles(path)
	if err != nil {
		return nil, err
	}
	files := make([]ManifestFile, 0, len(names))
	var errs []error
	for _, name := range names {
		b, err := readRegular(name, MaxManifestBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, ManifestFile{Path: name, Data: b})
	}
	return files, errors.Join(errs...)
}

// ParseManifests decodes files read by ReadManifestFiles.
func ParseManifests(files []ManifestFile) (Inputs, error) {
	var in Inputs
	for _, f := range files {
		if err := parseFile(f, &in); err != nil {
			return Inputs{}, err
		}
	}
	return in, nil
}

// IsManifestName reports whether a file of this name in a config directory is a manifest
// LoadManifests reads.
func IsManifestName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return !strings.HasPrefix(name, ".") && (ext == ".yaml" || ext == ".yml" || ext == ".json")
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
		if e.IsDir() || !IsManifestName(e.Name()) {
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

// readRegular reads a regular file of at most limit bytes. The open does not block (O_NONBLOCK:
// a named pipe with no writer would otherwise wait forever), and the type and size are checked on
// the open file, so nothing is swapped in between.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("config file %s is %s, not a regular file: only regular files are read", path, describeType(st.Mode()))
	}
	tooBig := func(size string) error {
		return fmt.Errorf("config file %s is %s, over the %d MiB (%d-byte) limit for one manifest file", path, size, limit>>20, limit)
	}
	if st.Size() > limit {
		return nil, tooBig(fmt.Sprintf("%d bytes", st.Size()))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	if int64(len(b)) > limit { // it grew after the fstat
		return nil, tooBig(fmt.Sprintf("at least %d bytes", len(b)))
	}
	return b, nil
}

func describeType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	default:
		return "of type " + m.Type().String()
	}
}

func parseFile(file ManifestFile, in *Inputs) error {
	path := file.Path
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(file.Data)))
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
	case meta.APIVersion == group && meta.Kind == "GatewayClient":
		var gc v1alpha1.GatewayClient
		if err := yaml.UnmarshalStrict(raw, &gc); err != nil {
			return fmt.Errorf("GatewayClient: %w", err)
		}
		in.Clients = append(in.Clients, gc)
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
