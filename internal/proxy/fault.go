package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// activeFault returns the channel's drill when it applies to this attempt: not expired, the
// request marked when the drill wants only marked traffic, and within the drill's share.
func (s *Server) activeFault(a *attempt) *routing.FaultInjection {
	f := a.channel.Fault
	if f == nil || a.probe {
		return nil
	}
	if f.Until != nil && !s.clock.Now().Before(*f.Until) {
		return nil
	}
	if f.OnlyMarked && !a.drill {
		return nil
	}
	if rand.IntN(100) >= f.Percent {
		return nil
	}
	return f
}

// injectFault plays the drill. done reports that the attempt ends here with r.
func (s *Server) injectFault(ctx context.Context, f *routing.FaultInjection) (r result, done bool) {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return transportFailure(ctx, ctx.Err(), "in an injected delay"), true
		}
	}
	if f.Hang {
		<-ctx.Done()
		return transportFailure(ctx, ctx.Err(), "in an injected hang"), true
	}
	if f.AbortStatus == 0 {
		return result{}, false
	}
	r = result{status: f.AbortStatus, outcome: health.OutcomeFromStatus(f.AbortStatus),
		detail: fmt.Sprintf("HTTP %d injected by faultInjection", f.AbortStatus)}
	if f.AbortStatus < 500 && f.AbortStatus != http.StatusTooManyRequests {
		r.body = []byte(fmt.Sprintf(`{"error":{"message":"fault injected by Switchyard drill","type":"invalid_request_error","param":null,"code":"fault_injected_%d"}}`, f.AbortStatus))
	}
	return r, true
}
