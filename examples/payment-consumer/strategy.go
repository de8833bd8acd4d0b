package main

// The --strategy values: how a retry of a charge (after a crash, a lease
// takeover, a timeout or a lost response) avoids charging twice.
const (
	strategyIdempotencyKey = "idempotency-key"
	strategyQueryStatus    = "query-status"
	strategyReserveConfirm = "reserve-confirm"
)

// strategyHelp ends --help: when to use which strategy.
const strategyHelp = `
Strategies (--strategy), in order of preference:

  idempotency-key  The provider deduplicates on an Idempotency-Key header; the
                   consumer sends the event's business key. A retry gets the
                   first charge back. One call per charge, no extra state: use
                   it whenever the provider offers it.
  query-status     The provider has no idempotency key but can say what it
                   did for a reference the caller chose. The consumer saves
                   the reference (inbox.SaveRequestRef) before charging; a
                   retry first asks GET /v1/charges?reference=... and, when
                   the charge is there, completes without charging
                   (inbox.ErrAlreadyDone). Catch: a request still in flight
                   can land after a "not found"; it is safe only when the
                   provider refuses a request after its deadline (not_after
                   here: the consumer waits for it to pass) or when you
                   accept that window. A "not found" costs a wait of up to
                   --payment-api-timeout.
  reserve-confirm  The provider charges in two steps: reserve (returns an ID;
                   unconfirmed reservations expire) and confirm (idempotent
                   per reservation). The consumer saves the reservation ID
                   before confirming; a retry confirms the saved one again.
                   No timing window, but two calls per charge, and a crash
                   between reserve and save holds the customer's funds until
                   the reservation expires.

Without --payment-api-url the fake API started in-process matches the
strategy: with idempotency keys for idempotency-key, without for the others.
`
