package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// KeyEnvPrefix: SWITCHYARD_KEY_<CHANNEL> overrides a channel's provider key in standalone mode
// (channel name upper-cased, every character that is not a letter or digit replaced by "_").
const KeyEnvPrefix = "SWITCHYARD_KEY_"

// KeyEnvName is the environment variable that overrides a channel's key.
func KeyEnvName(channel string) string {
	b := []byte(strings.ToUpper(channel))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return KeyEnvPrefix + string(b)
}

// LoadFiles reads and compiles the manifests at path, applying key overrides from the environment.
func LoadFiles(path string, getenv func(string) string) (*routing.Table, []routing.Problem, error) {
	t, _, problems, err := loadFiles(path, getenv)
	return t, problems, err
}

// loadFiles is LoadFiles that also returns the channel objects it read (nil on a read error), so
// a rejected config can still pass its on-call overrides on.
func loadFiles(path string, getenv func(string) string) (*routing.Table, []v1alpha1.ProviderChannel, []routing.Problem, error) {
	in, err := routing.LoadManifests(path)
	if err != nil {
		return nil, nil, nil, err
	}
	in.KeyOverrides = map[string]string{}
	for _, c := range in.Channels {
		if v := getenv(KeyEnvName(c.Name)); v != "" {
			in.KeyOverrides[c.Name] = v
		}
	}
	t, problems := routing.Compile(in)
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.String()
		}
		return nil, in.Channels, problems, fmt.Errorf("config has %d problem(s): %s", len(problems), strings.Join(msgs, "; "))
	}
	if len(t.Policies) == 0 {
		return nil, in.Channels, nil, errors.New("config has no RoutingPolicy: nothing to serve")
	}
	return t, in.Channels, nil, nil
}

// FileSource loads the standalone config from a file or directory and reloads it when its
// content changes (checked every Interval, by content hash, which also catches the symlink swaps
// of a mounted ConfigMap) or when Reload is signalled (SIGHUP).
type FileSource struct {
	Path     string
	Interval time.Duration
	Getenv   func(string) string
	Reload   <-chan struct{}
	last     string
}

// Load does one load now; it applies the table or records the rejection.
func (f *FileSource) Load(s *Server) error {
	sum, err := contentHash(f.Path)
	if err != nil {
		s.RejectConfig(f.Path, err, nil)
		return err
	}
	f.last = sum
	t, channels, problems, err := loadFiles(f.Path, f.getenv())
	if err != nil {
		// The last good table keeps serving, but an on-call `disabled: true` edited in at the
		// same time as a mistake elsewhere must still take effect.
		if cur := s.cfg.Load(); cur != nil && channels != nil {
			if over := routing.WithOverrides(cur.table, channels); over.Hash() != cur.table.Hash() {
				s.Apply(over, f.Path+" (last good config with the operator overrides)")
			}
		}
		s.RejectConfig(f.Path, err, problems)
		return err
	}
	s.Apply(t, f.Path)
	return nil
}

// Watch reloads on change until ctx ends.
func (f *FileSource) Watch(ctx context.Context, s *Server) {
	interval := f.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.Reload:
			s.log.Info("Reloading config on signal", "source", f.Path)
			_ = f.Load(s)
		case <-t.C:
			sum, err := contentHash(f.Path)
			if err == nil && sum == f.last {
				continue
			}
			_ = f.Load(s)
		}
	}
}

func (f *FileSource) getenv() func(string) string {
	if f.Getenv != nil {
		return f.Getenv
	}
	return os.Getenv
}

// contentHash hashes the names and contents of the manifest files LoadManifests would read, so
// an unrelated file beside them (notes, editor swap files) does not trigger a reload.
func contentHash(path string) (string, error) {
	files, err := routing.ManifestFiles(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
