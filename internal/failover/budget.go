package failover

import (
	"sync"
	"time"
)

// Budget stops failover storms: over the last BudgetBuckets seconds, retries may be at most a
// policy's budgetPercent of its requests, but never fewer than BudgetFloorPerSecond per second,
// so a quiet service can always fail over once. One Budget is shared by the requests of a policy
// (the proxy keeps it across reloads); it is safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	buckets [BudgetBuckets]budgetBucket
}

type budgetBucket struct {
	sec               int64
	requests, retries int
}

const (
	BudgetBuckets        = 10 // one-second buckets: a 10 s memory
	BudgetFloorPerSecond = 3
)

// NewBudget returns an empty budget.
func NewBudget() *Budget { return &Budget{} }

// bucket returns now's bucket, or nil when now is older than the second that bucket holds
// already: a caller whose clock lags (a request that read the time just before another, replay
// finishing a request late) must not wipe a newer second's counts.
func (b *Budget) bucket(now time.Time) *budgetBucket {
	sec := now.Unix()
	bk := &b.buckets[(sec%BudgetBuckets+BudgetBuckets)%BudgetBuckets]
	switch {
	case bk.sec > sec:
		return nil
	case bk.sec < sec:
		*bk = budgetBucket{sec: sec}
	}
	return bk
}

// Request counts one client request.
func (b *Budget) Request(now time.Time) {
	b.mu.Lock()
	if bk := b.bucket(now); bk != nil {
		bk.requests++
	}
	b.mu.Unlock()
}

// AllowRetry reports whether one more retry fits the budget, and counts it when it does.
func (b *Budget) AllowRetry(now time.Time, percent int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var requests, retries int
	oldest := now.Unix() - BudgetBuckets + 1
	for _, bk := range b.buckets {
		if bk.sec >= oldest {
			requests += bk.requests
			retries += bk.retries
		}
	}
	limit := max(requests*percent/100, BudgetFloorPerSecond*BudgetBuckets)
	if retries >= limit {
		return false
	}
	if bk := b.bucket(now); bk != nil {
		bk.retries++
	}
	return true
}
