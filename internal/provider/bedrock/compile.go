package bedrock

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-io/switchyard/api/v1alpha1"
)

// The Secret keys a bedrock channel's credentialsRef names.
const (
	SecretAccessKeyID     = "accessKeyId"
	SecretSecretAccessKey = "secretAccessKey"
	SecretSessionToken    = "sessionToken" // optional: temporary credentials
)

// Credentials are static AWS credentials, as the compiled table carries them (SecretValue).
type Credentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken,omitempty"`
}

// String never shows the secret parts.
func (c Credentials) String() string { return "bedrock.Credentials{" + c.AccessKeyID + ", [redacted]}" }

// GoString never shows the secret parts (%#v).
func (c Credentials) GoString() string { return c.String() }

var regionRE = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)

func checkRegion(region string) error {
	if region == "" {
		return errors.New("spec.region: required for bedrock (the AWS region, e.g. us-east-1)")
	}
	if len(region) > 63 || !regionRE.MatchString(region) {
		return fmt.Errorf("spec.region: %q is not an AWS region name", region)
	}
	return nil
}

// Validate is the config compiler's check of a bedrock ProviderChannel beyond what the API server
// already refuses (manifests read from files skip it): every message names the field.
func Validate(spec *v1alpha1.ProviderChannelSpec) error {
	if err := checkRegion(spec.Region); err != nil {
		return err
	}
	if spec.Project != "" {
		return errors.New("spec.project: only used by vertex")
	}
	if spec.CredentialsRef != nil && spec.CredentialsRef.Key != "" {
		return fmt.Errorf("spec.credentialsRef.key: not used by bedrock: the Secret's keys %s, %s and %s (optional) are read",
			SecretAccessKeyID, SecretSecretAccessKey, SecretSessionToken)
	}
	if _, err := Endpoint(spec.Region, spec.BaseURL); err != nil {
		return err
	}
	return nil
}

// SecretValue reads a bedrock channel's Secret into the one string the compiled table carries for
// a channel (Table.Credentials), which Config.Credentials takes back. The error names the key.
func SecretValue(s *corev1.Secret) (string, error) {
	get := func(k string) string {
		if v, ok := s.StringData[k]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(string(s.Data[k]))
	}
	c := Credentials{AccessKeyID: get(SecretAccessKeyID), SecretAccessKey: get(SecretSecretAccessKey), SessionToken: get(SecretSessionToken)}
	switch {
	case c.AccessKeyID == "":
		return "", fmt.Errorf("spec.credentialsRef: Secret %s has no key %q", s.Name, SecretAccessKeyID)
	case c.SecretAccessKey == "":
		return "", fmt.Errorf("spec.credentialsRef: Secret %s has no key %q", s.Name, SecretSecretAccessKey)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ParseCredentials reads SecretValue's form.
func ParseCredentials(v string) (Credentials, error) {
	var c Credentials
	if err := json.Unmarshal([]byte(v), &c); err != nil || c.AccessKeyID == "" || c.SecretAccessKey == "" {
		// Never quote v: it is the secret.
		return Credentials{}, errors.New("bedrock: the channel's credentials are not accessKeyId and secretAccessKey (see bedrock.SecretValue)")
	}
	return c, nil
}
