//go:build !linux

package pgconnect

import (
	"net"
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; TCP
// keepalives and the liveness bound still apply.
func setUserTimeout(net.Conn, time.Duration) {}

// dialControl sets nothing where TCP_USER_TIMEOUT does not exist.
func dialControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
