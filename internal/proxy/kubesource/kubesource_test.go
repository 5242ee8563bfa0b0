package kubesource

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testenv"
)

func objects(t *testing.T, root, ns string, mutate func(*routing.Table)) (*corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	tbl, _, err := proxy.LoadFiles(filepath.Join(root, "config", "samples", "standalone"), func(string) string { return "" })
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
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
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
