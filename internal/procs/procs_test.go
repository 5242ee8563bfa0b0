package procs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary play a child: serve (answer 200 on /ready at $ADDR), exit (print
// a line to stderr and exit 3), stubborn (ignore SIGTERM), stdin (ignore SIGTERM, exit when stdin
// closes).
const childEnv = "PROCS_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		ln, err := net.Listen("tcp", os.Getenv("ADDR"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("LISTEN", ln.Addr())
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		go func() { _ = http.Serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
		<-ctx.Done()
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot start: the config is broken")
		os.Exit(3)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Minute)
	case "stdin": // stops only on EOF: Stop must close stdin
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(2)
}

func start(t *testing.T, mode string, s Spec) *Child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s.Name, s.Path = mode, exe
	s.Env = append(s.Env, childEnv+"="+mode)
	if s.Log == "" {
		s.Log = filepath.Join(t.TempDir(), mode+".log")
	}
	c, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(5 * time.Second) })
	return c
}

// readyLine waits for the child's "ready" line, then drains the rest of its stdout.
func readyLine(t *testing.T, c *Child) {
	t.Helper()
	sc := bufio.NewScanner(c.Stdout())
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the child did not say ready: %q %v", sc.Text(), sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, c.Stdout()) }()
}

func TestFreeAddrsAreDistinct(t *testing.T) {
	addrs, err := FreeAddrs(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s picked twice", a)
		}
		seen[a] = true
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("%s is not loopback", a)
		}
	}
}

func TestStartWaitStop(t *testing.T) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, "serve", Spec{Env: []string{"ADDR=" + addrs[0]}, PipeStdout: true})
	line := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c.Stdout())
		line <- string(b)
	}()
	if err := WaitHTTP(context.Background(), "http://"+addrs[0]+"/ready", 30*time.Second, c); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(10 * time.Second); err != nil {
		t.Fatalf("a clean stop returned %v", err)
	}
	if !c.Exited() {
		t.Fatal("not exited after Stop")
	}
	if got := <-line; !strings.Contains(got, "LISTEN "+addrs[0]) {
		t.Errorf("stdout = %q", got)
	}
	if err := c.Stop(time.Second); err != nil {
		t.Errorf("a second Stop returned %v", err)
	}
}

func TestWaitHTTPSaysTheChildExitedAndWhy(t *testing.T) {
	addrs, _ := FreeAddrs(1)
	c := start(t, "exit", Spec{})
	err := WaitHTTP(context.Background(), "http://"+addrs[0]+"/ready", 30*time.Second, c)
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "the config is broken") {
		t.Fatalf("err = %v", err)
	}
	if c.Err() == nil {
		t.Error("exit status 3 reported as success")
	}
}

func TestWaitHTTPGivesUpAfterItsLimit(t *testing.T) {
	addrs, _ := FreeAddrs(1)
	err := WaitHTTP(context.Background(), "http://"+addrs[0]+"/ready", 200*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("err = %v", err)
	}
}

func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	c := start(t, "stubborn", Spec{PipeStdout: true})
	readyLine(t, c) // a SIGTERM before it ignores them would stop it
	if err := c.Stop(200 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop = %v, want ErrKilled", err)
	}
}

func TestStopClosesStdinFirst(t *testing.T) {
	c := start(t, "stdin", Spec{PipeStdin: true, PipeStdout: true})
	readyLine(t, c)
	if err := c.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop = %v", err)
	}
}

func TestAppendLogKeepsTheEarlierRun(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	for range 2 {
		c := start(t, "exit", Spec{Log: log, AppendLog: true})
		<-c.Done()
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), "the config is broken"); n != 2 {
		t.Fatalf("log has %d runs:\n%s", n, b)
	}
	c := start(t, "exit", Spec{Log: log})
	<-c.Done()
	if b, _ := os.ReadFile(log); strings.Count(string(b), "the config is broken") != 1 {
		t.Fatalf("a truncating start kept the old log:\n%s", b)
	}
}
