// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) with the
// Switchyard CRDs installed, for tests that need Kubernetes. The binaries come from
// hack/envtest.sh, which builds them from the Go module proxy and caches them outside the clone.
package testenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// Env is a running control plane.
type Env struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// kubectl and kubectlArgs run kubectl as a cluster admin.
	kubectl     string
	kubectlArgs []string
	// Root is the repository root.
	Root string
	// Kubeconfig is a kubeconfig file for a cluster admin, for processes started against the
	// control plane (kubectl, switchyard controller, switchyard proxy --configmap).
	Kubeconfig string
}

// RepoRoot finds the repository root (the directory holding go.mod) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Assets returns the directory holding kube-apiserver, etcd and kubectl: $KUBEBUILDER_ASSETS, or
// the cache hack/envtest.sh fills. It does not build them (that takes minutes): the error says how.
func Assets(root string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "envtest.sh"), "--check").Output()
	if err != nil {
		return "", fmt.Errorf("envtest binaries are missing: run `make test` (it builds them once, ~15-20 min) or `make envtest`")
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts etcd and kube-apiserver with the CRDs from config/crd/bases installed.
func Start() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := Assets(root)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("failed to start the test control plane from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	user, err := env.AddUser(envtest.User{Name: "switchyard-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	k, err := user.Kubectl()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	// The kubeconfig lives in the API server's certificate directory, removed by Stop.
	kcPath := filepath.Join(env.ControlPlane.APIServer.CertDir, "admin.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Env: env, Config: cfg, Client: c, Scheme: scheme, kubectl: k.Path, kubectlArgs: k.Opts, Root: root, Kubeconfig: kcPath}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.Env.Stop() }

// Kubectl runs kubectl against the control plane, with stdin when given.
func (e *Env) Kubectl(stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(e.kubectl, append(append([]string{}, e.kubectlArgs...), args...)...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}
