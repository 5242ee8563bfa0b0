package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/switchyard-io/switchyard/internal/procs"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stopGrace is how long a child may take to stop after SIGTERM before it is killed.
const stopGrace = 5 * time.Second

// proxyEnv is added to the proxies' environment (--proxy-env).
var proxyEnv []string

// startChild starts a process with stderr to a log file in dir; it returns the child's stdout.
func startChild(name, dir string, bin string, args ...string) (*procs.Child, io.ReadCloser, error) {
	return startChildEnv(name, dir, nil, bin, args...)
}

// startChildEnv is startChild with env added to the child's environment. Closing the child's
// stdin (Stop does) tells the upstream child to stop.
func startChildEnv(name, dir string, env []string, bin string, args ...string) (*procs.Child, io.ReadCloser, error) {
	c, err := procs.Start(procs.Spec{Name: name, Path: bin, Args: args, Env: append([]string{"GOTRACEBACK=all"}, env...),
		Log: filepath.Join(dir, name+".log"), PipeStdout: true, PipeStdin: true})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Stdout(), nil
}

// startUpstream runs this program in upstream mode and returns its address.
func startUpstream(dir string) (*procs.Child, string, error) {
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
	case <-c.Done():
		return nil, "", fmt.Errorf("upstream exited: %v\n%s", c.Err(), c.Tail(30))
	case <-time.After(10 * time.Second):
		c.Stop(stopGrace)
		return nil, "", errors.New("upstream did not start within 10s")
	}
}

// proxyProc is one switchyard proxy child.
type proxyProc struct {
	*procs.Child
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
		addrs, err := procs.FreeAddrs(2)
		if err != nil {
			return nil, err
		}
		api, admin := addrs[0], addrs[1]
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
		p := &proxyProc{Child: c, api: api, admin: admin}
		if err := procs.WaitHTTP(ctx, "http://"+admin+"/readyz", 60*time.Second, c); err != nil {
			c.Stop(stopGrace)
			if strings.Contains(c.Tail(30), "address already in use") {
				continue // lost the port race: try other ports
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p.readyIn = time.Since(start)
		return p, nil
	}
	return nil, fmt.Errorf("%s: could not find free ports", name)
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
