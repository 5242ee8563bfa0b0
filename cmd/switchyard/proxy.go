package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/fleet"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/version"
)

func init() {
	commands["proxy"] = command{"run the gateway (standalone from manifest files, or from the controller's ConfigMap)", runProxy}
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configPath   = fs.String("config", "", "standalone: a YAML file or directory of ProviderChannel, RoutingPolicy, GatewayClient and Secret manifests (reloaded on change and on SIGHUP)")
		configMap    = fs.String("configmap", "", "in cluster: NAMESPACE/NAME of the ConfigMap the controller writes (credentials come from the Secret NAME-credentials)")
		credSecret   = fs.String("credentials-secret", "", "with --configmap: the Secret holding provider keys (default NAME-credentials, the controller's default)")
		kubeconfig   = fs.String("kubeconfig", "", "kubeconfig for --configmap outside a cluster (default: in-cluster, then $KUBECONFIG)")
		listen       = fs.String("listen", "", "address of the OpenAI-compatible API (default 127.0.0.1:8080 standalone, :8080 with --configmap); on an address other than loopback the proxy requires client keys unless --allow-anonymous is given")
		allowAnon    = fs.Bool("allow-anonymous", false, "serve requests without a client key on an address other than loopback; without it the proxy refuses to start there with no GatewayClient and no --require-client-key, and never falls back to serving openly when its GatewayClients go (the chart sets it when proxy.requireClientKey is false)")
		adminListen  = fs.String("admin-listen", "", "address of the admin port: /healthz, /readyz, /metrics, /admin/v1/... (unauthenticated; default 127.0.0.1:9090 standalone, :9090 with --configmap, where the controller and Prometheus reach it)")
		accessLog    = fs.String("access-log", "", "write one JSON line per upstream attempt to this file, or - for stdout (replay reads it)")
		maxBody      = fs.Int64("max-body-bytes", proxy.DefaultMaxBodyBytes, "largest accepted request body (raise it for large images sent inline)")
		maxBuffered  = fs.Int64("max-buffered-body-bytes", proxy.DefaultMaxBufferedBodyBytes, "request body bytes held in memory across all requests; beyond it requests get 503 with Retry-After")
		maxInFlight  = fs.Int("max-in-flight", proxy.DefaultMaxInFlight, "API requests served at once; beyond it requests get 503 with Retry-After")
		bodyTimeout  = fs.Duration("body-read-timeout", proxy.DefaultBodyReadTimeout, "longest time a client may take to send its request body (408 after it)")
		writeTimeout = fs.Duration("client-write-timeout", proxy.DefaultClientWriteTimeout, "longest a write to a client may block (a client that stops reading loses its request)")
		reqIDHeader  = fs.String("request-id-header", "", "trust this request header (set by a front proxy) for the request id; by default every id is made by the proxy")
		drain        = fs.Duration("drain-timeout", 25*time.Second, "on SIGTERM, how long in-flight requests may take to finish")
		reloadEvery  = fs.Duration("reload-interval", time.Second, "standalone: how often to poll the config files' size, mtime and inode for changes (file events usually trigger a reload sooner)")
		tick         = fs.Duration("tick", proxy.DefaultTick, "how often time-driven health transitions and probes run")
		logLevel     = fs.String("log-level", "info", "debug, info, warn or error")
		requireKey   = fs.Bool("require-client-key", false, "refuse every request without a GatewayClient key (401), even while no GatewayClient is configured; without it the proxy requires keys once a GatewayClient exists and serves openly before (the cluster install sets it)")
		auditLog     = fs.String("audit-log", "", "write one chained JSON line per client request to this file (rotated by size), or - for stdout; verify with 'switchyard audit verify'")
		auditMax     = fs.Int64("audit-log-max-bytes", 100<<20, "rotate the audit log when it would grow past this size (to PATH.1, PATH.2, ...)")
		auditKeep    = fs.Int("audit-log-keep", 5, "rotated audit log files kept")
		auditReq     = auditRequiredFlag{}
		fleetRedis   = fs.String("fleet-redis", "", "share health evidence, verdicts and client usage with the other replicas through this Redis or Valkey (6+, single node): redis://[user@]host:port/db or rediss:// (TLS); the password from the URL or $"+fleet.PasswordEnv+"; absent: every replica judges alone")
		fleetSync    = fs.Duration("fleet-sync-interval", fleet.DefaultSyncInterval, "with --fleet-redis: how often this replica exchanges evidence and verdicts (one round trip)")
		fleetName    = fs.String("fleet-name", "", "with --fleet-redis: the fleet's key prefix, so several gateways may share one Redis (default: the namespace and name of the proxy Deployment in a cluster, \"standalone\" otherwise)")
		replicaName  = fs.String("replica", "", "this replica's name on the admin API and in the fleet store (default $POD_NAME, then the hostname)")
		authFailures = fs.Float64("auth-failures-per-second", clients.DefaultAuthFailuresPerSecond, "failed client keys a source address (IPv4, IPv6 /64) may send a second after a burst of 20; beyond it 429 too_many_auth_failures (negative: no throttle)")
	)
	fs.Var(&auditReq, "audit-required", "with --audit-log: refuse requests (503 audit_unavailable) and fail /readyz while the audit log cannot be written (default: true while client keys are required, by --require-client-key or GatewayClients in the config)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard proxy (--config PATH | --configmap NAMESPACE/NAME) [flags]")
		fmt.Fprintln(stderr, "\nProvider keys in standalone mode come from the Secret manifests in PATH; the environment variable")
		fmt.Fprintln(stderr, "SWITCHYARD_KEY_<CHANNEL> (upper-case, non-alphanumerics as _) overrides a channel's key.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*configPath == "") == (*configMap == "") {
		fs.Usage()
		return errors.New("exactly one of --config or --configmap is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	var logW io.Writer
	switch *accessLog {
	case "":
	case "-":
		logW = stdout
	default:
		f, err := os.OpenFile(*accessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		defer f.Close()
		logW = f
	}
	var auditW *audit.Log
	if *auditLog != "" {
		var err error
		auditW, err = audit.Open(audit.Options{Path: *auditLog, MaxBytes: *auditMax, Keep: *auditKeep, Stdout: stdout,
			Logger: logger, OnError: func(err error) { logger.Error("Failed to write the audit log", "error", err.Error()) }})
		if err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		defer auditW.Close() // after the drain: the last requests' lines are written
	}
	replica := *replicaName
	if replica == "" {
		replica = os.Getenv("POD_NAME")
	}
	if replica == "" {
		replica, _ = os.Hostname()
	}
	fleetOpts, err := fleetOptions(*fleetRedis, *fleetName, replica, *fleetSync, *configMap != "")
	if err != nil {
		return err
	}
	if fleetOpts != nil {
		defer fleetOpts.Store.(io.Closer).Close()
		logger.Info("Sharing health with the fleet", "fleet", fleetOpts.Name, "store", fleetOpts.Endpoint, "replica", replica, "syncInterval", fleetSync.String())
	}
	if *adminListen == "" {
		*adminListen = defaultAdminListen(*configMap != "")
	}
	if *listen == "" {
		*listen = defaultListen(*configMap != "")
	}
	// Exposed: reachable from other machines and not told to serve anyone. Keys are then
	// required whatever the config says, so that a reload removing the last GatewayClient
	// refuses every request (401) instead of opening the gateway.
	exposed := !loopbackAddr(*listen) && !*allowAnon
	srv := proxy.New(proxy.Options{MaxBodyBytes: *maxBody, MaxBufferedBodyBytes: *maxBuffered, MaxInFlight: *maxInFlight,
		BodyReadTimeout: *bodyTimeout, ClientWriteTimeout: *writeTimeout, RequestIDHeader: *reqIDHeader,
		AccessLog: logW, Logger: logger, Replica: replica, RequireClientKey: *requireKey || exposed, Audit: auditW, AuditRequired: auditReq.requirement(),
		AuthFailuresPerSecond: *authFailures, Fleet: fleetOpts.proxyOptions()})
	logger.Info("Starting switchyard proxy", "version", version.String(), "listen", *listen, "adminListen", *adminListen)

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	if *configPath != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reload := make(chan struct{}, 1)
		go func() {
			for range hup {
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}()
		src := &source.FileSource{Path: *configPath, Interval: *reloadEvery, Reload: reload}
		if err := src.Start(ctx, srv); err != nil { // returns on SIGTERM even if a read hangs
			return fmt.Errorf("the config at %s does not load: %w", *configPath, err)
		}
		go src.Watch(bg, srv)
	} else {
		ns, name, ok := strings.Cut(*configMap, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--configmap must be NAMESPACE/NAME, got %q", *configMap)
		}
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = *kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return fmt.Errorf("failed to load Kubernetes client config: %w", err)
		}
		src := &source.ConfigMapSource{Config: cfg, Namespace: ns, Name: name, SecretName: *credSecret}
		if err := src.Run(bg, srv); err != nil {
			return err
		}
	}
	if exposed && !*requireKey && srv.GatewayClients() == 0 {
		return fmt.Errorf("refusing to serve without client keys on %s, an address other than loopback: configure a GatewayClient or pass --require-client-key, "+
			"pass --allow-anonymous to serve anyone who reaches it, or listen on loopback (the default, 127.0.0.1:8080)", *listen)
	}
	// Before listening: a replica started during an outage adopts the fleet's verdicts first
	// (bounded; without the store it serves on local evidence and keeps trying).
	if err := srv.JoinFleet(ctx); err != nil {
		logger.Warn("Serving on local evidence until the fleet store answers", "error", err.Error())
	}
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", *adminListen)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("--admin-listen: %w", err)
	}
	return proxy.Serve(ctx, srv, proxy.ServeOptions{API: apiLn, Admin: adminLn, Drain: *drain, Tick: *tick})
}

// fleetConfig is the proxy's fleet store and the redacted endpoint to log.
type fleetConfig struct {
	proxy.FleetOptions
	Endpoint string
}

func (f *fleetConfig) proxyOptions() *proxy.FleetOptions {
	if f == nil {
		return nil
	}
	return &f.FleetOptions
}

// fleetOptions turns the --fleet-* flags into the proxy's fleet store; nil without --fleet-redis.
func fleetOptions(raw, name, replica string, interval time.Duration, inCluster bool) (*fleetConfig, error) {
	if raw == "" {
		return nil, nil
	}
	ep, err := fleet.ParseURL(raw, os.Getenv(fleet.PasswordEnv))
	if err != nil {
		return nil, err
	}
	if interval < 100*time.Millisecond || interval > time.Minute {
		return nil, fmt.Errorf("--fleet-sync-interval must be between 100ms and 1m, got %s", interval)
	}
	if name == "" {
		name = defaultFleetName(inCluster, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"))
	}
	if !validFleetName(name) {
		return nil, fmt.Errorf("--fleet-name %q: use letters, digits and . _ - / (at most 128)", name)
	}
	st := fleet.NewStore(ep, proxy.FleetStoreSettings(name, replica, interval))
	return &fleetConfig{FleetOptions: proxy.FleetOptions{Store: st, Name: name, Interval: interval}, Endpoint: ep.String()}, nil
}

// defaultFleetName is NAMESPACE/DEPLOYMENT in a cluster, read off the pod's name (a Deployment's
// pods are DEPLOYMENT-RSHASH-PODHASH), and "standalone" otherwise or when the name has no such shape.
func defaultFleetName(inCluster bool, namespace, pod string) string {
	if !inCluster || namespace == "" || pod == "" {
		return "standalone"
	}
	parts := strings.Split(pod, "-")
	if len(parts) < 3 {
		return "standalone"
	}
	return namespace + "/" + strings.Join(parts[:len(parts)-2], "-")
}

func validFleetName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == '/':
		default:
			return false
		}
	}
	return true
}

// defaultListen is the API's address when --listen is not given: standalone, this machine only
// (a newcomer's gateway, most likely without client keys, is not offered to the network); in a
// cluster every interface, where the Service sends clients.
func defaultListen(inCluster bool) string {
	if inCluster {
		return ":8080"
	}
	return "127.0.0.1:8080"
}

// loopbackAddr reports whether a listen address (host:port) accepts connections from this
// machine only: localhost or a loopback IP. An empty host, an unspecified IP, any other name (it
// may resolve to anything) or an address that does not parse count as reachable from elsewhere.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// defaultAdminListen is the admin port's address when --admin-listen is not given. The admin API
// has no authentication: standalone it stays on this machine unless asked; in a cluster the
// controller and Prometheus must reach it (the NetworkPolicy limits who may).
func defaultAdminListen(inCluster bool) string {
	if inCluster {
		return ":9090"
	}
	return "127.0.0.1:9090"
}

// auditRequiredFlag is --audit-required: unset, the proxy's default (required while client keys
// are); set, always or never.
type auditRequiredFlag struct{ set, value bool }

func (f *auditRequiredFlag) String() string {
	if !f.set {
		return "while client keys are required"
	}
	return strconv.FormatBool(f.value)
}

func (f *auditRequiredFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("must be true or false")
	}
	f.set, f.value = true, b
	return nil
}

func (f *auditRequiredFlag) IsBoolFlag() bool { return true }

func (f *auditRequiredFlag) requirement() proxy.AuditRequirement {
	switch {
	case !f.set:
		return proxy.AuditRequiredWithKeys
	case f.value:
		return proxy.AuditRequiredAlways
	default:
		return proxy.AuditRequiredNever
	}
}
