package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a process the bench started; it is stopped by its own pid only.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // closing it tells the upstream child to stop
	log    string         // file with its stderr
	done   chan struct{}
	errMsg error
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop sends SIGTERM, waits up to 5 s, then SIGKILL. Safe to call twice.
func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	if c.stdin != nil {
		_ = c.stdin.Close()
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) logTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// proxyEnv is added to the proxies' environment (--proxy-env).
var proxyEnv []string

// startChild starts a process with stderr to a log file in dir.
func startChild(name, dir string, bin string, args ...string) (*child, io.ReadCloser, error) {
	return startChildEnv(name, dir, nil, bin, args...)
}

func startChildEnv(name, dir string, env []string, bin string, args ...string) (*child, io.ReadCloser, error) {
	cmd := exec.Command(bin, args...)
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = lf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		lf.Close()
		return nil, nil, err
	}
	cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	// Should the bench die without cleaning up, its children get SIGTERM from the kernel.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, log: logPath, done: make(chan struct{})}
	go func() {
		c.errMsg = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	return c, stdout, nil
}

// startUpstream runs this program in upstream mode and returns its address.
func startUpstream(dir string) (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	c, stdout, err := startChild("upstream", dir, self, upstreamMode, "--listen", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				addrc <- a
			}
		}
	}()
	select {
	case a := <-addrc:
		return c, a, nil
	case <-c.done:
		return nil, "", fmt.Errorf("upstream exited: %v\n%s", c.errMsg, c.logTail())
	case <-time.After(10 * time.Second):
		c.stop()
		return nil, "", errors.New("upstream did not start within 10s")
	}
}

// freePort returns a loopback address that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proxyProc is one switchyard proxy child.
type proxyProc struct {
	*child
	api, admin string
	readyIn    time.Duration // from exec to /readyz answering 200
}

// startProxy runs `switchyard proxy --config cfg` on two free loopback ports and waits for /readyz.
func startProxy(ctx context.Context, name, dir, bin, cfg string, extra ...string) (*proxyProc, error) {
	return startProxyEnv(ctx, name, dir, bin, cfg, nil, extra...)
}

// startProxyEnv is startProxy with env added to the proxy's environment (after proxyEnv).
func startProxyEnv(ctx context.Context, name, dir, bin, cfg string, env []string, extra ...string) (*proxyProc, error) {
	for attempt := 0; attempt < 3; attempt++ {
		api, err := freePort()
		if err != nil {
			return nil, err
		}
		admin, err := freePort()
		if err != nil {
			return nil, err
		}
		args := append([]string{"proxy", "--config", cfg, "--listen", api, "--admin-listen", admin}, extra...)
		if bin == "" { // the in-process profiling proxy: this program in profile mode
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			bin, args = self, append([]string{profileMode}, args[1:]...)
		}
		start := time.Now()
		c, stdout, err := startChildEnv(name, dir, append(slices.Clip(proxyEnv), env...), bin, args...)
		if err != nil {
			return nil, err
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		p := &proxyProc{child: c, api: api, admin: admin}
		if err := waitReady(ctx, c, "http://"+admin+"/readyz", 60*time.Second); err != nil {
			c.stop()
			if strings.Contains(c.logTail(), "address already in use") {
				continue // lost the port race: try other ports
			}
			return nil, fmt.Errorf("%s: %w\n%s", name, err, c.logTail())
		}
		p.readyIn = time.Since(start)
		return p, nil
	}
	return nil, fmt.Errorf("%s: could not find free ports", name)
}

func waitReady(ctx context.Context, c *child, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if c.exited() {
			return fmt.Errorf("exited: %v", c.errMsg)
		}
		resp, err := hc.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready within %s", limit)
}

// ---- /proc ----

// clockTick is USER_HZ, the unit of utime/stime in /proc/PID/stat: 100 on every Linux
// architecture Go supports.
const clockTick = 100

// cpuSeconds is user+system CPU time of a process (all its threads), from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14 of stat
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable utime/stime")
	}
	return (ut + st) / clockTick, nil
}

// memKiB reads VmRSS and VmHWM (peak RSS) from /proc/PID/status, in KiB.
func memKiB(pid int) (rss, hwm int64, err error) {
	m, err := procStatus(pid)
	return m["VmRSS"], m["VmHWM"], err
}

// procStatus reads the kB figures of /proc/PID/status (VmRSS, VmHWM, RssAnon, RssFile, ...).
func procStatus(pid int) (map[string]int64, error) {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		out[k] = n
	}
	return out, nil
}

// childPIDs lists the direct children of pid (nginx workers), from /proc/PID/task/*/children.
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// procGroup is a process plus, for nginx, its workers: CPU and memory are summed over them.
type procGroup struct{ pids func() []int }

func (g procGroup) cpu() float64 {
	if g.pids == nil {
		return 0
	}
	var sum float64
	for _, p := range g.pids() {
		if c, err := cpuSeconds(p); err == nil {
			sum += c
		}
	}
	return sum
}

func (g procGroup) mem() (rss, hwm int64) {
	if g.pids == nil {
		return 0, 0
	}
	for _, p := range g.pids() {
		if r, h, err := memKiB(p); err == nil {
			rss += r
			hwm += h
		}
	}
	return rss, hwm
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return fmt.Sprintf("%.0f GiB", float64(n)/(1<<20))
			}
		}
	}
	return ""
}
