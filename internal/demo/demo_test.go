package demo

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// childEnv makes the test binary play the switchyard binary's mock-provider and proxy
// subcommands, so the integration test runs the demo's real child processes without building
// cmd/switchyard.
const childEnv = "SWITCHYARD_DEMO_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(childMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// childMain is a minimal stand-in for cmd/switchyard's mock-provider and proxy subcommands,
// accepting the flags the demo passes.
func childMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var err error
	switch args[0] {
	case "mock-provider":
		listen := fs.String("listen", "", "")
		name := fs.String("name", "", "")
		key := fs.String("api-key", "", "")
		wire := fs.String("wire", "openai", "")
		region := fs.String("region", "", "")
		accessKey := fs.String("access-key-id", "", "")
		if err = fs.Parse(args[1:]); err == nil {
			var m mockprovider.Mock = mockprovider.New(mockprovider.Options{Name: *name, APIKey: *key})
			if *wire == "bedrock" {
				m = mockprovider.CloudControl{CloudMock: mockprovider.NewBedrock(mockprovider.BedrockOptions{Name: *name, Region: *region,
					Credentials: []aws.Credentials{{AccessKeyID: *accessKey, SecretAccessKey: os.Getenv("MOCK_AWS_SECRET_ACCESS_KEY")}}})}
			}
			err = mockprovider.ListenAndServe(ctx, *listen, m)
		}
	case "proxy":
		cfg := fs.String("config", "", "")
		listen := fs.String("listen", "", "")
		adminListen := fs.String("admin-listen", "", "")
		drain := fs.Duration("drain-timeout", time.Second, "")
		tick := fs.Duration("tick", time.Second, "")
		accessLog := fs.String("access-log", "", "")
		if err = fs.Parse(args[1:]); err == nil {
			err = runTestProxy(ctx, *cfg, *listen, *adminListen, *accessLog, *drain, *tick)
		}
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runTestProxy(ctx context.Context, cfg, listen, adminListen, accessLog string, drain, tick time.Duration) error {
	opts := proxy.Options{Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	if accessLog != "" {
		f, err := os.OpenFile(accessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.AccessLog = f
	}
	srv := proxy.New(opts)
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	src := &source.FileSource{Path: cfg, Interval: time.Second}
	if err := src.Load(srv); err != nil {
		return err
	}
	go src.Watch(bg, srv)
	apiLn, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", adminListen)
	if err != nil {
		return err
	}
	return proxy.Serve(ctx, srv, proxy.ServeOptions{API: apiLn, Admin: adminLn, Drain: drain, Tick: tick})
}

// TestDemoCompressed plays the whole demo at 0.3× its durations (about 35 s): real child
// processes, real traffic, a real incident and recovery; it must tell the story and exit cleanly.
func TestDemoCompressed(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the demo for about 35 s")
	}
	t.Setenv(childEnv, "1")
	t.Setenv("TMPDIR", t.TempDir()) // the demo's own temp dir, kept on failure, goes with the test's
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	plain := false
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	// A generous recovery cap: on a busy machine a ramp can relapse on latency and go round again.
	err = Run(ctx, Options{Exe: exe, Config: sampleDir, Scale: 0.3, Live: &plain, RecoveryCap: 200 * time.Second}, &out, &errOut)
	t.Logf("demo ran %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	got := out.String()
	for _, w := range []string{
		"▶ demo: provider-a starts failing: gpt-4o answers HTTP 503; gpt-4o-mini hangs (no answer)",
		"RampCompleted (rule)",
		"provider-a × gpt-4o (mock: answers HTTP 503)",
		"provider-a × gpt-4o-mini (mock: hangs (no answer))",
		"recovery → full traffic",
		"Result: the story happened",
		"agrees)",
		// The broken-stream scene: OpenAI-format channels have no prefill, so the deterministic
		// request is regenerated and spliced.
		"answer, cut on provider-a after 48 of its 108 bytes",
		"finished on provider-b: regenerated and spliced",
		"byte for byte the unbroken answer",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	// Ejected from service: Healthy, or Degraded when the score fell first.
	for _, re := range []string{`provider-a × gpt-4o +(Healthy|Degraded) → Ejected`, `provider-a × gpt-4o-mini (Healthy|Degraded) → Ejected`} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("output lacks %q", re)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Error("plain output carries terminal escapes")
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}

// TestDemoFailsWhenTheStoryDoesNotHappen: with a recovery cap too short for cooldown, probes
// and ramp, the demo must say so and return an error (a smoke test that cannot pass by default).
func TestDemoFailsWhenTheStoryDoesNotHappen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo's processes")
	}
	t.Setenv(childEnv, "1")
	t.Setenv("TMPDIR", t.TempDir())
	exe, _ := os.Executable()
	var out bytes.Buffer
	plain := false
	o := Options{Exe: exe, Config: sampleDir, Scale: 0.3, Live: &plain, Steady: 5 * time.Second, Incident: 10 * time.Second,
		RecoveryCap: time.Second, KeepDir: false}
	err := Run(context.Background(), o, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "did not come back to Healthy") {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "the story did NOT happen") || !strings.Contains(out.String(), "giving up") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestCommandFlags(t *testing.T) {
	var errOut bytes.Buffer
	if err := Command(context.Background(), []string{"-h"}, io.Discard, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(errOut.String(), "--duration-scale") && !strings.Contains(errOut.String(), "-duration-scale") {
		t.Errorf("usage lacks the scale flag:\n%s", errOut.String())
	}
	if err := Command(context.Background(), []string{"--duration-scale", "0"}, io.Discard, io.Discard); err == nil {
		t.Error("scale 0 accepted")
	}
	if err := Command(context.Background(), []string{"extra"}, io.Discard, io.Discard); err == nil {
		t.Error("a stray argument accepted")
	}
	if err := Command(context.Background(), []string{"--claude", "--config", "x"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--claude") {
		t.Errorf("--claude with --config: %v", err)
	}
}

// TestDemoClaude plays `switchyard demo --claude` at 0.3× (about 35 s): the outage hits Claude on
// the Anthropic mock, Claude on the Bedrock mock (SigV4 verified) takes the traffic, and the
// Anthropic channel comes back.
func TestDemoClaude(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the demo for about 35 s")
	}
	t.Setenv(childEnv, "1")
	t.Setenv("TMPDIR", t.TempDir())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	plain := false
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err = Run(ctx, Options{Exe: exe, Config: "../../" + ClaudeConfigDir, Scale: 0.3, Live: &plain, RecoveryCap: 200 * time.Second}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	got := out.String()
	for _, w := range []string{
		"▶ demo: claude-anthropic starts failing: claude-sonnet-4-5 answers HTTP 503; claude-haiku-4-5 hangs (no answer)",
		"claude-bedrock",
		"Result: the story happened",
		"answer, cut on claude-anthropic after 48 of its 108 bytes",
		"finished on claude-bedrock: continued with the text sent as the assistant prefill",
		"byte for byte the unbroken answer",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}
