// Package adminapi holds the JSON documents the proxy serves on its admin port and the controller
// reads: /admin/v1/channels (live state per channel×model and the config's load state) and
// /admin/v1/events (the health journal). One definition, so the two sides cannot drift.
package adminapi

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Paths served on the proxy's admin port.
const (
	ChannelsPath = "/admin/v1/channels"
	EventsPath   = "/admin/v1/events"
	// ConfigPath serves the ConfigState alone, with an ETag (see ConfigHandler).
	ConfigPath = "/admin/v1/config"
)

// ChannelsResponse is GET /admin/v1/channels.
type ChannelsResponse struct {
	// Replica identifies the proxy process (pod name or hostname).
	Replica string `json:"replica"`
	// BootID changes on every proxy start; event sequence numbers restart with it.
	BootID string `json:"bootID"`
	// Now is the replica's clock when it answered.
	Now time.Time `json:"now"`
	// Config is the served config's load state; absent from a delta (read ConfigPath).
	Config   ConfigState    `json:"config,omitzero"`
	Channels []ChannelState `json:"channels"`
	// Cursor is this answer's point in the replica's numbering of changes: GET
	// ChannelsPath?since=CURSOR answers with what changed after it.
	Cursor string `json:"cursor,omitempty"`
	// Delta is true when Channels holds only the channel×models that changed after the cursor
	// asked for, and Removed those gone since; false for the full view (the first call, an
	// unknown cursor: a restarted replica, or one older than the removals it remembers).
	Delta   bool         `json:"delta,omitempty"`
	Removed []ChannelKey `json:"removed,omitempty"`
	// ClientAuth says whether the proxy requires a GatewayClient key, and why.
	ClientAuth *ClientAuthState `json:"clientAuth,omitempty"`
	// Clients are the GatewayClients' use of this replica today (UTC), one entry per client
	// that has sent a request since the replica started or the day began.
	Clients []ClientUsage `json:"clients,omitempty"`
	// Rollouts are the served policies with a spec.rollout and their cohorts' figures on this
	// replica since it started.
	Rollouts []RolloutState `json:"rollouts,omitempty"`
	// Fleet is the replica's link to the fleet store; nil when it runs without one (no --fleet-redis).
	Fleet *FleetLink `json:"fleet,omitempty"`
}

// FleetLink is a replica's link to the fleet store (--fleet-redis) that its replicas share
// evidence and verdicts through.
type FleetLink struct {
	// Name is the fleet's key prefix (--fleet-name).
	Name string `json:"name"`
	// Connected is false while the replica runs on its local evidence alone (the store is slow,
	// down or unreachable); it rejoins by itself.
	Connected bool `json:"connected"`
	// Since is when Connected last changed.
	Since *time.Time `json:"since,omitempty"`
	// Reason says why the replica is in local mode (the last store error); empty when connected.
	Reason string `json:"reason,omitempty"`
	// Replicas is the number of replicas seen in the store in the last sync window.
	Replicas int `json:"replicas"`
}

// RolloutState is one policy being rolled out (spec.rollout) on one replica. Its counts start
// again whenever the policy's rollout changes (another percent or mode).
type RolloutState struct {
	// Name is the policy's namespace/name.
	Name    string `json:"name"`
	Percent int    `json:"percent"`
	DryRun  bool   `json:"dryRun,omitempty"`
	// Policy counts the requests routed with the policy's failover and ejection; Listed those
	// that followed the listed channels in order.
	Policy CohortCounts `json:"policy"`
	Listed CohortCounts `json:"listed"`
}

// CohortCounts are sums since the replica started, so that replicas add up: the success rate
// is Successes/Requests and the mean latency LatencyNanos/Requests. Requests the client canceled
// and 4xx answers (the caller's) are not counted.
type CohortCounts struct {
	Requests     int64 `json:"requests"`
	Successes    int64 `json:"successes"`
	LatencyNanos int64 `json:"latencyNanos"`
}

// ClientAuthState is the proxy's client authentication mode.
type ClientAuthState struct {
	// Required: a request without a known client key is refused (401). False: the proxy serves
	// anyone who reaches it (standalone with no GatewayClient).
	Required bool `json:"required"`
	// Clients is the number of GatewayClients in the served config.
	Clients int `json:"clients"`
	// Reason says why the proxy is open or closed, in words.
	Reason string `json:"reason"`
}

// ClientUsage is one GatewayClient's use of one replica on one UTC day.
type ClientUsage struct {
	// Client is namespace/name.
	Client string `json:"client"`
	// Day is the UTC date the counts are for (2006-01-02).
	Day      string     `json:"day"`
	Requests int64      `json:"requests"`
	Tokens   int64      `json:"tokens"`
	LastUsed *time.Time `json:"lastUsed,omitempty"`
}

// ConfigState says which routing table the proxy serves and whether the last load failed.
type ConfigState struct {
	// Source is the file, directory or ConfigMap the table came from.
	Source string `json:"source"`
	// Hash of the table being served (routing.Table.Hash); empty before the first good load.
	Hash     string    `json:"hash,omitempty"`
	LoadedAt time.Time `json:"loadedAt,omitempty"`
	// Error is the last load's failure, while the previous good table keeps serving; empty when
	// the last load succeeded.
	Error    string            `json:"error,omitempty"`
	ErrorAt  *time.Time        `json:"errorAt,omitempty"`
	Problems []routing.Problem `json:"problems,omitempty"`
	// Generations maps each object of the served table (routing.ObjectKey: kind/namespace/name)
	// to the metadata.generation it was compiled from: the controller's Programmed condition
	// compares it with the object's.
	Generations map[string]int64 `json:"generations,omitempty"`
}

// ChannelKey names one channel×model.
type ChannelKey struct {
	Channel string `json:"channel"`
	Model   string `json:"model"`
}

// ChannelState is the live health of one channel×model on one replica.
type ChannelState struct {
	// DryRun is the would-be state of a channel×model of a DryRun policy (nil otherwise): the
	// phase and score its rules would have set, and the transition that led there.
	DryRun *DryRunState `json:"dryRun,omitempty"`

	Channel          string      `json:"channel"`
	Model            string      `json:"model"`
	Provider         string      `json:"provider"`
	Phase            string      `json:"phase"`
	HealthScore      int         `json:"healthScore"`
	TrafficPercent   int         `json:"trafficPercent"`
	WindowRequests   int         `json:"windowRequests"`
	WindowFailures   int         `json:"windowFailures"`
	ErrorRatePercent float64     `json:"errorRatePercent"`
	P95LatencyMillis int64       `json:"p95LatencyMillis"`
	Ejections        int         `json:"ejections"`
	CooldownUntil    *time.Time  `json:"cooldownUntil,omitempty"`
	RetryAfterUntil  *time.Time  `json:"retryAfterUntil,omitempty"`
	Panic            bool        `json:"panic,omitempty"`
	LastTransition   *Transition `json:"lastTransition,omitempty"`
	// Fleet is the fleet's judgement of this channel×model when the replica shares evidence
	// through a fleet store; nil when it judges alone.
	Fleet *FleetKeyState `json:"fleet,omitempty"`
}

// FleetKeyState is the fleet store's view of one channel×model.
type FleetKeyState struct {
	// Phase is the fleet verdict every replica adopts (e.g. "Ejected"), or the phase most of the
	// fleet's replicas report when no verdict is held.
	Phase string `json:"phase"`
	// VerdictBy is the replica that set the verdict held in the store; empty when none is held.
	VerdictBy string `json:"verdictBy,omitempty"`
	// Replicas counts the replicas reporting each phase in the last sync window.
	Replicas map[string]int `json:"replicas,omitempty"`
}

// Transition is the last phase change of a channel×model.
type Transition struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// EventsResponse is GET /admin/v1/events?since=SEQ: journal entries with Seq > since, newest last.
type EventsResponse struct {
	Replica string  `json:"replica"`
	BootID  string  `json:"bootID"`
	Events  []Event `json:"events"`
}

// Event is one journal entry: a phase transition with the rule or actor that caused it.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Channel string    `json:"channel"`
	Model   string    `json:"model"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// Actor is "rule", "probe" or "operator".
	Actor string `json:"actor"`
}

// DryRunState is what a DryRun policy's rules would have made of one channel×model.
type DryRunState struct {
	Phase          string      `json:"phase"`
	HealthScore    int         `json:"healthScore"`
	WindowRequests int         `json:"windowRequests"`
	WindowFailures int         `json:"windowFailures"`
	LastTransition *Transition `json:"lastTransition,omitempty"`
}
