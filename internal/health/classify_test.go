package health

import "testing"

func TestClassifyRefinesTheStatusByTheProvidersErrorCode(t *testing.T) {
	for _, tt := range []struct {
		provider string
		status   int
		code     string
		want     Outcome
	}{
		{"openai", 429, "", OutcomeRateLimited},
		{"openai", 429, "rate_limit_exceeded", OutcomeRateLimited},
		// Out of credit: no Retry-After ends it; the channel is broken until someone pays.
		{"openai", 429, "insufficient_quota", OutcomeServerError},
		{"azure-openai", 429, "insufficient_quota", OutcomeServerError},
		// A provider without the rule, and a code on another status, keep the status's class.
		{"some-reseller", 429, "insufficient_quota", OutcomeRateLimited},
		{"openai", 400, "insufficient_quota", OutcomeClientError},
		{"openai", 400, "context_length_exceeded", OutcomeClientError},
		{"openai", 503, "", OutcomeServerError},
	} {
		if got := Classify(tt.provider, tt.status, tt.code); got != tt.want {
			t.Errorf("Classify(%q, %d, %q) = %s, want %s", tt.provider, tt.status, tt.code, got, tt.want)
		}
	}
	// Without a code every provider's answer is OutcomeFromStatus's.
	for status := 0; status < 600; status++ {
		if got, want := Classify("openai", status, ""), OutcomeFromStatus(status); got != want {
			t.Errorf("Classify(openai, %d, \"\") = %s, OutcomeFromStatus says %s", status, got, want)
		}
	}
}
