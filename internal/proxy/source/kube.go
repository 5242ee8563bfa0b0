package source

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// The names the controller publishes under (defined once, in package routing).
const (
	ConfigMapKey           = routing.ConfigMapKey
	CompressedConfigMapKey = routing.CompressedConfigMapKey
	CredentialsKey         = routing.CredentialsKey
	HashAnnotation         = routing.HashAnnotation
	CredentialsSuffix      = routing.CredentialsSuffix
)

// ConfigMapSource watches the controller's ConfigMap and the credentials Secret beside it (only
// those two objects: informers filtered by name, matching the proxy's RBAC) and applies a new
// table whenever both carry the same content hash.
type ConfigMapSource struct {
	Config    *rest.Config
	Namespace string
	Name      string
	// SecretName is the credentials Secret (default Name + "-credentials", as the controller's
	// --credentials-secret-name defaults).
	SecretName string
}

func (k *ConfigMapSource) secretName() string {
	if k.SecretName != "" {
		return k.SecretName
	}
	return k.Name + CredentialsSuffix
}

func (k *ConfigMapSource) source() string { return fmt.Sprintf("configmap %s/%s", k.Namespace, k.Name) }

// Run starts the informers and applies changes until ctx ends. It returns once the informers
// have synced, or with an error when they cannot.
func (k *ConfigMapSource) Run(ctx context.Context, s Sink) error {
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		return fmt.Errorf("failed to create a Kubernetes client: %w", err)
	}
	factory := func(name string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(k.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	}
	cmFactory, secFactory := factory(k.Name), factory(k.secretName())
	cmInf := cmFactory.Core().V1().ConfigMaps()
	secInf := secFactory.Core().V1().Secrets()
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
		DeleteFunc: func(any) { poke(changed) },
	}
	if _, err := cmInf.Informer().AddEventHandler(notify); err != nil {
		return err
	}
	if _, err := secInf.Informer().AddEventHandler(notify); err != nil {
		return err
	}
	cmFactory.Start(ctx.Done())
	secFactory.Start(ctx.Done())
	for typ, ok := range cmFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("failed to sync the %v informer for %s", typ, k.source())
		}
	}
	for typ, ok := range secFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("failed to sync the %v informer for %s", typ, k.source())
		}
	}
	go func() {
		applied := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			cm, cmErr := cmInf.Lister().ConfigMaps(k.Namespace).Get(k.Name)
			sec, secErr := secInf.Lister().Secrets(k.Namespace).Get(k.secretName())
			if cmErr != nil {
				s.RejectConfig(k.source(), fmt.Errorf("ConfigMap %s/%s: %w", k.Namespace, k.Name, cmErr), nil)
				continue
			}
			if secErr != nil {
				sec = nil // a table without credentials is valid (local model servers)
			}
			// The table's hash leaves the keys out (it is the ConfigMap's); a rotated key changes
			// only the Secret, so its resourceVersion is part of what was applied.
			hash := cm.Annotations[HashAnnotation] + "/" + cm.ResourceVersion
			if sec != nil {
				hash += "/" + sec.ResourceVersion
			}
			if hash == applied {
				continue
			}
			t, err := decodeTable(cm, sec)
			if err != nil {
				s.RejectConfig(k.source(), err, nil)
				continue
			}
			s.Apply(t, k.source())
			applied = hash
		}
	}()
	poke(changed)
	return nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// decodeTable reads the table and the credentials, in the form routing.DecodeTable defines
// (plain or compressed; see there which upgrade order that supports). A Secret written for
// another table (the two objects are updated one after the other) is refused, so a channel never
// runs with a stale key and a proxy never applies half of a config: the caller keeps the last
// table until both carry the same hash.
func decodeTable(cm *corev1.ConfigMap, sec *corev1.Secret) (*routing.Table, error) {
	t, err := routing.DecodeTable(cm.Data, cm.BinaryData)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	t.Credentials = map[string]routing.Secret{}
	needKeys := false
	for _, c := range t.Channels {
		needKeys = needKeys || c.HasCredentials
	}
	if !needKeys {
		return t, nil
	}
	if sec == nil {
		return nil, fmt.Errorf("the credentials Secret for ConfigMap %s/%s is missing", cm.Namespace, cm.Name)
	}
	if want, got := cm.Annotations[HashAnnotation], sec.Annotations[HashAnnotation]; want != "" && got != want {
		return nil, fmt.Errorf("the credentials Secret is for config %q, the ConfigMap is %q: waiting for both to match", got, want)
	}
	keys, err := routing.DecodeCredentials(sec.Data[CredentialsKey])
	if err != nil {
		return nil, fmt.Errorf("the credentials Secret has no valid %s key", CredentialsKey)
	}
	for i := range t.Channels {
		c := &t.Channels[i]
		if !c.HasCredentials {
			continue
		}
		k, ok := routing.KeyFor(keys, c)
		if !ok {
			return nil, fmt.Errorf("the credentials Secret has no key for channel %s", c.ID())
		}
		t.Credentials[c.ID()] = k
	}
	return t, nil
}
