// Command devcluster starts a local Switchyard "cluster" for poking at with kubectl: a real
// kube-apiserver and etcd (the envtest binaries), the controller, a proxy reading its ConfigMap,
// and two mock providers, all on loopback; then it applies sample manifests and waits for Ctrl-C,
// after which it stops everything and removes its files.
//
//	make dev-cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-io/switchyard/internal/devcluster"
)

func main() {
	proxies := flag.Int("proxies", 2, "proxy replicas to run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting kube-apiserver, etcd, the controller, the proxies and two mock providers...")
	c, err := devcluster.Start(ctx, devcluster.Options{Proxies: *proxies})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev-cluster:", err)
		os.Exit(1)
	}
	defer c.Stop()
	out, err := c.Kubectl("apply", "-n", devcluster.Namespace, "-f", c.Manifests)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev-cluster:", err)
		c.DumpLogs(os.Stderr)
		return
	}
	fmt.Print(out)
	fmt.Printf(`
Switchyard is running. In another shell:

  export KUBECONFIG=%s
  kubectl get providerchannels -n %s -w
  kubectl describe pch provider-a -n %s
  kubectl get gwc -n %s
  curl -s http://%s/v1/chat/completions -H 'Authorization: Bearer %s' -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'

  # break provider A, then fix it:
  curl -s http://%s/_mock/behavior -d '{"model":"gpt-4o","behavior":{"mode":"status","status":503}}'
  curl -s http://%s/_mock/behavior -d '{"model":"gpt-4o","behavior":null}'

  # the on-call override:
  kubectl patch pch provider-b -n %s --type merge -p '{"spec":{"disabled":true,"disabledReason":"drill"}}'

Proxy admin API: http://%s/admin/v1/channels   Logs: %s
Press Ctrl-C to stop and clean up.
`, c.Env.Kubeconfig, devcluster.Namespace, devcluster.Namespace, devcluster.Namespace, c.Proxies[0].Addr, devcluster.ClientKey, c.MockA.Addr, c.MockA.Addr,
		devcluster.Namespace, c.Proxies[0].Admin, c.Dir)
	<-ctx.Done()
	fmt.Println("\nStopping...")
}
