package vertex

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-io/switchyard/api/v1alpha1"
)

// SecretKey is the Secret key a vertex channel reads when credentialsRef names none.
const SecretKey = "serviceAccountJSON"

var (
	regionRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
	projectRE = regexp.MustCompile(`^([a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
)

func checkRegion(region string) error {
	if region == "" {
		return errors.New("spec.region: required for vertex (the location, e.g. us-east5 or global)")
	}
	if len(region) > 63 || !regionRE.MatchString(region) {
		return fmt.Errorf("spec.region: %q is not a Vertex AI location", region)
	}
	return nil
}

func checkProject(project string) error {
	if project == "" {
		return errors.New("spec.project: required for vertex (the Google Cloud project id)")
	}
	if !projectRE.MatchString(project) {
		return fmt.Errorf("spec.project: %q is not a Google Cloud project id", project)
	}
	return nil
}

// Validate is the config compiler's check of a vertex ProviderChannel beyond what the API server
// already refuses (manifests read from files skip it): every message names the field.
func Validate(spec *v1alpha1.ProviderChannelSpec) error {
	if err := checkRegion(spec.Region); err != nil {
		return err
	}
	if err := checkProject(spec.Project); err != nil {
		return err
	}
	_, err := Endpoint(spec.Region, spec.BaseURL)
	return err
}

// SecretKeyOf is the Secret key a channel's service-account JSON is read from.
func SecretKeyOf(ref *v1alpha1.SecretKeyRef) string {
	if ref != nil && ref.Key != "" {
		return ref.Key
	}
	return SecretKey
}

// SecretValue reads and checks a vertex channel's service-account JSON: the one string the
// compiled table carries for the channel (Table.Credentials), which Config.Credentials takes.
// Only a service-account key is accepted, and its token_uri must be https (or http to a loopback
// address, for tests): the gateway posts a signed assertion there.
func SecretValue(s *corev1.Secret, key string) (string, error) {
	v, ok := s.StringData[key]
	if !ok {
		b, found := s.Data[key]
		if !found {
			return "", fmt.Errorf("spec.credentialsRef: Secret %s has no key %q", s.Name, key)
		}
		v = string(b)
	}
	var sa struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
		TokenURI    string `json:"token_uri"`
	}
	// Never quote the value or the decoder's error (which can quote it): it holds a private key.
	if json.Unmarshal([]byte(v), &sa) != nil {
		return "", fmt.Errorf("spec.credentialsRef: Secret %s key %q is not JSON (want a service-account key file)", s.Name, key)
	}
	switch {
	case sa.Type != "service_account":
		return "", fmt.Errorf("spec.credentialsRef: Secret %s key %q is a %q credential; vertex takes a service_account key", s.Name, key, sa.Type)
	case sa.ClientEmail == "" || !strings.Contains(sa.PrivateKey, "PRIVATE KEY"):
		return "", fmt.Errorf("spec.credentialsRef: Secret %s key %q lacks client_email or private_key", s.Name, key)
	case sa.TokenURI != "" && !allowedTokenURI(sa.TokenURI):
		return "", fmt.Errorf("spec.credentialsRef: Secret %s key %q: token_uri must be an https:// URL", s.Name, key)
	}
	return v, nil
}

func allowedTokenURI(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return u.Scheme == "http" && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback())
}
