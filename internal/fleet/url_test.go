package fleet

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw, env string
		want     Endpoint
		wantErr  string
	}{
		{raw: "redis://redis.llm.svc:6379/0", want: Endpoint{Addr: "redis.llm.svc:6379"}},
		{raw: "redis://127.0.0.1", want: Endpoint{Addr: "127.0.0.1:6379"}},
		{raw: "rediss://user:s3cret@cache:6380/2", want: Endpoint{Addr: "cache:6380", Username: "user", Password: "s3cret", DB: 2, TLS: true}},
		{raw: "redis://:fromurl@h/1", env: "fromenv", want: Endpoint{Addr: "h:6379", Password: "fromurl", DB: 1}},
		{raw: "redis://h", env: "fromenv", want: Endpoint{Addr: "h:6379", Password: "fromenv"}},
		{raw: "redis://[::1]:7000", want: Endpoint{Addr: "[::1]:7000"}},
		{raw: "http://h:6379", wantErr: "scheme"},
		{raw: "redis://", wantErr: "no host"},
		{raw: "redis://h/x", wantErr: "database"},
		{raw: "redis://h:0", wantErr: "port"},
		{raw: "redis://h?tls=1", wantErr: "query"},
		{raw: "redis://:p@ss word@h\x7f", wantErr: "not a URL"},
	} {
		got, err := ParseURL(tc.raw, tc.env)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%q) error %v, want one about %q", tc.raw, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "ss word") {
				t.Errorf("ParseURL(%q): the error shows the password: %v", tc.raw, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q, %q) = %+v, %v; want %+v", tc.raw, tc.env, got, err, tc.want)
		}
	}
}

func TestEndpointNeverShowsThePassword(t *testing.T) {
	ep, err := ParseURL("rediss://app:hunter2@cache:6380/3", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{ep.String(), fmt.Sprint(ep), fmt.Sprintf("%v %+v %#v %s", ep, ep, ep, ep)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("the password shows: %s", s)
		}
	}
	if got, want := ep.String(), "rediss://app:REDACTED@cache:6380/3"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Endpoint{Addr: "h:6379"}).String(); got != "redis://h:6379/0" {
		t.Errorf("without a password String() = %q", got)
	}
}
