// Package procs starts and stops the child processes of the tools that run Switchyard's own
// binaries on this machine (the demo, the benchmark harness, the local dev cluster), picks the
// loopback ports they listen on, and waits for them to be ready. One copy, so that a fix (the port
// race of two picks returning the same port; a child outliving its parent) lands everywhere.
package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Spec describes a child process.
type Spec struct {
	Name string   // for messages
	Path string   // the executable
	Args []string // its arguments (without argv[0])
	Env  []string // added to this process's environment
	Log  string   // file that gets the child's stderr, and its stdout unless PipeStdout

	AppendLog  bool // append to Log (a restarted child keeps one log) instead of truncating it
	PipeStdout bool // Child.Stdout reads the child's stdout (a child that prints its address)
	PipeStdin  bool // the child's stdin is a pipe that Stop closes first (a child that stops on EOF)
	OwnGroup   bool // the child gets its own process group: a Ctrl-C at the terminal reaches only the parent
}

// Child is a started process. It is stopped by its own pid only, never by name or group.
type Child struct {
	Name string
	Log  string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	done   chan struct{}
	err    error // the exit error; set before done is closed
}

// Start starts the child. Should this process die without stopping it, the kernel signals the
// child too (Linux), so no child outlives a crashed test or an interrupted tool.
func Start(s Spec) (*Child, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if s.AppendLog {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	lf, err := os.OpenFile(s.Log, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stderr = lf
	cmd.SysProcAttr = sysProcAttr(s.OwnGroup)
	c := &Child{Name: s.Name, Log: s.Log, cmd: cmd, done: make(chan struct{})}
	if s.PipeStdout {
		if c.stdout, err = cmd.StdoutPipe(); err != nil {
			lf.Close()
			return nil, err
		}
	} else {
		cmd.Stdout = lf
	}
	if s.PipeStdin {
		if c.stdin, err = cmd.StdinPipe(); err != nil {
			lf.Close()
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", s.Name, err)
	}
	go func() {
		c.err = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	return c, nil
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Stdout reads the child's stdout (Spec.PipeStdout); read it to EOF or the child may block.
func (c *Child) Stdout() io.ReadCloser { return c.stdout }

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the child has ended.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Err is the child's exit error (nil for status 0); valid once Done is closed.
func (c *Child) Err() error {
	<-c.done
	return c.err
}

// ErrKilled is returned by Stop when the child did not stop within the grace period.
var ErrKilled = errors.New("did not stop in time and was killed")

// Stop asks the child to shut down (closing its stdin, then SIGTERM) and kills it if it has not
// exited within grace. It returns the child's exit error, or ErrKilled. Safe to call twice.
func (c *Child) Stop(grace time.Duration) error {
	if c == nil {
		return nil
	}
	if c.Exited() {
		return c.err
	}
	if c.stdin != nil {
		_ = c.stdin.Close()
	}
	_ = c.cmd.Process.Signal(stopSignal)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return c.err
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s %w", c.Name, ErrKilled)
	}
}

// Tail returns the last lines of the child's log (at most 64 KiB of it).
func (c *Child) Tail(lines int) string {
	f, err := os.Open(c.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	const most = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		_, _ = f.Seek(fi.Size()-most, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, most))
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// FreeAddrs returns n distinct loopback addresses (127.0.0.1:port) that were free a moment ago.
// Every listener is held until all n are picked, so no two are the same port (picking one at a
// time can return a port twice); another process may still take one before the child binds it,
// which a caller sees as the child failing to listen.
func FreeAddrs(n int) ([]string, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// WaitHTTP polls url until it answers 200, ctx ends, limit passes, or the child (when not nil)
// exits. Its error says which, with the tail of the child's log.
func WaitHTTP(ctx context.Context, url string, limit time.Duration, c *Child) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	last := errors.New("no answer yet")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else if ctx.Err() == nil {
			last = err
		}
		var done <-chan struct{}
		if c != nil {
			done = c.done
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before %s answered (%v):\n%s", c.Name, url, c.err, c.Tail(20))
		case <-ctx.Done():
			name := "it"
			tail := ""
			if c != nil {
				name, tail = c.Name, "\n"+c.Tail(20)
			}
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && limit > 0 {
				return fmt.Errorf("%s: %s did not answer within %s: %v%s", name, url, limit, last, tail)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// FreePorts is FreeAddrs for callers that want the port numbers.
func FreePorts(n int) ([]int, error) {
	addrs, err := FreeAddrs(n)
	if err != nil {
		return nil, err
	}
	ports := make([]int, n)
	for i, a := range addrs {
		_, p, _ := net.SplitHostPort(a)
		ports[i], _ = strconv.Atoi(p)
	}
	return ports, nil
}
