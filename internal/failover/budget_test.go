package failover

import (
	"testing"
	"time"
)

func TestRetryBudget(t *testing.T) {
	b := NewBudget()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// A quiet service can always fail over: the floor allows a few retries per second.
	allowed := 0
	for i := 0; i < 100; i++ {
		if b.AllowRetry(now, 20) {
			allowed++
		}
	}
	if allowed != BudgetFloorPerSecond*BudgetBuckets {
		t.Errorf("floor: %d retries allowed with no traffic, want %d", allowed, BudgetFloorPerSecond*BudgetBuckets)
	}
	// Under load the budget is a share of requests: 20% of 1000 requests in the window.
	b = NewBudget()
	for s := 0; s < 10; s++ {
		for i := 0; i < 100; i++ {
			b.Request(now.Add(time.Duration(s) * time.Second))
		}
	}
	at := now.Add(9 * time.Second)
	allowed = 0
	for i := 0; i < 1000; i++ {
		if b.AllowRetry(at, 20) {
			allowed++
		}
	}
	if allowed != 200 {
		t.Errorf("storm guard: %d retries allowed, want 200 (20%% of 1000)", allowed)
	}
	// The window slides: ten seconds later the old requests and retries are forgotten.
	if !b.AllowRetry(at.Add(11*time.Second), 20) {
		t.Error("budget did not recover once the window moved on")
	}
}
