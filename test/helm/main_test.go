// Package helm checks the Helm chart in charts/switchyard: `helm lint` and `helm template` with the
// default values and with every option on, the rendered manifests applied with a server-side dry
// run to a real kube-apiserver (envtest), the values schema rejecting typos, the properties the
// proxy and controller rely on (names, ports, flags, grace periods), the RBAC the two identities
// get, and that the chart's copies of the CRDs, the generated RBAC, the alerts and the dashboard are
// byte-identical to their sources under config/.
//
// helm is built from the Go module proxy at a pinned version by hack/tools.sh; the test finds it
// through $HELM or the cache (`bash hack/tools.sh --check helm`). The control plane comes from
// hack/envtest.sh (KUBEBUILDER_ASSETS).
package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/switchyard-io/switchyard/internal/testenv"
)

var (
	env  *testenv.Env
	helm string
	root string
	// kubeconfig lets helm talk to the test control plane as a cluster admin.
	kubeconfig string
)

func TestMain(m *testing.M) {
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	if helm, err = findTool(root, "HELM", "helm"); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	if kubeconfig, err = writeKubeconfig(); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(filepath.Dir(kubeconfig))
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "helm: stopping the control plane:", err)
	}
	os.Exit(code)
}

// findTool returns $envVar, or the binary hack/tools.sh has cached. It builds nothing (a cold
// build takes minutes): the error says how.
func findTool(root, envVar, name string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "tools.sh"), "--check", name).Output()
	if err != nil {
		return "", fmt.Errorf("%s is missing: run `bash hack/tools.sh %s` (builds the pinned version once from the Go module proxy and caches it; minutes when cold) or `make tools` or set $%s", name, name, envVar)
	}
	return strings.TrimSpace(string(out)), nil
}

// writeKubeconfig writes a kubeconfig for a cluster admin of the test control plane.
func writeKubeconfig() (string, error) {
	user, err := env.Env.AddUser(envtest.User{Name: "switchyard-helm-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "switchyard-helm-kubeconfig-")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kubeconfig")
	return p, os.WriteFile(p, b, 0o600)
}

func chartDir() string { return filepath.Join(root, "charts", "switchyard") }

func testdata(name string) string { return filepath.Join(root, "test", "helm", "testdata", name) }

// runHelm runs helm and returns stdout; stderr is folded into the error.
func runHelm(args ...string) (string, error) {
	cmd := exec.Command(helm, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Keep helm away from the user's repositories, plugins and caches.
	tmp, err := os.MkdirTemp("", "helm-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp+"/cache", "HELM_CONFIG_HOME="+tmp+"/config", "HELM_DATA_HOME="+tmp+"/data",
		"KUBECONFIG="+kubeconfig)
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// render runs `helm template` for release name `release` in namespace ns with the given values
// files and --set flags (each "key=value").
func render(t *testing.T, release, ns string, valuesFiles []string, sets ...string) string {
	t.Helper()
	args := []string{"template", release, chartDir(), "--namespace", ns}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := runHelm(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	var in *strings.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	var out, errOut string
	var err error
	if in != nil {
		out, errOut, err = env.Kubectl(in, args...)
	} else {
		out, errOut, err = env.Kubectl(nil, args...)
	}
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// ensureNamespaces creates namespaces for real: a server-side dry run does not create a Namespace
// for the objects after it.
func ensureNamespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}
