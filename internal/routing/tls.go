package routing

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-io/switchyard/api/v1alpha1"
)

// ChannelTLS is a channel's compiled TLS client settings (ProviderChannel spec.tls). The CA
// bundle is public and travels with the table; the client certificate and its key travel with
// the provider keys, in Table.Credentials under CredentialPart(id, PartTLSCert) and PartTLSKey.
type ChannelTLS struct {
	CABundle          string `json:"caBundle,omitempty"`
	ClientCertificate bool   `json:"clientCertificate,omitempty"`
}

// The credential parts of a channel beyond its API key.
const (
	PartTLSCert = "tls.crt"
	PartTLSKey  = "tls.key"
)

// CredentialPart is the Table.Credentials key of one part of a channel's secret material other
// than its API key (which is under the channel ID itself). The "#" cannot occur in an ID, and a
// proxy that knows no parts looks up IDs only, so older proxies ignore the new entries.
func CredentialPart(channelID, part string) string { return channelID + "#" + part }

// TLSConfig builds the client TLS configuration of a channel from its compiled settings and
// credentials; nil when the channel has none. Compile has checked both, so an error here means
// a table that did not come from Compile.
func (t *Table) TLSConfig(ch *Channel) (*tls.Config, error) {
	if ch.TLS == nil {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ch.TLS.CABundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ch.TLS.CABundle)) {
			return nil, fmt.Errorf("channel %s: the CA bundle holds no PEM certificate", ch.ID())
		}
		cfg.RootCAs = pool
	}
	if ch.TLS.ClientCertificate {
		crt, key := t.Credentials[CredentialPart(ch.ID(), PartTLSCert)], t.Credentials[CredentialPart(ch.ID(), PartTLSKey)]
		pair, err := tls.X509KeyPair([]byte(crt.Reveal()), []byte(key.Reveal()))
		if err != nil {
			return nil, fmt.Errorf("channel %s: the client certificate does not load: %w", ch.ID(), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// channelTLS compiles spec.tls: the settings and the secret parts to publish with the keys. The
// messages name the field and the Secret, never a value.
func (c *compiler) channelTLS(pc *v1alpha1.ProviderChannel) (*ChannelTLS, map[string]string, bool) {
	spec := pc.Spec.TLS
	if spec == nil {
		return nil, nil, true
	}
	bad := func(reason, format string, args ...any) (*ChannelTLS, map[string]string, bool) {
		c.problem("ProviderChannel", pc.Namespace, pc.Name, reason, fmt.Sprintf(format, args...))
		return nil, nil, false
	}
	// No baseURL: bedrock and vertex derive an https one from the region.
	if pc.Spec.BaseURL != "" && !strings.HasPrefix(pc.Spec.BaseURL, "https://") {
		return bad(ReasonInvalidSpec, "spec.tls applies to an https:// baseURL only")
	}
	out := &ChannelTLS{CABundle: spec.CABundle}
	if spec.CABundle != "" {
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(spec.CABundle)) {
			return bad(ReasonInvalidSpec, "spec.tls.caBundle: no PEM certificate could be parsed")
		}
	}
	var parts map[string]string
	if ref := spec.ClientCertificateRef; ref != nil {
		name := QualifiedName(pc.Namespace, ref.Name)
		if c.reserved[name] {
			return bad(ReasonRefNotPermitted, "spec.tls.clientCertificateRef: Secret %s is Switchyard's own credentials Secret; a channel may reference only its team's Secrets", name)
		}
		s, found := c.secrets[name]
		if !found {
			return bad(ReasonSecretNotFound, "spec.tls.clientCertificateRef: Secret %s not found", name)
		}
		if s.Labels[InternalSecretLabel] == "true" {
			return bad(ReasonRefNotPermitted, "spec.tls.clientCertificateRef: Secret %s is labelled %s=true (Switchyard's own); a channel may reference only its team's Secrets", name, InternalSecretLabel)
		}
		crt, ok1 := secretValue(s, corev1.TLSCertKey)
		key, ok2 := secretValue(s, corev1.TLSPrivateKeyKey)
		if !ok1 || !ok2 {
			return bad(ReasonSecretKeyNotFound, "spec.tls.clientCertificateRef: Secret %s needs keys %s and %s (type kubernetes.io/tls)", name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		}
		if _, err := tls.X509KeyPair([]byte(crt), []byte(key)); err != nil {
			return bad(ReasonInvalidSpec, "spec.tls.clientCertificateRef: Secret %s: %s and %s do not form a certificate and its key: %v", name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
		}
		out.ClientCertificate = true
		parts = map[string]string{PartTLSCert: crt, PartTLSKey: key}
	}
	return out, parts, true
}

// SecretNames are the Secrets (in its namespace) a channel reads: its credentialsRef and its TLS
// client certificate. The controller watches and reads exactly these.
func SecretNames(pc *v1alpha1.ProviderChannel) []string {
	var out []string
	if ref := pc.Spec.CredentialsRef; ref != nil {
		out = append(out, ref.Name)
	}
	if t := pc.Spec.TLS; t != nil && t.ClientCertificateRef != nil && (len(out) == 0 || out[0] != t.ClientCertificateRef.Name) {
		out = append(out, t.ClientCertificateRef.Name)
	}
	return out
}
