package routing

import (
	"fmt"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// DefaultCapabilities are a provider's model capabilities where the spec leaves them unset.
//
// anthropic, bedrock, vertex (Claude on the Messages API, directly or on a cloud): every Claude model on the Messages API takes images and tools, continues a trailing
// assistant message, and has a 200k-token context; 4096 output tokens is what every Claude
// model accepts (newer ones take far more: set maxOutputTokens to raise it), and the Messages API
// requires a max_tokens, so this is what is sent when the client gives none.
//
// openai and azure-openai (any OpenAI-compatible server, local ones included): vision and tools
// are assumed, so that declaring nothing routes as before capabilities existed; context window
// and output limit are unknown (no pre-send overflow check, no max_tokens added); no prefill.
func DefaultCapabilities(p v1alpha1.Provider) Capabilities {
	switch p {
	case v1alpha1.ProviderAnthropic, v1alpha1.ProviderBedrock, v1alpha1.ProviderVertex:
		return Capabilities{Prefill: true, ContextWindow: 200000, MaxOutputTokens: 4096, Vision: true, Tools: true}
	default:
		return Capabilities{Vision: true, Tools: true}
	}
}

// resolveCapabilities lays the spec's capabilities over the provider's defaults. msg names the
// field (after "capabilities.") when they cannot be used.
func resolveCapabilities(p v1alpha1.Provider, spec *v1alpha1.ModelCapabilities) (Capabilities, string) {
	c := DefaultCapabilities(p)
	if spec == nil {
		return c, ""
	}
	if spec.Prefill != nil {
		c.Prefill = *spec.Prefill
	}
	if spec.Vision != nil {
		c.Vision = *spec.Vision
	}
	if spec.Tools != nil {
		c.Tools = *spec.Tools
	}
	if spec.ContextWindow != nil {
		if *spec.ContextWindow < 1 {
			return c, fmt.Sprintf("contextWindow: %d must be at least 1", *spec.ContextWindow)
		}
		c.ContextWindow = int(*spec.ContextWindow)
	}
	if spec.MaxOutputTokens != nil {
		if *spec.MaxOutputTokens < 1 {
			return c, fmt.Sprintf("maxOutputTokens: %d must be at least 1", *spec.MaxOutputTokens)
		}
		c.MaxOutputTokens = int(*spec.MaxOutputTokens)
	}
	if c.ContextWindow > 0 && c.MaxOutputTokens > c.ContextWindow {
		return c, fmt.Sprintf("maxOutputTokens: %d exceeds contextWindow %d", c.MaxOutputTokens, c.ContextWindow)
	}
	return c, ""
}
