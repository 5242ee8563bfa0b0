package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretReader reads Secrets without caching every Secret in the watched namespaces: the
// manager's cache holds only their metadata (the Secret watches are metadata-only), and the data
// of the few Secrets the controller needs — those channels reference, and its own credentials
// Secret — is read from the API server when their resourceVersion changes, and kept until then.
// A cluster's Secrets include Helm release records of up to 1 MiB each; caching them all would
// put every team's secret data in the controller's memory and could run it out of it.
type secretReader struct {
	cache client.Reader // the manager's cache (metadata of Secrets)
	api   client.Reader // the API server

	mu   sync.Mutex
	data map[client.ObjectKey]*corev1.Secret
}

func newSecretReader(cache, api client.Reader) *secretReader {
	return &secretReader{cache: cache, api: api, data: map[client.ObjectKey]*corev1.Secret{}}
}

// get returns the Secret (a copy the caller may keep), or a NotFound error.
func (r *secretReader) get(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.cache.Get(ctx, key, meta); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return nil, err
	}
	r.mu.Lock()
	s, ok := r.data[key]
	r.mu.Unlock()
	if ok && s.ResourceVersion == meta.ResourceVersion {
		return s.DeepCopy(), nil
	}
	s = &corev1.Secret{}
	if err := r.api.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return nil, err
	}
	r.mu.Lock()
	r.data[key] = s
	r.mu.Unlock()
	return s.DeepCopy(), nil
}

func (r *secretReader) forget(key client.ObjectKey) {
	r.mu.Lock()
	delete(r.data, key)
	r.mu.Unlock()
}

// retain drops the data of every Secret but those in keep: a Secret no channel references any
// more is not held.
func (r *secretReader) retain(keep map[client.ObjectKey]bool) {
	r.mu.Lock()
	for k := range r.data {
		if !keep[k] {
			delete(r.data, k)
		}
	}
	r.mu.Unlock()
}

// held is the number of Secrets whose data is kept (tests).
func (r *secretReader) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.data)
}
