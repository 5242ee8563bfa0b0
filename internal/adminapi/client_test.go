package adminapi

import "testing"

// TestCursorSurvivesARestart: after a replica restarts (a new BootID, events numbered from 1
// again) the cursor reads its journal from the start instead of skipping up to the old sequence.
func TestCursorSurvivesARestart(t *testing.T) {
	var c Cursor
	if got := c.Since("boot-1"); got != 0 {
		t.Fatalf("first read from %d", got)
	}
	evs, restarted := c.Next(&EventsResponse{BootID: "boot-1", Events: []Event{{Seq: 1}, {Seq: 2}, {Seq: 3}}})
	if len(evs) != 3 || restarted || c.Since("boot-1") != 3 {
		t.Fatalf("first boot: %d events, restarted %v, since %d", len(evs), restarted, c.Since("boot-1"))
	}
	if evs, _ := c.Next(&EventsResponse{BootID: "boot-1", Events: []Event{{Seq: 3}, {Seq: 4}}}); len(evs) != 1 || evs[0].Seq != 4 {
		t.Fatalf("an event read twice came back: %+v", evs)
	}
	if got := c.Since("boot-2"); got != 0 {
		t.Fatalf("after a restart, read from %d, want 0", got)
	}
	evs, restarted = c.Next(&EventsResponse{BootID: "boot-2", Events: []Event{{Seq: 1}, {Seq: 2}}})
	if len(evs) != 2 || !restarted || c.BootID() != "boot-2" || c.Since("boot-2") != 2 {
		t.Fatalf("new boot: %d events, restarted %v, boot %s, since %d; want both events", len(evs), restarted, c.BootID(), c.Since("boot-2"))
	}
}
