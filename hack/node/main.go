// Command node is hack/node.sh's Go helper: it writes the node's sandbox ("pause") image as an
// image tarball that `ctr images import` reads, since the node has no registry to pull one from.
//
//	go run ./hack/node pause-image --out DIR/pause.tar --tag switchyard.local/pause:1
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "pause-image" {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/node pause-image --out FILE --tag REF")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("pause-image", flag.ExitOnError)
	out := fs.String("out", "", "image tarball to write")
	tag := fs.String("tag", "switchyard.local/pause:1", "image reference recorded in the tarball")
	_ = fs.Parse(os.Args[2:])
	if *out == "" {
		fmt.Fprintln(os.Stderr, "node: --out is required")
		os.Exit(2)
	}
	if err := pauseImage(*out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

// pauseImage builds ./hack/node/pause statically and writes it as /pause on an empty base.
func pauseImage(out, tag string) error {
	dir, err := os.MkdirTemp("", "switchyard-pause-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./hack/node/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build pause: %w", err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o555, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = []string{"/pause"}
	// The nobody user of registry.k8s.io/pause: the sandbox needs no privilege.
	cfg.Config.User = "65535:65535"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}
