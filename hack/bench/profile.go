package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// profileMode runs the proxy the way `switchyard proxy --config` does (same package, same options,
// same servers) inside this program, with a CPU profile of the whole process written on SIGTERM.
// The released binary has no profiling endpoint, and should not grow one for a benchmark.
const profileMode = "__profile-proxy"

func runProfileProxy(args []string) error {
	fs := flag.NewFlagSet(profileMode, flag.ContinueOnError)
	cfg := fs.String("config", "", "manifests")
	listen := fs.String("listen", "127.0.0.1:0", "API address")
	adminListen := fs.String("admin-listen", "127.0.0.1:0", "admin address")
	cpuprofile := fs.String("cpuprofile", "", "write the CPU profile here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Create(*cpuprofile)
	if err != nil {
		return err
	}
	defer f.Close()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := proxy.New(proxy.Options{Logger: logger})
	src := &source.FileSource{Path: *cfg, Interval: time.Second}
	if err := src.Load(srv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	go src.Watch(ctx, srv)
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", *adminListen)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	err = proxy.Serve(ctx, srv, proxy.ServeOptions{API: apiLn, Admin: adminLn, Drain: 2 * time.Second, Tick: time.Second})
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "profile written to", *cpuprofile)
	return nil
}
