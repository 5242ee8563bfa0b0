package controller

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeSecrets is a store of Secrets read two ways: as metadata (the cache, which refuses whole
// Secrets as a metadata-only cache would) and whole (the API server, counting reads).
type fakeSecrets struct {
	objs     map[client.ObjectKey]*corev1.Secret
	apiReads int
}

type fakeMeta struct{ f *fakeSecrets }
type fakeAPI struct{ f *fakeSecrets }

func (f *fakeSecrets) find(key client.ObjectKey) (*corev1.Secret, error) {
	s, ok := f.objs[key]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	return s, nil
}

func (m fakeMeta) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pm, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		panic("the secret reader read a whole Secret through the cache")
	}
	s, err := m.f.find(key)
	if err != nil {
		return err
	}
	pm.ObjectMeta = *s.ObjectMeta.DeepCopy()
	return nil
}

func (m fakeMeta) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func (a fakeAPI) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	a.f.apiReads++
	s, err := a.f.find(key)
	if err != nil {
		return err
	}
	s.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (a fakeAPI) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestSecretReaderReadsDataOnlyWhenItChanges(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "llm", Name: "openai"}
	f := &fakeSecrets{objs: map[client.ObjectKey]*corev1.Secret{
		key: {ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "openai", ResourceVersion: "1"}, Data: map[string][]byte{"apiKey": []byte("sk-1")}},
	}}
	r := newSecretReader(fakeMeta{f}, fakeAPI{f})

	for range 3 {
		s, err := r.get(ctx, key)
		if err != nil || string(s.Data["apiKey"]) != "sk-1" {
			t.Fatalf("get: %v %v", s, err)
		}
		s.Data["apiKey"] = []byte("scribbled") // a copy: the reader's own is untouched
	}
	if f.apiReads != 1 {
		t.Errorf("3 reads of an unchanged Secret went %d times to the API server, want 1", f.apiReads)
	}

	// Rotated: a new resourceVersion, read again.
	f.objs[key] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "openai", ResourceVersion: "2"}, Data: map[string][]byte{"apiKey": []byte("sk-2")}}
	if s, err := r.get(ctx, key); err != nil || string(s.Data["apiKey"]) != "sk-2" || f.apiReads != 2 {
		t.Errorf("after rotation: %v %v, %d API reads", s, err, f.apiReads)
	}

	// Deleted: NotFound, and its data is no longer held.
	delete(f.objs, key)
	if _, err := r.get(ctx, key); !apierrors.IsNotFound(err) {
		t.Errorf("deleted: %v, want NotFound", err)
	}
	if n := r.held(); n != 0 {
		t.Errorf("%d Secrets held after deletion", n)
	}
}

func TestSecretReaderRetainsOnlyWhatIsReferenced(t *testing.T) {
	ctx := context.Background()
	f := &fakeSecrets{objs: map[client.ObjectKey]*corev1.Secret{}}
	var keys []client.ObjectKey
	for _, name := range []string{"a", "b", "c"} {
		k := client.ObjectKey{Namespace: "llm", Name: name}
		keys = append(keys, k)
		f.objs[k] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: name, ResourceVersion: "1"}}
	}
	r := newSecretReader(fakeMeta{f}, fakeAPI{f})
	for _, k := range keys {
		if _, err := r.get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	r.retain(map[client.ObjectKey]bool{keys[1]: true})
	if n := r.held(); n != 1 {
		t.Errorf("held %d Secrets, want 1", n)
	}
}

// The cache keeps no copy of a Secret's values in its metadata: client-side apply puts the whole
// manifest into an annotation, and managed fields list the data keys.
func TestSecretMetadataIsStrippedInTheCache(t *testing.T) {
	var transform func(any) (any, error)
	for obj, c := range CacheOptions(Options{ProxyNamespace: "llm"}).ByObject {
		if _, isSecret := obj.(*corev1.Secret); isSecret {
			transform = c.Transform
		}
	}
	if transform == nil {
		t.Fatal("no cache transform for Secrets")
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "openai", Namespace: "llm", ResourceVersion: "7",
		Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"kind":"Secret","stringData":{"apiKey":"sk-live-123"}}`,
			"team":                             "payments",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:apiKey":{}}}`)}}},
	}}
	out, err := transform(meta)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if _, has := m.Annotations[corev1.LastAppliedConfigAnnotation]; has || len(m.ManagedFields) != 0 {
		t.Errorf("left in the cache: annotations %v, managed fields %v", m.Annotations, m.ManagedFields)
	}
	if m.Annotations["team"] != "payments" || m.ResourceVersion != "7" || m.Name != "openai" {
		t.Errorf("stripped too much: %+v", m.ObjectMeta)
	}
}

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSecretsAreWatchedAsMetadataOnly: the manager never lists or watches whole Secrets (which
// would put every Secret's data in the cluster into its cache); only the referenced ones are read,
// one by one. A client.Get(&corev1.Secret{}) through the cached client anywhere would break it.
func TestSecretsAreWatchedAsMetadataOnly(t *testing.T) {
	var mu sync.Mutex
	var lists, gets []string
	h := startControllerWith(t, "metaonly", nil, func(c *rest.Config) {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodGet {
					mu.Lock()
					switch p := r.URL.Path; {
					case strings.HasSuffix(p, "/secrets"):
						lists = append(lists, p+"?"+r.URL.RawQuery+" Accept: "+r.Header.Get("Accept"))
					case strings.Contains(p, "/secrets/"):
						gets = append(gets, p)
					}
					mu.Unlock()
				}
				return rt.RoundTrip(r)
			})
		})
	})
	h.apply(baseManifests)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(h.credentials(g)).To(HaveKeyWithValue(h.id("a"), "sk-test-a"))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	mu.Lock()
	defer mu.Unlock()
	if len(lists) == 0 {
		t.Fatal("no list or watch of Secrets recorded: the recorder is not in the path")
	}
	for _, l := range lists {
		if !strings.Contains(l, "as=PartialObjectMetadata") {
			t.Errorf("a list or watch of whole Secrets: %s", l)
		}
	}
	for _, p := range gets {
		if !strings.HasSuffix(p, "/secrets/key-a") && !strings.HasSuffix(p, "/secrets/key-b") && !strings.HasSuffix(p, "/secrets/"+DefaultConfigMapName+"-credentials") {
			t.Errorf("read a Secret nothing references: %s", p)
		}
	}
}
