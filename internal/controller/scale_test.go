package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// maxObjectBytes is the API server's limit on one ConfigMap's or Secret's data (1 MiB); the
// published objects, metadata and managedFields included, must stay under it.
const maxObjectBytes = 1 << 20

// TestPublishAtScale: 1,000 channels × 5 models (5,000 channel×model keys) and 1,000 policies
// are published through a real API server and loaded by the proxy's reader (source.ConfigMapSource), every
// object under 1 MiB.
func TestPublishAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 2,200 objects")
	}
	h := startController(t, "scale", nil)
	in := routingtest.ScaleInputs(h.ns)
	start := time.Now()
	h.createAll(in)
	t.Logf("created %d channels, %d policies, %d Secrets in %s", len(in.Channels), len(in.Policies), len(in.Secrets), time.Since(start).Round(time.Millisecond))

	hash := h.waitPublished(routingtest.ScaleChannels, routingtest.ScalePolicies, 5*time.Minute)
	t.Logf("published in %s from the start", time.Since(start).Round(time.Millisecond))
	cm, sec := h.published(t)
	if _, plain := cm.Data[TableKey]; plain || cm.BinaryData[CompressedTableKey] == nil {
		t.Errorf("at scale the table is not in %s alone: data keys %v", CompressedTableKey, keys(cm.Data))
	}
	h.checkSizes(cm, sec)

	srv := startReader(t, h)
	waitForHash(t, srv, hash, 30*time.Second)
	// decodeTable refuses a table with a channel whose key is missing, so a loaded table carries
	// the 1,000 keys.
	if n := len(srv.ChannelsState().Channels); n != routingtest.ScaleChannels*routingtest.ScaleModels {
		t.Errorf("the proxy runs %d channel×models, want %d", n, routingtest.ScaleChannels*routingtest.ScaleModels)
	}
}

// TestPublishedFormFollowsSize: the ConfigMap switches from plain JSON to gzip as the table
// grows past routing.PlainTableLimit and back as it shrinks, holding one form at a time (the
// other key removed), and a proxy follows every switch.
func TestPublishedFormFollowsSize(t *testing.T) {
	h := startController(t, "form", nil)
	const small, large = 2, 40 // teams: about 30 KB and 570 KB of indented JSON
	h.createAll(routingtest.Teams(h.ns, small))
	hash := h.waitPublished(small*routingtest.ScaleGroup, small*routingtest.ScaleModels, time.Minute)
	cm, _ := h.published(t)
	if _, ok := cm.Data[TableKey]; !ok || cm.BinaryData != nil {
		t.Fatalf("a small table is not plain %s: data %v binaryData %d keys", TableKey, keys(cm.Data), len(cm.BinaryData))
	}
	srv := startReader(t, h)
	waitForHash(t, srv, hash, 10*time.Second)

	all := routingtest.Teams(h.ns, large)
	h.createAll(routing.Inputs{
		Channels: all.Channels[small*routingtest.ScaleGroup:],
		Policies: all.Policies[small*routingtest.ScaleModels:],
		Secrets:  all.Secrets[small:],
	})
	hash = h.waitPublished(large*routingtest.ScaleGroup, large*routingtest.ScaleModels, 2*time.Minute)
	cm, sec := h.published(t)
	if _, ok := cm.Data[TableKey]; ok || cm.BinaryData[CompressedTableKey] == nil {
		t.Fatalf("a large table is not %s alone: data %v", CompressedTableKey, keys(cm.Data))
	}
	h.checkSizes(cm, sec)
	waitForHash(t, srv, hash, 10*time.Second)

	ctx := context.Background()
	for _, pc := range all.Channels[small*routingtest.ScaleGroup:] {
		if err := h.c.Delete(ctx, &pc); err != nil {
			t.Fatal(err)
		}
	}
	for _, rp := range all.Policies[small*routingtest.ScaleModels:] {
		if err := h.c.Delete(ctx, &rp); err != nil {
			t.Fatal(err)
		}
	}
	hash = h.waitPublished(small*routingtest.ScaleGroup, small*routingtest.ScaleModels, 2*time.Minute)
	cm, _ = h.published(t)
	if _, ok := cm.Data[TableKey]; !ok || len(cm.BinaryData) != 0 {
		t.Fatalf("shrunk back, the table is not plain %s alone: binaryData %d keys", TableKey, len(cm.BinaryData))
	}
	waitForHash(t, srv, hash, 10*time.Second)
}

// TestRenderTooLarge: a table that cannot fit one ConfigMap even compressed is refused before
// anything is written, as a terminal error (only a change to the objects, which reconciles
// again, can fix it), and says how large it is.
func TestRenderTooLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	tbl := &routing.Table{Policies: []routing.Policy{}, Credentials: map[string]routing.Secret{}}
	for i := range 2500 {
		host := make([]byte, 1000) // random letters: about 60% of their size compressed
		for j := range host {
			host[j] = byte('a' + rng.IntN(26))
		}
		tbl.Channels = append(tbl.Channels, routing.Channel{Name: fmt.Sprintf("c-%d", i), Provider: "openai", BaseURL: "https://" + string(host) + ".example/v1"})
	}
	_, err := render(tbl)
	if !errors.Is(err, reconcile.TerminalError(nil)) || !errors.Is(err, routing.ErrTooLarge) || !strings.Contains(err.Error(), "bytes compressed") {
		t.Errorf("render of a table too large: %v", err)
	}
}

// createAll creates the objects of in (Secrets first), a few at a time.
func (h *harness) createAll(in routing.Inputs) {
	h.t.Helper()
	var objs []client.Object
	for i := range in.Secrets {
		objs = append(objs, in.Secrets[i].DeepCopy())
	}
	for i := range in.Channels {
		objs = append(objs, in.Channels[i].DeepCopy())
	}
	for i := range in.Policies {
		objs = append(objs, in.Policies[i].DeepCopy())
	}
	work := make(chan client.Object)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if err := h.c.Create(context.Background(), o); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatalf("create: %v", err)
	}
}

// waitPublished waits for the ConfigMap to hold a table of the given size, intact (its hash
// annotation is its content's), and returns the hash.
func (h *harness) waitPublished(channels, policies int, limit time.Duration) string {
	h.t.Helper()
	var hash string
	NewWithT(h.t).Eventually(func(g Gomega) {
		cm := h.configMap(g)
		tbl, err := routing.DecodeTable(cm.Data, cm.BinaryData)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tbl.Channels).To(HaveLen(channels))
		g.Expect(tbl.Policies).To(HaveLen(policies))
		hash = cm.Annotations[ConfigHashAnnotation]
		g.Expect(hash).To(Equal(tbl.Hash()))
	}).WithTimeout(limit).WithPolling(250 * time.Millisecond).Should(Succeed())
	return hash
}

// published returns the ConfigMap and credentials Secret as the API server holds them.
func (h *harness) published(t *testing.T) (*corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	g := NewWithT(t)
	cm, sec := h.configMap(g), &corev1.Secret{}
	g.Expect(h.c.Get(context.Background(), h.key(DefaultConfigMapName+"-credentials"), sec)).To(Succeed())
	return cm, sec
}

// checkSizes logs both objects' sizes (their data, and the whole object as JSON, managedFields
// included) and fails when one is over 1 MiB.
func (h *harness) checkSizes(cm *corev1.ConfigMap, sec *corev1.Secret) {
	h.t.Helper()
	cmData, secData := 0, 0
	for _, v := range cm.Data {
		cmData += len(v)
	}
	for _, v := range cm.BinaryData {
		cmData += len(v)
	}
	for _, v := range sec.Data {
		secData += len(v)
	}
	largest, largestName := 0, ""
	for _, o := range []struct {
		name string
		obj  client.Object
		data int
	}{{"ConfigMap " + cm.Name, cm, cmData}, {"Secret " + sec.Name, sec, secData}} {
		b, err := json.Marshal(o.obj)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Logf("%s: %d bytes of data, %d bytes as JSON", o.name, o.data, len(b))
		if len(b) > largest {
			largest, largestName = len(b), o.name
		}
		if len(b) > maxObjectBytes {
			h.t.Errorf("%s is %d bytes, over 1 MiB", o.name, len(b))
		}
	}
	h.t.Logf("largest object: %s, %d bytes (%.1f%% of 1 MiB)", largestName, largest, 100*float64(largest)/maxObjectBytes)
}

// startReader runs a proxy fed by source.ConfigMapSource from the harness's ConfigMap, as `switchyard proxy
// --configmap` does.
func startReader(t *testing.T, h *harness) *proxy.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	src := &source.ConfigMapSource{Config: h.env.Config, Namespace: h.ns, Name: DefaultConfigMapName}
	if err := src.Run(ctx, srv); err != nil {
		t.Fatal(err)
	}
	return srv
}

func waitForHash(t *testing.T, srv *proxy.Server, hash string, limit time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		st := srv.ChannelsState().Config
		g.Expect(st.Hash).To(Equal(hash), "the proxy's config: %+v", st)
		g.Expect(st.Error).To(BeEmpty())
	}).WithTimeout(limit).WithPolling(50 * time.Millisecond).Should(Succeed())
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// BenchmarkPublishAtScale is one publication at the benchmarked scale (1,000 channels × 5
// models, 1,000 policies): compile and render the ConfigMap's and the Secret's content, and
// server-side apply both to a real API server. Each iteration publishes a different table (one
// channel's weight alternates), so every apply writes.
func BenchmarkPublishAtScale(b *testing.B) {
	in := routingtest.ScaleInputs("llm")
	tables := [2]*rendered{}
	for i := range tables {
		in.Channels[0].Spec.Weight = int32(100 + i)
		t, problems := routing.Compile(in)
		if len(problems) > 0 {
			b.Fatal(problems)
		}
		r, err := render(t)
		if err != nil {
			b.Fatal(err)
		}
		tables[i] = r
	}
	b.Run("compile+render", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			in.Channels[0].Spec.Weight = int32(100 + i%2)
			t, _ := routing.Compile(in)
			if _, err := render(t); err != nil {
				b.Fatal(err)
			}
		}
	})

	e := requireEnv(b)
	ns := fmt.Sprintf("bench-%d", namespaces.Add(1))
	if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	p := NewPublisher(e.Client, e.Client, Options{ProxyNamespace: ns, ConfigMapName: DefaultConfigMapName,
		CredentialsSecretName: DefaultConfigMapName + routing.CredentialsSuffix})
	publish := func(ctx context.Context, r *rendered) {
		if err := p.applySecret(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := p.applyConfigMap(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("publish", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			publish(ctx, tables[i%2])
		}
	})
	b.Run("compile+render+publish", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			in.Channels[0].Spec.Weight = int32(100 + i%2)
			t, _ := routing.Compile(in)
			r, err := render(t)
			if err != nil {
				b.Fatal(err)
			}
			publish(ctx, r)
		}
	})
}

// BenchmarkReconcileAtScale is what each reconcile pays for the config at the benchmarked scale
// when nothing it reads changed (a status write, a publication that reconciles every object):
// the fingerprint that finds the memoized compile, beside the compile and render it saves.
func BenchmarkReconcileAtScale(b *testing.B) {
	in := routingtest.ScaleInputs("llm")
	b.Run("compile+render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, _ := routing.Compile(in)
			if _, err := render(t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = fingerprint(in)
		}
	})
}
