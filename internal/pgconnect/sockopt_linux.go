package pgconnect

import (
	"net"
	"syscall"
	"time"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c (unwrapping TLS) when it is a
// TCP connection: the kernel then drops the connection once data it sent
// stays unacknowledged for d, instead of retransmitting for about 15
// minutes.
func setUserTimeout(c net.Conn, d time.Duration) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) { setUserTimeoutFD(fd, d) })
}

// tcpUserTimeout is TCP_USER_TIMEOUT of linux/tcp.h (the same on every
// architecture; package syscall does not define it).
const tcpUserTimeout = 0x12

func setUserTimeoutFD(fd uintptr, d time.Duration) {
	// Best effort: a failure leaves the kernel's default.
	_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
}

// dialControl is the net.Dialer Control of the replication connection: it
// sets TCP_USER_TIMEOUT to d on TCP sockets before they connect.
func dialControl(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return nil
		}
		return c.Control(func(fd uintptr) { setUserTimeoutFD(fd, d) })
	}
}
