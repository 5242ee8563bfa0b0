package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testenv"
)

// One control plane for the package, started by the first test that needs it.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

func requireEnv(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start() })
	if envErr != nil {
		t.Fatalf("envtest: %v", envErr)
	}
	return env
}

func objects(t *testing.T, root, ns string, mutate func(*routing.Table)) (*corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	tbl, _, err := LoadFiles(filepath.Join(root, "config", "samples", "standalone"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(tbl)
	}
	b, _ := json.Marshal(tbl)
	keys := map[string]string{}
	for name, s := range tbl.Credentials {
		keys[name] = s.Reveal()
	}
	kb, _ := json.Marshal(keys)
	ann := map[string]string{HashAnnotation: tbl.Hash()}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "routing", Namespace: ns, Annotations: ann}, Data: map[string]string{ConfigMapKey: string(b)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "routing" + CredentialsSuffix, Namespace: ns, Annotations: ann}, Data: map[string][]byte{CredentialsKey: kb}}
}

// TestConfigMapSourceHotReload: the proxy follows the controller's ConfigMap through the API
// server, and a disabled channel stops being served within 2 s of the write.
func TestConfigMapSourceHotReload(t *testing.T) {
	env := requireEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-system"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm, sec := objects(t, env.Root, ns.Name, nil)
	if err := env.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	src := &ConfigMapSource{Config: env.Config, Namespace: ns.Name, Name: "routing"}
	if err := src.Run(ctx, srv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the first table", func() bool { return srv.Ready() })
	st := srv.ChannelsState()
	if st.Config.Hash != cm.Annotations[HashAnnotation] || !strings.HasPrefix(st.Config.Source, "configmap ") {
		t.Fatalf("config state %+v", st.Config)
	}

	// The on-call override: the controller rewrites the ConfigMap with provider-a disabled.
	cm2, sec2 := objects(t, env.Root, ns.Name, func(tb *routing.Table) {
		for i := range tb.Channels {
			if tb.Channels[i].Name == "provider-a" {
				tb.Channels[i].Disabled = true
			}
		}
	})
	start := time.Now()
	sec.Annotations, sec.Data = sec2.Annotations, sec2.Data
	if err := env.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	cm.Annotations, cm.Data = cm2.Annotations, cm2.Data
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "provider-a Disabled", func() bool {
		for _, c := range srv.ChannelsState().Channels {
			if c.Channel == "provider-a" && c.Model == "gpt-4o" {
				return c.Phase == "Disabled"
			}
		}
		return false
	})
	t.Logf("ConfigMap write to Disabled in the proxy: %s", time.Since(start).Round(time.Millisecond))

	// A broken ConfigMap is refused; the last good table keeps serving.
	cm.Data = map[string]string{ConfigMapKey: "{not json"}
	cm.Annotations = map[string]string{HashAnnotation: "broken"}
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the rejection", func() bool { return srv.ChannelsState().Config.Error != "" })
	if got := srv.ChannelsState().Config; got.Hash != cm2.Annotations[HashAnnotation] || !srv.Ready() {
		t.Errorf("after a broken ConfigMap: %+v", got)
	}
}

// compress rewrites cm into the form the controller uses for large tables (CompressedConfigMapKey).
func compress(t *testing.T, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write([]byte(cm.Data[ConfigMapKey])); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := cm.DeepCopy()
	out.Data, out.BinaryData = nil, map[string][]byte{CompressedConfigMapKey: z.Bytes()}
	return out
}

// TestDecodeTable: both forms read, with the keys of a Secret written for the same table; a
// Secret written for another one is refused, whichever of the two is newer.
func TestDecodeTable(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cm, sec := objects(t, root, "ns", nil)
	cm2, sec2 := objects(t, root, "ns", func(tb *routing.Table) { tb.Channels[0].Weight = 7 })
	for _, tc := range []struct {
		name string
		cm   *corev1.ConfigMap
		sec  *corev1.Secret
		want string // error; "" to load
	}{
		{"plain", cm, sec, ""},
		{"compressed", compress(t, cm), sec, ""},
		{"a Secret for the next table", cm, sec2, "waiting for both to match"},
		{"a ConfigMap for the next table", compress(t, cm2), sec, "waiting for both to match"},
		{"no Secret", cm, nil, "credentials Secret for ConfigMap ns/routing is missing"},
		{"both forms", func() *corev1.ConfigMap { c := compress(t, cm); c.Data = cm.Data; return c }(), sec, "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeTable(tc.cm, tc.sec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.want == "":
				if got.Hash() != tc.cm.Annotations[HashAnnotation] {
					t.Errorf("hash %s, want %s", got.Hash(), tc.cm.Annotations[HashAnnotation])
				}
				for _, c := range got.Channels {
					if c.HasCredentials && got.Credentials[c.Name].Reveal() == "" {
						t.Errorf("channel %s has no key", c.Name)
					}
				}
			}
		})
	}
}

// TestNeverHalfAConfig: the controller writes the Secret, then the ConfigMap; a proxy that sees
// one without the other keeps serving the table it has, says why, and applies the new one once
// both carry its hash. Whichever object comes first, and in either form.
func TestNeverHalfAConfig(t *testing.T) {
	env := requireEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "never-half"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	weight := func(w int) func(*routing.Table) { return func(tb *routing.Table) { tb.Channels[0].Weight = w } }
	cm1, sec1 := objects(t, env.Root, ns.Name, weight(1))
	cm2, sec2 := objects(t, env.Root, ns.Name, weight(2))
	cm3, sec3 := objects(t, env.Root, ns.Name, weight(3))
	cm2 = compress(t, cm2)
	h1, h2, h3 := cm1.Annotations[HashAnnotation], cm2.Annotations[HashAnnotation], cm3.Annotations[HashAnnotation]
	if err := env.Client.Create(ctx, sec1); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, cm1); err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	src := &ConfigMapSource{Config: env.Config, Namespace: ns.Name, Name: "routing"}
	if err := src.Run(ctx, srv); err != nil {
		t.Fatal(err)
	}
	serving := func(hash, why string) {
		t.Helper()
		waitFor(t, 5*time.Second, "hash "+hash+" with error "+strconv.Quote(why), func() bool {
			st := srv.ChannelsState().Config
			return st.Hash == hash && strings.Contains(st.Error, why) && (why != "") == (st.Error != "")
		})
	}
	serving(h1, "")

	update := func(obj client.Object, data func()) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		data()
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cm, sec := &corev1.ConfigMap{}, &corev1.Secret{}
	cm.Namespace, cm.Name, sec.Namespace, sec.Name = ns.Name, "routing", ns.Name, "routing"+CredentialsSuffix

	// The Secret of table 2 first: table 1 keeps serving, waiting for its ConfigMap.
	update(sec, func() { sec.Annotations, sec.Data = sec2.Annotations, sec2.Data })
	serving(h1, "waiting for both to match")
	// Its ConfigMap (compressed): table 2 serves.
	update(cm, func() { cm.Annotations, cm.Data, cm.BinaryData = cm2.Annotations, cm2.Data, cm2.BinaryData })
	serving(h2, "")
	// The other way round (say, the Secret's write failed): table 3's ConfigMap, plain, alone.
	update(cm, func() { cm.Annotations, cm.Data, cm.BinaryData = cm3.Annotations, cm3.Data, cm3.BinaryData })
	serving(h2, "waiting for both to match")
	update(sec, func() { sec.Annotations, sec.Data = sec3.Annotations, sec3.Data })
	serving(h3, "")
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
