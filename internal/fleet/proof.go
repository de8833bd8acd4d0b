package fleet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// minSecret is the shortest fleet secret accepted, in bytes.
const minSecret = 16

// Domains of the two proofs, so that one can never stand for the other.
const (
	proofMember     = "pgoutbox fleet member"
	proofAssignment = "pgoutbox fleet assignment"
)

// errUnproven is a spread assignment without a valid proof: the group's
// leader does not hold the fleet secret.
var errUnproven = errors.New("spread: the group leader's assignment carries no proof of the fleet secret: refused, this replica leads nothing (is a client that is not a relay of this fleet in the group? see docs/security.md)")

// provingBalancer is the spread group's balancer when the fleet has a
// secret (spread: secret-file:). It is the cooperative sticky balancer
// with two proofs, each an HMAC-SHA256 keyed by the secret:
//
//   - every member appends one over its join metadata (and the group),
//     and a leader balances only the members whose proof holds: a Kafka
//     client that is not a relay of this fleet is given no source;
//   - the leader appends one over each member's assignment (and the
//     group, the generation and the member's ID), and a member refuses an
//     assignment without it: a foreign client that leads the group cannot
//     hand itself, or anyone, the sources.
//
// A refused assignment ends this member's session (kgo calls it lost) and
// it joins again, so while a foreign client leads, the replicas lead
// nothing and /readyz fails on each.
type provingBalancer struct {
	kgo.GroupBalancer
	key    []byte
	group  string
	logger *slog.Logger
	// cl is the member's client, set once built (ready closes then): its
	// member ID and generation bind an assignment's proof.
	cl    atomic.Pointer[kgo.Client]
	ready chan struct{}
}

// clientWait bounds how long an assignment waits for setClient: the
// group may answer before NewClient returned.
const clientWait = 10 * time.Second

// setClient gives the balancer the member's client.
func (b *provingBalancer) setClient(cl *kgo.Client) {
	b.cl.Store(cl)
	close(b.ready)
}

// newProvingBalancer wraps the cooperative sticky balancer with proofs
// keyed by secret.
func newProvingBalancer(secret, group string, logger *slog.Logger) *provingBalancer {
	return &provingBalancer{GroupBalancer: kgo.CooperativeStickyBalancer(), key: []byte(secret), group: group, logger: logger, ready: make(chan struct{})}
}

// mac is the proof of payload in domain, for this group, generation and
// member (the member's proof binds neither: a member does not know them
// for certain when it joins).
func (b *provingBalancer) mac(domain string, generation int32, member string, payload []byte) []byte {
	h := hmac.New(sha256.New, b.key)
	for _, s := range []string{domain, b.group, member} {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		h.Write([]byte(s))
	}
	_ = binary.Write(h, binary.BigEndian, generation)
	_ = binary.Write(h, binary.BigEndian, uint32(len(payload)))
	h.Write(payload)
	return h.Sum(nil)
}

// open returns what signed holds before its proof, if the proof holds.
func (b *provingBalancer) open(domain string, generation int32, member string, signed []byte) ([]byte, bool) {
	if len(signed) < sha256.Size {
		return nil, false
	}
	payload, proof := signed[:len(signed)-sha256.Size], signed[len(signed)-sha256.Size:]
	return payload, hmac.Equal(proof, b.mac(domain, generation, member, payload))
}

// signAssignment appends to a member's assignment the generation it is
// for and the leader's proof.
func (b *provingBalancer) signAssignment(generation int32, member string, assignment []byte) []byte {
	out := binary.BigEndian.AppendUint32(slices.Clip(assignment), uint32(generation))
	return append(out, b.mac(proofAssignment, generation, member, assignment)...)
}

// openAssignment returns a member's assignment without its generation and
// proof, and the generation, if the proof holds.
func (b *provingBalancer) openAssignment(member string, signed []byte) ([]byte, int32, bool) {
	if len(signed) < 4+sha256.Size {
		return nil, 0, false
	}
	withGen, proof := signed[:len(signed)-sha256.Size], signed[len(signed)-sha256.Size:]
	payload, generation := withGen[:len(withGen)-4], int32(binary.BigEndian.Uint32(withGen[len(withGen)-4:]))
	return payload, generation, hmac.Equal(proof, b.mac(proofAssignment, generation, member, payload))
}

// JoinGroupMetadata is the cooperative sticky balancer's metadata followed
// by this member's proof.
func (b *provingBalancer) JoinGroupMetadata(topics []string, current map[string][]int32, generation int32) []byte {
	meta := b.GroupBalancer.JoinGroupMetadata(topics, current, generation)
	return slices.Concat(meta, b.mac(proofMember, 0, "", meta))
}

// MemberBalancer balances the members whose proof holds; the others are
// logged and given nothing.
func (b *provingBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	proven := make([]kmsg.JoinGroupResponseMember, 0, len(members))
	var refused []string
	for _, m := range members {
		meta, ok := b.open(proofMember, 0, "", m.ProtocolMetadata)
		if !ok {
			b.logger.Warn("spread: a member of the group without proof of the fleet secret is given no source (a Kafka client that is not a relay of this fleet; see docs/security.md)",
				"member_id", m.MemberID)
			refused = append(refused, m.MemberID)
			continue
		}
		m.ProtocolMetadata = meta
		proven = append(proven, m)
	}
	inner, topics, err := b.GroupBalancer.MemberBalancer(proven)
	if err != nil {
		return nil, nil, err
	}
	return &provenMembers{inner: inner, b: b, refused: refused}, topics, nil
}

// ParseSyncAssignment refuses an assignment whose proof does not hold for
// this member and generation; an empty one (nothing assigned) needs none.
func (b *provingBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	if len(assignment) == 0 {
		return b.GroupBalancer.ParseSyncAssignment(assignment)
	}
	select {
	case <-b.ready:
	case <-time.After(clientWait):
	}
	var member string
	var generation int32
	if cl := b.cl.Load(); cl != nil {
		member, generation = cl.GroupMetadata()
	}
	plain, signedFor, ok := b.openAssignment(member, assignment)
	if !ok || signedFor != generation {
		return nil, errUnproven
	}
	return b.GroupBalancer.ParseSyncAssignment(plain)
}

// provenMembers balances the proven members and signs each assignment.
type provenMembers struct {
	inner      kgo.GroupMemberBalancer
	b          *provingBalancer
	generation int32
	// refused are the members without proof: each is assigned nothing,
	// in a well-formed assignment, so that it does not rejoin at once.
	refused []string
}

// SetBalanceInfo learns the generation being balanced into, and passes
// the information on.
func (p *provenMembers) SetBalanceInfo(info kgo.BalanceInfo) {
	p.generation = info.Generation
	if ib, ok := p.inner.(kgo.GroupMemberBalancerInfo); ok {
		ib.SetBalanceInfo(info)
	}
}

// Balance balances as the cooperative sticky balancer does.
func (p *provenMembers) Balance(topics map[string]int32) kgo.IntoSyncAssignment {
	return signedPlan{p.inner.Balance(topics), p}
}

// BalanceOrError balances as the cooperative sticky balancer does.
func (p *provenMembers) BalanceOrError(topics map[string]int32) (kgo.IntoSyncAssignment, error) {
	be, ok := p.inner.(kgo.GroupMemberBalancerOrError)
	if !ok {
		return p.Balance(topics), nil
	}
	into, err := be.BalanceOrError(topics)
	if err != nil {
		return nil, err
	}
	return signedPlan{into, p}, nil
}

// signedPlan is a balance plan whose assignments carry the leader's proof.
type signedPlan struct {
	into kgo.IntoSyncAssignment
	p    *provenMembers
}

// IntoSyncAssignment appends to each member's assignment its proof.
func (s signedPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := s.into.IntoSyncAssignment()
	for i, a := range out {
		out[i].MemberAssignment = s.p.b.signAssignment(s.p.generation, a.MemberID, a.MemberAssignment)
	}
	nothing := kmsg.NewConsumerMemberAssignment()
	for _, id := range s.p.refused {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, nothing.AppendTo(nil)
		out = append(out, a)
	}
	return out
}
