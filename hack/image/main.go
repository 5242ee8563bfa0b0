// Command image builds the Switchyard container image without a Docker engine: a static,
// non-root image holding only the `switchyard` binary on an empty (scratch) base, written as an
// OCI-compatible tarball (`docker load -i` / `crane push`). It then reads the tarball back and
// checks what it promises: one static binary, the entrypoint, a non-root user.
//
//	go run ./hack/image --out bin/switchyard-image.tar --tag switchyard:dev
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// nonRoot is the uid/gid the image runs as (distroless's "nonroot").
const nonRoot = "65532:65532"

func main() {
	out := flag.String("out", "bin/switchyard-image.tar", "image tarball to write")
	tag := flag.String("tag", "switchyard:dev", "image reference recorded in the tarball")
	version := flag.String("version", "dev", "version stamped into the binary")
	commit := flag.String("commit", "", "commit stamped into the binary (default: the build info's, if the toolchain records one)")
	flag.Parse()
	if err := run(*out, *tag, *version, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, tag, version, commit string) error {
	dir, err := os.MkdirTemp("", "switchyard-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "switchyard")
	ldflags := "-s -w -X github.com/switchyard-io/switchyard/internal/version.Version=" + version
	if commit != "" {
		ldflags += " -X github.com/switchyard-io/switchyard/internal/version.Commit=" + commit
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/switchyard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	img, err := Build(bin)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := Verify(out); err != nil {
		return fmt.Errorf("verify %s: %w", out, err)
	}
	digest, _ := img.Digest()
	fmt.Printf("wrote %s (%s, %s), verified: static binary, entrypoint /switchyard, user %s\n", out, tag, digest, nonRoot)
	return nil
}

// Build puts the binary at /switchyard on an empty base and sets the entrypoint and user.
func Build(binPath string) (v1.Image, error) {
	b, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "switchyard", Mode: 0o555, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = []string{"/switchyard"}
	cfg.Config.User = nonRoot
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/switchyard-io/switchyard"}
	return mutate.ConfigFile(img, cfg)
}

// Verify reads an image tarball back: exactly one file, /switchyard, a static ELF executable
// (no program interpreter), the entrypoint set and a non-root user.
func Verify(path string) error {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cfg.Config.User != nonRoot {
		return fmt.Errorf("user %q, want %s", cfg.Config.User, nonRoot)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/switchyard" {
		return fmt.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	var bin []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		files = append(files, h.Name)
		if h.Name == "switchyard" {
			if bin, err = io.ReadAll(tr); err != nil {
				return err
			}
		}
	}
	if len(files) != 1 || bin == nil {
		return fmt.Errorf("image holds %v, want only switchyard", files)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("switchyard is not an ELF executable: %w", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("switchyard is dynamically linked (needs an interpreter); a scratch image cannot run it")
		}
	}
	return nil
}
