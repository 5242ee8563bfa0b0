package routing

import (
	"fmt"
	"regexp"
	"slices"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/pii"
)

// PII is a policy's compiled spec.pii: what the proxy masks in prompts, or refuses.
type PII struct {
	// Mode is PIIMask or PIIBlock (a policy with masking off has no PII).
	Mode string `json:"mode"`
	// Detectors are the builtin detectors to run; empty: all of them.
	Detectors []string `json:"detectors,omitempty"`
	// Restore puts the original values back into answers (Mask).
	Restore bool             `json:"restore"`
	Custom  []CustomDetector `json:"customDetectors,omitempty"`
}

// CustomDetector is a policy's own detector: a name and an RE2 regular expression.
type CustomDetector struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
}

// The modes of a compiled PII.
const (
	PIIMask  = string(v1alpha1.PIIMask)
	PIIBlock = string(v1alpha1.PIIBlock)
)

// Config is the detector configuration for pii.Compile.
func (p *PII) Config() pii.Config {
	cfg := pii.Config{Detectors: slices.Clone(p.Detectors)}
	for _, c := range p.Custom {
		cfg.Custom = append(cfg.Custom, pii.Custom{Name: c.Name, Pattern: c.Pattern})
	}
	return cfg
}

var customDetectorName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// compilePII checks spec.pii (the CRD's rules again, for standalone manifests that skip the API
// server, and every pattern with the detectors' own compiler) and returns nil when masking is
// off. An invalid detector is an error even with mode Off: turning masking on must not be what
// finds it.
func compilePII(spec *v1alpha1.PII) (*PII, error) {
	if spec == nil {
		return nil, nil
	}
	out := &PII{Mode: string(spec.Mode), Restore: spec.Restore == nil || *spec.Restore}
	switch spec.Mode {
	case "", v1alpha1.PIIOff, v1alpha1.PIIMask, v1alpha1.PIIBlock:
	case "false":
		// YAML 1.1 reads an unquoted Off as false, and the decoder turns that into "false".
		return nil, fmt.Errorf("spec.pii.mode: unsupported value \"false\": write Off quoted (mode: \"Off\"); unquoted, YAML reads it as false")
	default:
		return nil, fmt.Errorf("spec.pii.mode: unsupported value %q: supported values: \"Off\", \"Mask\", \"Block\"", spec.Mode)
	}
	for i, d := range spec.Detectors {
		if slices.Contains(out.Detectors, string(d)) {
			return nil, fmt.Errorf("spec.pii.detectors[%d]: duplicate detector %q", i, d)
		}
		out.Detectors = append(out.Detectors, string(d))
	}
	if _, err := pii.Compile(pii.Config{Detectors: out.Detectors}); err != nil {
		return nil, fmt.Errorf("spec.pii.detectors: %v", err)
	}
	for i, c := range spec.CustomDetectors {
		switch {
		case len(c.Name) > 63 || !customDetectorName.MatchString(c.Name):
			return nil, fmt.Errorf("spec.pii.customDetectors[%d].name: %q must be lower-case letters, digits and '-', starting with a letter (at most 63)", i, c.Name)
		case slices.Contains(pii.Builtin, c.Name):
			return nil, fmt.Errorf("spec.pii.customDetectors[%d].name: %q is a builtin detector's name", i, c.Name)
		case slices.ContainsFunc(out.Custom, func(o CustomDetector) bool { return o.Name == c.Name }):
			return nil, fmt.Errorf("spec.pii.customDetectors[%d].name: duplicate detector %q", i, c.Name)
		case c.Pattern == "" || len(c.Pattern) > 1024:
			return nil, fmt.Errorf("spec.pii.customDetectors[%d].pattern: must be 1-1024 bytes", i)
		}
		one := CustomDetector{Name: c.Name, Pattern: c.Pattern}
		if _, err := pii.Compile(pii.Config{Detectors: out.Detectors, Custom: []pii.Custom{{Name: one.Name, Pattern: one.Pattern}}}); err != nil {
			return nil, fmt.Errorf("spec.pii.customDetectors[%d].pattern: %v", i, err)
		}
		out.Custom = append(out.Custom, one)
	}
	if _, err := pii.Compile(out.Config()); err != nil {
		return nil, fmt.Errorf("spec.pii: %v", err)
	}
	if out.Mode == "" || out.Mode == string(v1alpha1.PIIOff) {
		return nil, nil
	}
	return out, nil
}
