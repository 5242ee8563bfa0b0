package vertex

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// The default credentials are found on first use, once; a failure is looked into again after
// adcRetry (a metadata server away at start), not cached for the process's life.
func TestDefaultCredentialsAreFoundLazilyAndRetried(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	finds := 0
	var fail error = errors.New("metadata: not reachable")
	a := &adcSource{now: func() time.Time { return now }, find: func() (oauth2.TokenSource, error) {
		finds++
		if fail != nil {
			return nil, fail
		}
		return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "ya29.test", Expiry: now.Add(time.Hour)}), nil
	}}
	saved := defaults
	defaults = a
	t.Cleanup(func() { defaults = saved })
	if _, err := New(Config{Project: "my-project", Region: "us-east5"}); err != nil || finds != 0 {
		t.Fatalf("New must not look for the default credentials (finds %d, err %v)", finds, err)
	}
	if _, err := a.Token(); err == nil || !strings.Contains(err.Error(), "Application Default Credentials") || finds != 1 {
		t.Fatalf("first token: %v (finds %d)", err, finds)
	}
	fail = nil
	if _, err := a.Token(); err == nil || finds != 1 {
		t.Fatalf("within adcRetry the failure stands (finds %d, err %v)", finds, err)
	}
	now = now.Add(adcRetry)
	if tok, err := a.Token(); err != nil || tok.AccessToken != "ya29.test" || finds != 2 {
		t.Fatalf("after adcRetry: %v %v (finds %d)", tok, err, finds)
	}
	if _, err := a.Token(); err != nil || finds != 2 {
		t.Fatalf("found once, kept: finds %d, err %v", finds, err)
	}
}
