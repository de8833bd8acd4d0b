package inbox

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// PanicError is the error of a handler that panicked. The inbox recovers the
// panic, logs it with its stack and counts it as a failed attempt, like a
// returned error; Process, ProcessTx and ProcessExternal never propagate it.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error returns "handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// recovered turns a panic of a handler into a *PanicError in *err and logs it.
// Use as: defer in.recovered(msg, &err).
func (in *core) recovered(msg *Message, err *error) {
	v := recover()
	if v == nil {
		return
	}
	perr := &PanicError{Value: v, Stack: debug.Stack()}
	in.log.Error("inbox: handler panicked", "message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey),
		"panic", fmt.Sprint(v), "stack", string(perr.Stack))
	*err = perr
}

// runTx runs a transactional handler with the driver's transaction behind
// tx, recovering a panic.
func (in *Inbox[TTx]) runTx(ctx context.Context, msg *Message, tx dbdriver.Tx, handler TxHandler[TTx]) (ref string, err error) {
	defer in.recovered(msg, &err)
	t, err := in.driver.h.Unwrap(ctx, tx)
	if err != nil {
		return "", err
	}
	return handler(ctx, t, *msg)
}

// runExternal runs an external handler, recovering a panic.
func (in *core) runExternal(ctx context.Context, msg *Message, key string, handler ExternalHandler) (ref string, err error) {
	defer in.recovered(msg, &err)
	return handler(ctx, *msg, key)
}
