package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/testutil"
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

// A proxy starts on an audit log whose tail it cannot read (a 1.2 MiB line, as one request could
// write before lines were bounded), says so, and on SIGTERM closes the log with its end record:
// verify passes without --allow-tail-cut.
func TestProxyAuditLogFromAnyTailToCleanEnd(t *testing.T) {
	mock := mockprovider.New(mockprovider.Options{})
	up := httptest.NewServer(mock)
	defer up.Close()
	defer mock.Close()
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(`{"model":"`+strings.Repeat("m", 1200<<10)+`"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := testutil.FreeAddrs(t, 2)
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	logs := &testutil.SyncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"proxy", "--config", writeConfig(t, up.URL), "--listen", addrs[0], "--admin-listen", addrs[1],
			"--audit-log", path}, io.Discard, logs)
	}()
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addrs[1] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i == 200 {
			t.Fatalf("proxy never became ready:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Post("http://"+addrs[0]+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sigterm()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("proxy did not exit")
	}
	if !strings.Contains(logs.String(), `"reason":"unreadable_tail"`) {
		t.Errorf("no log line says why a new segment began:\n%.2000s", logs.String())
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "verify", path}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "ok: 1 line(s)") || !strings.Contains(out.String(), "clean shutdown") {
		t.Fatalf("verify: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
