package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/proxy"
)

func TestAuditVerifyCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		l.Record(&audit.Line{RequestID: "r", Client: "team/search", Status: 200, Attempts: []audit.Attempt{}})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "verify", path}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "ok: 5 line(s)") {
		t.Fatalf("intact log: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = strings.Replace(lines[1], `"status":200`, `"status":403`, 1)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"audit", "verify", path}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), path+":2:") || !strings.Contains(errOut.String(), "edited") {
		t.Fatalf("edited log: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"audit", "verify"}, &out, &errOut); code == 0 {
		t.Fatal("verify without files succeeded")
	}
}

// verify's exit status: 0 a chain that holds, 1 one cut at its head or tail (or empty), 2 usage;
// --allow-tail-cut accepts a log still being written, and the covered range is printed.
func TestAuditVerifyCuts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		l.Record(&audit.Line{RequestID: "r", Client: "team/search", Status: 200, Attempts: []audit.Attempt{}})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	write := func(name string, ls []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := write("head", lines[2:])
	tail := write("tail", lines[:4])
	empty := write("empty", nil)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{path}, 0, "covered seq: 1-7"},
		{[]string{head}, 1, "head_cut"},
		{[]string{tail}, 1, "tail_cut"},
		{[]string{"--allow-tail-cut", tail}, 0, "covered seq: 1-4"},
		{[]string{empty}, 1, "empty"},
		{[]string{"--allow-tail-cut", empty}, 1, "empty"},
		{[]string{}, 2, "at least one FILE"},
		{[]string{"--no-such-flag", path}, 2, ""},
		{[]string{filepath.Join(dir, "missing")}, 2, "no such file"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"audit", "verify"}, tc.args...), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("verify %v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
	if code := run(context.Background(), []string{"audit", "check"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("unknown subcommand: exit %d, want 2", code)
	}
}

// --audit-required: unset, the proxy decides by whether keys are required; set, always or never.
func TestAuditRequiredFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want proxy.AuditRequirement
	}{
		{nil, proxy.AuditRequiredWithKeys},
		{[]string{"--audit-required"}, proxy.AuditRequiredAlways},
		{[]string{"--audit-required=false"}, proxy.AuditRequiredNever},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var f auditRequiredFlag
		fs.Var(&f, "audit-required", "")
		if err := fs.Parse(tc.args); err != nil || f.requirement() != tc.want {
			t.Errorf("%v: %v %v, want %v", tc.args, err, f.requirement(), tc.want)
		}
	}
}
