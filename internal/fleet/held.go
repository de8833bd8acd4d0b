package fleet

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupClientID is the client ID of a replica's member of the spread
// group: without a fleet secret, a member with another is not counted as
// a relay of the fleet (with one, the member's proof decides).
const groupClientID = "pgoutbox-relay-fleet"

// heldWatch tracks, from the group's description, the sources no relay
// of the fleet holds: a source whose partition another client of the
// group holds (or nobody) is elsewhere on every replica, and streamed by
// none.
type heldWatch struct {
	// sources is how many sources (partitions) the file has.
	sources atomic.Int32
	// every is how often the group is described, grace how long a source
	// may be held by no relay before /readyz fails; 0: half the session
	// timeout, and three session timeouts (a rebalance, or a killed
	// replica's sources moving, takes less).
	every, grace time.Duration

	mu sync.Mutex
	// since maps a partition no relay holds to when that was first seen.
	since map[int32]time.Time
}

// watchHeld describes the group until ctx ends, every m.held.every.
func (m *member) watchHeld(ctx context.Context, admin *kgo.Client) {
	every := m.held.every
	if every == 0 {
		every = m.sp.sessionTimeout / 2
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.describeHeld(ctx, admin, time.Now()); err != nil && ctx.Err() == nil {
			m.logger.Debug("spread: describe group (to find sources no relay holds)", "error", err)
		}
	}
}

// describeHeld describes the group and records which sources no relay of
// the fleet holds since when.
func (m *member) describeHeld(ctx context.Context, admin *kgo.Client, now time.Time) error {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{m.sp.group}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return err
	}
	if len(resp.Groups) != 1 {
		return kerr.UnknownServerError
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return err
	}
	held := map[int32]bool{}
	for _, mem := range g.Members {
		assignment, ok := m.relayAssignment(mem)
		if !ok {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(assignment) != nil {
			continue
		}
		for _, t := range a.Topics {
			if t.Topic == m.sp.topic() {
				for _, p := range t.Partitions {
					held[p] = true
				}
			}
		}
	}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	since := map[int32]time.Time{}
	for p := range m.held.sources.Load() {
		if held[p] {
			continue
		}
		if t, ok := m.held.since[p]; ok {
			since[p] = t
		} else {
			since[p] = now
		}
	}
	m.held.since = since
	return nil
}

// relayAssignment is the assignment of a member that is a relay of the
// fleet (its proof holds, or without a secret its client ID is the
// relays'), without the leader's proof.
func (m *member) relayAssignment(mem kmsg.DescribeGroupsResponseGroupMember) ([]byte, bool) {
	if m.proving == nil {
		return mem.MemberAssignment, mem.ClientID == groupClientID
	}
	if _, ok := m.proving.open(proofMember, 0, "", mem.ProtocolMetadata); !ok {
		return nil, false
	}
	// An assignment without the leader's proof was refused by the member.
	a, _, ok := m.proving.openAssignment(mem.MemberID, mem.MemberAssignment)
	return a, ok
}

// unheld returns the partitions no relay of the fleet has held for longer
// than the grace, at now.
func (m *member) unheld(now time.Time) []int32 {
	grace := m.held.grace
	if grace == 0 {
		grace = 3 * m.sp.sessionTimeout
	}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	var out []int32
	for p, t := range m.held.since {
		if now.Sub(t) > grace {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
