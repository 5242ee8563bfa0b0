package proxy

import (
	"sync"
	"time"
)

// retryBudget stops failover storms: over the last budgetWindow, retries may be at most
// budgetPercent of requests, but never fewer than budgetFloorPerSecond per second, so a quiet
// service can always fail over once.
type retryBudget struct {
	mu      sync.Mutex
	buckets [budgetBuckets]budgetBucket
}

type budgetBucket struct {
	sec               int64
	requests, retries int
}

const (
	budgetBuckets        = 10 // one-second buckets: a 10 s memory
	budgetFloorPerSecond = 3
)

func newRetryBudget() *retryBudget { return &retryBudget{} }

func (b *retryBudget) bucket(now time.Time) *budgetBucket {
	sec := now.Unix()
	bk := &b.buckets[sec%budgetBuckets]
	if bk.sec != sec {
		*bk = budgetBucket{sec: sec}
	}
	return bk
}

// request counts one client request.
func (b *retryBudget) request(now time.Time) {
	b.mu.Lock()
	b.bucket(now).requests++
	b.mu.Unlock()
}

// allowRetry reports whether one more retry fits the budget, and counts it when it does.
func (b *retryBudget) allowRetry(now time.Time, percent int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var requests, retries int
	oldest := now.Unix() - budgetBuckets + 1
	for _, bk := range b.buckets {
		if bk.sec >= oldest {
			requests += bk.requests
			retries += bk.retries
		}
	}
	limit := max(requests*percent/100, budgetFloorPerSecond*budgetBuckets)
	if retries >= limit {
		return false
	}
	b.bucket(now).retries++
	return true
}
