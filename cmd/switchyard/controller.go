package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/controller"
	"github.com/switchyard-io/switchyard/internal/version"
)

func init() {
	commands["controller"] = command{"run the Kubernetes controller (compiles CRs into the proxy config, writes status)", runController}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runController(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("switchyard controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts                   controller.Options
		adminURLs, watchNS     stringList
		metricsAddr, probeAddr string
		leaderElect            bool
		leaderElectionID       string
		leaderElectionNS       string
		logLevel               string
	)
	fs.StringVar(&opts.ProxyNamespace, "proxy-namespace", os.Getenv("POD_NAMESPACE"),
		"namespace of the proxy: its routing ConfigMap, credentials Secret and Service (default $POD_NAMESPACE)")
	fs.StringVar(&opts.ConfigMapName, "configmap-name", controller.DefaultConfigMapName,
		"name of the routing ConfigMap the proxy reads (switchyard proxy --configmap NAMESPACE/NAME)")
	fs.StringVar(&opts.CredentialsSecretName, "credentials-secret-name", "",
		"name of the Secret holding provider keys (default <configmap-name>-credentials, which is what the proxy reads)")
	fs.Var(&watchNS, "watch-namespace", "compile ProviderChannels and RoutingPolicies only from this namespace (repeatable; default all namespaces)")
	fs.StringVar(&opts.ProxyService, "proxy-service", controller.DefaultProxyService,
		"the proxies' admin Service, whose EndpointSlices list the replicas to poll (not the client Service, which carries no admin port); empty disables in-cluster discovery")
	fs.StringVar(&opts.AdminPortName, "proxy-admin-port-name", controller.DefaultAdminPortName, "name of the admin API port of --proxy-service")
	fs.Var(&adminURLs, "proxy-admin-url", "admin API root of a proxy replica outside the cluster, e.g. http://10.0.0.5:9090 (repeatable)")
	fs.DurationVar(&opts.PollInterval, "poll-interval", controller.DefaultPollInterval, "how often to poll the proxies' admin API")
	fs.DurationVar(&opts.PollTimeout, "poll-timeout", 0, "how long one replica's answers may take in a poll, from when its turn comes (default: the poll interval, at most 5s)")
	fs.IntVar(&opts.PollConcurrency, "poll-concurrency", controller.DefaultPollConcurrency, "how many proxy replicas are polled at once")
	fs.DurationVar(&opts.CompileDelay, "compile-delay", controller.DefaultCompileDelay,
		"how long the first change of a burst (a kubectl apply of many objects) waits for the rest before the table is compiled and published once (0 or less: the default)")
	fs.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one controller replica is active")
	fs.StringVar(&leaderElectionID, "leader-election-id", "switchyard-controller.switchyard.io", "name of the leader election Lease")
	fs.StringVar(&leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default the proxy namespace)")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint; 0 disables it")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 disables them")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard controller [flags]")
		fmt.Fprintln(stderr, "\nThe Kubernetes controller: it watches ProviderChannels, RoutingPolicies, GatewayClients and")
		fmt.Fprintln(stderr, "their Secrets, compiles them into the routing ConfigMap and credentials Secret the proxies read")
		fmt.Fprintln(stderr, "(switchyard proxy --configmap), polls the proxies' admin API and writes what they saw into the")
		fmt.Fprintln(stderr, "objects' status (phases, conditions, events). It runs in the cluster (config/default, the Helm")
		fmt.Fprintln(stderr, "chart) or against any kubeconfig ($KUBECONFIG); --proxy-namespace or $POD_NAMESPACE is required.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
	setMemoryLimit(os.Getenv)
	if opts.ProxyNamespace == "" {
		return fmt.Errorf("--proxy-namespace is required (or set $POD_NAMESPACE)")
	}
	opts.AdminURLs, opts.WatchNamespaces = adminURLs, watchNS
	if opts.ProxyService == "" && len(opts.AdminURLs) == 0 {
		return fmt.Errorf("nothing to poll: set --proxy-service or --proxy-admin-url")
	}
	if h, err := os.Hostname(); err == nil {
		opts.ReportingInstance = h
	}
	if leaderElectionNS == "" {
		leaderElectionNS = opts.ProxyNamespace
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load a kubeconfig: %w", err)
	}
	renew := 10 * time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(opts),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: leaderElectionNS,
		RenewDeadline:           &renew,
		// The Lease is released on shutdown so a new leader takes over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := controller.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("Starting the controller", "version", version.String(), "proxyNamespace", opts.ProxyNamespace,
		"configMap", opts.ConfigMapName, "proxyService", opts.ProxyService, "adminURLs", opts.AdminURLs)
	return mgr.Start(ctx)
}

// setMemoryLimit sets the Go runtime's soft memory limit to 80% of the container's
// ($SWITCHYARD_MEMORY_LIMIT, in bytes, which the chart and manifests fill from limits.memory),
// unless $GOMEMLIMIT says otherwise: the poller's views of hundreds of replicas are most of the
// heap, and without a soft limit the heap grows to twice them before a collection.
func setMemoryLimit(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return -1
	}
	limit, err := strconv.ParseInt(getenv("SWITCHYARD_MEMORY_LIMIT"), 10, 64)
	if err != nil || limit <= 0 {
		return -1
	}
	soft := limit / 10 * 8
	debug.SetMemoryLimit(soft)
	return soft
}
