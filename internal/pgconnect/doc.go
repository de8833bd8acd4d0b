// Package pgconnect is the relay's Postgres connection layer, at the bottom
// of the engine: the connections (Connect, ConnectReplication) and the
// liveness clock that guards them (Live): when its
// walsender last gave a sign of life, whether the relay leads or waits as a
// standby, and the bound past which it must not publish; and the Postgres
// connections it guards (TCP_USER_TIMEOUT at the bound).
//
// # Liveness
//
// A relay publishes only while it knows its walsender is alive, so that a
// relay frozen past wal_sender_timeout (SIGSTOP, a VM pause, a long GC),
// whose slot the server has meanwhile handed to a standby, writes nothing
// when it resumes, and a half-open connection (a blackholing NAT or load
// balancer: no error, no FIN) is noticed in seconds, not after the
// kernel's ~15 minutes of retransmission.
//
// At session start the relay reads wal_sender_timeout on its replication
// connection (so a per-connection setting counts) and the server's clock.
// The liveness bound is wal_sender_timeout/2 (30s with the default 60s;
// 30s when the timeout is 0), and status updates go out at least every
// bound/3, each asking the server to reply. A sign of life is a server
// message, dated by the server's clock (corrected by the offset measured
// at session start, never later than its receipt); while the relay has
// been alive without a break of more than bound/2, receiving any message
// counts (a reader draining a backlog reads old data from a live
// connection), and so does its own status update while the reader waits
// for Kafka. With no sign of life for longer than the bound:
//
//   - the reader ends the session and reconnects (a "no sign of life"
//     warning; pgoutbox_relay_reconnects_total counts it);
//   - Ready (/readyz) is false and seconds_since_server_message is above
//     the bound;
//   - no byte is written to Kafka: the sink checks before each write and
//     the Kafka connections before each socket write; data read after a
//     freeze (from the socket buffer) is not queued.
//
// Why this is enough: the server gives the slot away only after hearing
// nothing for wal_sender_timeout. A live relay's last status update is at
// most bound/3 before its last sign of life, so it stops writing by
// bound + bound/3 = 2/3 of wal_sender_timeout after its last update; the
// remaining third is the margin for clock-offset error (half a round trip
// at session start, plus drift), scheduling and network delay. Clocks need
// not agree: the offset is measured, and the relay's own timing uses the
// monotonic clock, so only a step of either wall clock during a session
// matters, and only for server-dated signs after a break (they look
// fresher or older by the step; older only costs a reconnect).
//
// The window that remains: a freeze that begins after the socket write of
// a Kafka request started (the kernel sends what it was handed even while
// the process is stopped, so such a write lands before the new leader's);
// a relay whose walsender was ended some other way (pg_terminate_backend)
// while it drains a backlog without a break, until it reads the end of the
// stream (TCP_USER_TIMEOUT, set to the bound on the replication socket,
// and the new leader's own start-up time bound it); and a relay whose
// reader waits on a slow Kafka behind a middlebox that acknowledges but
// drops its status updates. Exactly-once mode (relay run --exactly-once)
// fences Kafka writes outright: a new leader's InitProducerID fences the
// old one's transactional producer (see internal/sink).
// Config.InstanceID adds a relay-instance header to every record, so you
// can check which process wrote what.
package pgconnect
