package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ApacheKafkaOptions adjusts the broker StartApacheKafkaWith starts.
type ApacheKafkaOptions struct {
	// Listener, when set, is a second listener for clients that must
	// reach the broker through a middlebox (a fault-injecting proxy): the
	// broker listens on Listener.Port and advertises Listener.Advertised,
	// so a client bootstrapped through the proxy stays behind it for every
	// connection. Brokers stays the direct listener.
	Listener *ProxiedListener
}

// ProxiedListener is a listener whose advertised address is a proxy's.
type ProxiedListener struct {
	// Port is the loopback port the broker listens on.
	Port int
	// Advertised is the address ("127.0.0.1:port") the broker gives
	// clients of this listener in metadata: the proxy's.
	Advertised string
}

// properties adds the listener, named PROXIED, to a server.properties.
func (l *ProxiedListener) properties(conf string) string {
	var out []string
	for _, line := range strings.Split(conf, "\n") {
		switch {
		case strings.HasPrefix(line, "listeners="):
			line += fmt.Sprintf(",PROXIED://127.0.0.1:%d", l.Port)
		case strings.HasPrefix(line, "advertised.listeners="):
			line += ",PROXIED://" + l.Advertised
		case strings.HasPrefix(line, "listener.security.protocol.map="):
			line += ",PROXIED:PLAINTEXT"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// Kill ends the broker as kill -9 does (SIGKILL to its process group) and
// waits for it, keeping Dir: Restart starts it again on the same ports
// and data. Stop still removes everything.
func (k *ApacheKafka) Kill() {
	if k.cmd != nil && k.cmd.Process != nil {
		killGroup(k.cmd.Process, k.done)
		<-k.done
	}
}

// Restart kills the broker if it runs (Kill) and starts it again on its
// data directory and ports, returning once it answers metadata: the
// partitions and the transaction state recover from the log, as after a
// machine crash.
func (k *ApacheKafka) Restart(ctx context.Context) error {
	if len(k.Brokers) == 0 {
		return errors.New("apache kafka: restart needs a broker that started")
	}
	k.Kill()
	java, err := exec.LookPath("java")
	if err != nil {
		return fmt.Errorf("apache kafka: %w", err)
	}
	libs, err := kafkaLibs(ctx)
	if err != nil {
		return fmt.Errorf("apache kafka: %w", err)
	}
	k.done = make(chan struct{})
	jvm := jvmArgs(libs, filepath.Join(k.Dir, "log4j2.properties"))
	if err := k.run(java, jvm, filepath.Join(k.Dir, "server.properties")); err != nil {
		return fmt.Errorf("apache kafka: restart: %w", err)
	}
	if err := k.waitReady(ctx, k.Brokers[0]); err != nil {
		return fmt.Errorf("apache kafka: restart: %w", err)
	}
	return nil
}
