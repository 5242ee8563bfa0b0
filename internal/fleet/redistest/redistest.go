// Package redistest runs a real redis-server on a random loopback port for tests: no
// persistence, no config file, stopped when the test ends. It finds the server through
// $SWITCHYARD_REDIS_SERVER, then PATH (hack/redis.sh installs Debian's redis-server when it is
// missing). Tests that need it skip when no server is found, unless $SWITCHYARD_REQUIRE_REDIS is
// set (CI), where a missing server fails them.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/procs"
)

// Server is one redis-server child process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr  string
	child *procs.Child
}

// Binary is the redis-server to run: $SWITCHYARD_REDIS_SERVER, else redis-server on PATH.
func Binary() (string, error) {
	if p := os.Getenv("SWITCHYARD_REDIS_SERVER"); p != "" {
		return p, nil
	}
	return exec.LookPath("redis-server")
}

// Start starts a redis-server for t and stops it in t.Cleanup. Extra arguments are passed as
// config directives (e.g. "--requirepass", "secret").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("SWITCHYARD_REQUIRE_REDIS") != "" {
			t.Fatalf("no redis-server (hack/redis.sh installs it): %v", err)
		}
		t.Skipf("no redis-server on PATH or in $SWITCHYARD_REDIS_SERVER (hack/redis.sh installs it): %v", err)
	}
	// The port is picked, then bound by redis-server: another process may take it between the
	// two, so a failed start is retried on another port, a bounded number of times.
	var lastErr error
	for range 3 {
		s, err := start(t, bin, extra)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string, extra []string) (*Server, error) {
	ports, err := procs.FreePorts(1)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	args := []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning"}
	args = append(args, extra...)
	c, err := procs.Start(procs.Spec{Name: "redis-server", Path: bin, Args: args, Log: filepath.Join(dir, "redis.log")})
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), child: c}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c.Exited() {
			return nil, fmt.Errorf("redis-server exited: %s", c.Tail(10))
		}
		if ping(s.Addr) == nil {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = c.Stop(2 * time.Second)
	return nil, fmt.Errorf("redis-server not answering PING on %s after 10s: %s", s.Addr, c.Tail(10))
}

// ping sends an inline PING and expects +PONG (or -NOAUTH, which also says it serves).
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && (len(line) < 7 || line[:7] != "-NOAUTH") {
		return fmt.Errorf("unexpected answer %q", line)
	}
	return nil
}

// URL is redis://127.0.0.1:PORT/0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Stop ends the server (a paused one is resumed first, so it can exit). Safe to call twice.
func (s *Server) Stop() {
	if s.child.Exited() {
		return
	}
	s.Resume()
	_ = s.child.Stop(5 * time.Second)
}

// Pause stops the process (SIGSTOP): connections stay open and every call hangs, as with a
// partitioned or overloaded store.
func (s *Server) Pause() { _ = syscall.Kill(s.child.PID(), syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { _ = syscall.Kill(s.child.PID(), syscall.SIGCONT) }
