package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/streamconn"
)

// RabbitMQServerEnv names the environment variable that points at the
// rabbitmq-server start script. Defaults to Debian's
// /usr/lib/rabbitmq/bin/rabbitmq-server, else rabbitmq-server on PATH.
const RabbitMQServerEnv = "PGOUTBOX_TEST_RABBITMQ_SERVER"

// RabbitMQ is a running rabbitmq-server node with the stream plugin, on
// free loopback ports, with its own node name, Erlang port mapper, cookie
// and data in a temporary directory: it shares nothing with a system
// RabbitMQ.
type RabbitMQ struct {
	// StreamURI is the stream protocol's address
	// ("rabbitmq-stream://guest:guest@127.0.0.1:port/").
	StreamURI string
	// AMQPURI is the AMQP 0-9-1 address ("amqp://guest:guest@127.0.0.1:port/").
	AMQPURI string
	// Dir holds the configuration, the node's data and its logs.
	Dir string
	// TLSStreamURI is the stream protocol's TLS address
	// ("rabbitmq-stream+tls://guest:guest@127.0.0.1:port/") of a node
	// started by NewRabbitMQTLS, which requires a client certificate of
	// PKI; empty otherwise.
	TLSStreamURI string
	// PKI is the CA, the server's and the client's certificates of a node
	// started by NewRabbitMQTLS; nil otherwise.
	PKI *PKI

	node                           string
	amqpPort, streamPort, distPort int
	epmdPort, tlsPort, mgmtPort    int
	epmd, cmd                      *exec.Cmd
	epmdDone, done                 chan struct{}
	once                           sync.Once
}

// RabbitMQInstalled reports the rabbitmq-server start script, or an error
// saying how to install it.
func RabbitMQInstalled() (string, error) {
	if p := os.Getenv(RabbitMQServerEnv); p != "" {
		return p, nil
	}
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err == nil {
		return "/usr/lib/rabbitmq/bin/rabbitmq-server", nil
	}
	if p, err := exec.LookPath("rabbitmq-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("rabbitmq-server is not installed (Debian: apt-get install rabbitmq-server; or set %s)", RabbitMQServerEnv)
}

// StartRabbitMQ starts a rabbitmq-server node with the rabbitmq_stream
// plugin enabled and returns once its stream port accepts a client. Stop
// kills it and removes Dir; on error nothing is left behind.
func StartRabbitMQ(ctx context.Context) (*RabbitMQ, error) {
	return startRabbitMQTries(ctx, nil)
}

// NewRabbitMQTLS starts a node of t's own (stopped when t ends) that also
// listens for the stream protocol over TLS (TLSStreamURI), with a server
// certificate of a throwaway CA (PKI), and requires a client certificate
// of that CA there. A test that finds rabbitmq-server missing is skipped.
func NewRabbitMQTLS(t testing.TB) *RabbitMQ {
	t.Helper()
	if _, err := RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	r, err := startRabbitMQTries(t.Context(), NewPKI(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// startRabbitMQTries starts a node, over TLS too when pki is set, trying
// fresh ports up to three times.
func startRabbitMQTries(ctx context.Context, pki *PKI) (*RabbitMQ, error) {
	script, err := RabbitMQInstalled()
	if err != nil {
		return nil, err
	}
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: epmd not found on PATH (Debian: erlang-base): %w", err)
	}
	var last error
	for range 3 {
		r, err := startRabbitMQ(ctx, script, epmd, pki)
		if err == nil {
			return r, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		// A port taken between FreePorts and the node's bind: fresh ports.
	}
	return nil, fmt.Errorf("rabbitmq: %w", last)
}

func startRabbitMQ(ctx context.Context, script, epmd string, pki *PKI) (*RabbitMQ, error) {
	dir, err := os.MkdirTemp("", "pgoutbox-rabbitmq-")
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(6)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r := &RabbitMQ{Dir: dir, node: fmt.Sprintf("pgoutbox%d@localhost", ports[0]),
		amqpPort: ports[0], streamPort: ports[1], distPort: ports[2], epmdPort: ports[3], mgmtPort: ports[5], PKI: pki}
	r.StreamURI = fmt.Sprintf("rabbitmq-stream://guest:guest@127.0.0.1:%d/", r.streamPort)
	r.AMQPURI = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.amqpPort)
	if pki != nil {
		r.tlsPort = ports[4]
		r.TLSStreamURI = fmt.Sprintf("rabbitmq-stream+tls://guest:guest@127.0.0.1:%d/", r.tlsPort)
	}
	if err := r.start(ctx, script, epmd); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// start writes the configuration, starts a private epmd and the node, and
// waits for the stream port.
func (r *RabbitMQ) start(ctx context.Context, script, epmd string) error {
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%[1]d
stream.listeners.tcp.1 = 127.0.0.1:%[2]d
stream.advertised_host = 127.0.0.1
stream.advertised_port = %[2]d
log.console = false
log.file.level = warning
management.tcp.ip = 127.0.0.1
management.tcp.port = %[3]d
`, r.amqpPort, r.streamPort, r.mgmtPort)
	if r.PKI != nil {
		// The guest user may connect from the loopback interface only,
		// which the TLS listener is on too.
		conf += fmt.Sprintf(`stream.listeners.ssl.1 = 127.0.0.1:%d
ssl_options.cacertfile = %s
ssl_options.certfile = %s
ssl_options.keyfile = %s
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
`, r.tlsPort, r.PKI.CAFile, r.PKI.ServerCertFile, r.PKI.ServerKeyFile)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "rabbitmq.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(r.Dir, "rabbitmq.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the children hold their own descriptors
	// A port mapper of our own, in the foreground: killed with the node,
	// where the one Erlang starts by itself daemonises and outlives it.
	r.epmd = exec.Command(epmd, "-port", fmt.Sprint(r.epmdPort))
	r.epmd.Stdout, r.epmd.Stderr = out, out
	r.epmd.SysProcAttr = kafkaProcAttr()
	if err := r.epmd.Start(); err != nil {
		return fmt.Errorf("start epmd: %w", err)
	}
	r.epmdDone = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.epmd, r.epmdDone)
	if err := waitPort(ctx, r.epmdPort, r.epmdDone, 10*time.Second); err != nil {
		return fmt.Errorf("epmd: %w", err)
	}
	plugins := filepath.Join(r.Dir, "enabled_plugins")
	if _, err := os.Stat(plugins); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(plugins, []byte("[rabbitmq_stream].\n"), 0o644); err != nil {
			return err
		}
	}
	r.cmd = exec.Command(script)
	r.cmd.Env = r.CommandEnv()
	r.cmd.Stdout, r.cmd.Stderr = out, out
	r.cmd.SysProcAttr = kafkaProcAttr()
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.cmd.Path, err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	if err := r.waitStreamClient(ctx, 120*time.Second); err != nil {
		return fmt.Errorf("node %s: %w%s", r.node, err, r.logTail())
	}
	return nil
}

// waitStreamClient waits until a stream client completes its handshake
// with the node (peer properties, authentication, open). An open port is
// not enough: the node accepts connections on it before it answers them
// (a client's first request then timed out under load), and a killed
// node's socket can accept for moments after the kill returned.
func (r *RabbitMQ) waitStreamClient(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if err := waitPort(ctx, r.streamPort, r.done, timeout); err != nil {
			return err
		}
		env, err := stream.NewEnvironment(streamconn.Options(r.StreamURI))
		if err == nil {
			_ = env.Close()
			return nil
		}
		last = err
		select {
		case <-r.done:
			return errors.New("exited before serving stream clients")
		case <-ctx.Done():
			return fmt.Errorf("no stream client connected: %w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CommandEnv is the environment under which the node runs, and under
// which RabbitMQ's command line tools (rabbitmqctl, rabbitmq-plugins,
// from /usr/lib/rabbitmq/bin: the /usr/sbin wrappers switch to the
// rabbitmq user) and rabbitmqadmin reach it: its node name, Erlang port
// mapper and cookie (HOME is Dir), its files, and a rabbitmqadmin.conf
// in HOME naming its management port (once the rabbitmq_management
// plugin is enabled) and the guest user. The node starts with the
// plugins of Dir/enabled_plugins (rabbitmq_stream at first), which
// rabbitmq-plugins edits.
func (r *RabbitMQ) CommandEnv() []string {
	admin := fmt.Sprintf("[default]\nhostname = 127.0.0.1\nport = %d\nusername = guest\npassword = guest\n", r.mgmtPort)
	_ = os.WriteFile(filepath.Join(r.Dir, ".rabbitmqadmin.conf"), []byte(admin), 0o600)
	return append(os.Environ(),
		"HOME="+r.Dir, // the Erlang cookie goes here, not in root's home
		fmt.Sprintf("ERL_EPMD_PORT=%d", r.epmdPort),
		"RABBITMQ_NODENAME="+r.node,
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", r.distPort),
		"RABBITMQ_BASE="+r.Dir,
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.Dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.Dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.Dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.Dir, "enabled_plugins"),
		"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(r.Dir, "plugins"),
		"PATH=/usr/lib/rabbitmq/bin"+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
}

// waitPort waits until 127.0.0.1:port accepts a connection, the process
// behind done exits, or timeout passes.
func waitPort(ctx context.Context, port int, done <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return fmt.Errorf("%s not listening: %w", addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail is the end of the node's output and log, for an error.
func (r *RabbitMQ) logTail() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(r.Dir, "log", "*.log"))
	for _, name := range append([]string{filepath.Join(r.Dir, "rabbitmq.out")}, logs...) {
		data, _ := os.ReadFile(name)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		if len(bytes.TrimSpace(data)) > 0 {
			fmt.Fprintf(&b, "\n%s:\n%s", filepath.Base(name), bytes.TrimSpace(data))
		}
	}
	return b.String()
}

// kill ends the node and its port mapper (their process groups) and
// waits for them.
func (r *RabbitMQ) kill() {
	for _, p := range []struct {
		cmd  *exec.Cmd
		done chan struct{}
	}{{r.cmd, r.done}, {r.epmd, r.epmdDone}} {
		if p.cmd != nil && p.cmd.Process != nil && p.done != nil {
			killGroup(p.cmd.Process, p.done)
			<-p.done
		}
	}
	// The Erlang VM, the script's child in its group, can outlive the
	// script for moments, its ports still open: a node started now
	// could not bind them, and a check of the port would find the old
	// node's. Wait until the stream port refuses.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.streamPort), time.Second)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart kills the node (SIGKILL: a crash, not an orderly stop) and
// starts it again on the same ports over the same data directory, as a
// broker restart mid-stream does.
func (r *RabbitMQ) Restart(ctx context.Context) error {
	script, err := RabbitMQInstalled()
	if err != nil {
		return err
	}
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		return err
	}
	r.kill()
	return r.start(ctx, script, epmd)
}

// Pause stops the node's processes (SIGSTOP): its connections stay open
// and take nothing, as a node blocked by a resource alarm or stalled does.
// Resume lets it go on.
func (r *RabbitMQ) Pause() error { return pauseGroup(r.cmd.Process, true) }

// Resume lets a paused node go on (SIGCONT).
func (r *RabbitMQ) Resume() error { return pauseGroup(r.cmd.Process, false) }

// StopStart stops the broker in an orderly way and starts it again
// (rabbitmqctl stop_app, then start_app: the Erlang node stays up, the
// broker closes every connection with the protocol's close), and returns
// once its stream port accepts a client again.
func (r *RabbitMQ) StopStart(ctx context.Context) error {
	if err := r.StopApp(ctx); err != nil {
		return err
	}
	return r.StartApp(ctx)
}

// StopApp stops the broker in an orderly way (rabbitmqctl stop_app): it
// closes every connection with the protocol's close, and its ports refuse
// connections until StartApp. The Erlang node stays up.
func (r *RabbitMQ) StopApp(ctx context.Context) error { return r.ctl(ctx, "stop_app") }

// StartApp starts a broker StopApp stopped and returns once its stream
// port accepts a client again.
func (r *RabbitMQ) StartApp(ctx context.Context) error {
	if err := r.ctl(ctx, "start_app"); err != nil {
		return err
	}
	return r.waitStreamClient(ctx, 120*time.Second)
}

// ctl runs rabbitmqctl args against the node.
func (r *RabbitMQ) ctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "/usr/lib/rabbitmq/bin/rabbitmqctl", args...)
	cmd.Env = r.CommandEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Stop kills the node, waits for it and removes Dir. It is idempotent.
// The data is thrown away, so there is no orderly shutdown to wait for.
func (r *RabbitMQ) Stop() {
	r.once.Do(func() {
		r.kill()
		_ = os.RemoveAll(r.Dir)
	})
}

var (
	rabbitOnce sync.Once
	rabbit     *RabbitMQ
	rabbitErr  error
)

// SharedRabbitMQ returns the RabbitMQ node of this test binary, starting it
// on first use (seconds); Main stops it. A test that needs it and finds
// rabbitmq-server missing is skipped with a message saying how to install
// it; any other failure to start fails the test.
func SharedRabbitMQ(t testing.TB) *RabbitMQ {
	t.Helper()
	if _, err := RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	rabbitOnce.Do(func() {
		rabbit, rabbitErr = StartRabbitMQ(context.Background())
	})
	if rabbitErr != nil {
		t.Fatalf("%v", rabbitErr)
	}
	return rabbit
}

// stopRabbitMQ stops the shared node, if one was started.
func stopRabbitMQ() {
	if rabbit != nil {
		rabbit.Stop()
	}
}

// Environment connects an independent stream client to the node for t,
// closed when t ends.
func (r *RabbitMQ) Environment(t testing.TB) *stream.Environment {
	t.Helper()
	env, err := stream.NewEnvironment(streamconn.Options(r.StreamURI))
	if err != nil {
		t.Fatalf("rabbitmq: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// DeclareStream declares the stream name on env afresh: a stream of that
// name that an earlier run of the test left on the shared node (go test
// -count=N runs each test again in the same binary) is deleted first, so
// a test whose stream names are fixed reads only its own records.
func DeclareStream(t testing.TB, env *stream.Environment, name string) {
	t.Helper()
	if err := env.DeleteStream(name); err != nil && !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("rabbitmq: delete stream %s: %v", name, err)
	}
	if err := env.DeclareStream(name, &stream.StreamOptions{}); err != nil {
		t.Fatalf("rabbitmq: declare stream %s: %v", name, err)
	}
}

// sentinelPrefix begins the body of every ReadStream sentinel.
const sentinelPrefix = "pgoutbox-testenv-sentinel-"

// sentinelSeq numbers ReadStream's sentinels.
var sentinelSeq atomic.Int64

// ReadStream reads stream name from its start with an independent client,
// up to a sentinel message it appends first, so that every message
// written before the call is read (and no other). Each call's sentinel is
// its own, and the sentinels of earlier calls are skipped, so a stream
// can be read again and again.
func (r *RabbitMQ) ReadStream(t testing.TB, name string) []*amqp.Message {
	t.Helper()
	env := r.Environment(t)
	pr, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatalf("rabbitmq: %v", err)
	}
	mine := []byte(fmt.Sprintf("%s%d-%d", sentinelPrefix, os.Getpid(), sentinelSeq.Add(1)))
	sentinel := amqp.NewMessage(mine)
	err = pr.BatchSend([]message.StreamMessage{sentinel})
	_ = pr.Close()
	if err != nil {
		t.Fatalf("rabbitmq: %v", err)
	}
	var (
		mu   sync.Mutex
		got  []*amqp.Message
		done = make(chan struct{})
	)
	c, err := env.NewConsumer(name, func(_ stream.ConsumerContext, m *amqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-done:
			return
		default:
		}
		switch data := bytes.Join(m.Data, nil); {
		case bytes.Equal(data, mine):
			close(done)
			return
		case bytes.HasPrefix(data, []byte(sentinelPrefix)):
			return // an earlier call's
		}
		got = append(got, m)
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("rabbitmq: %v", err)
	}
	defer c.Close()
	// A long stream takes a while on a loaded machine: give up only after
	// 30s without a message.
	for read, since := 0, time.Now(); ; {
		select {
		case <-done:
		case <-time.After(time.Second):
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n > read {
				read, since = n, time.Now()
			} else if time.Since(since) > 30*time.Second {
				t.Fatalf("rabbitmq: no sentinel in %s after %d messages and 30s without another", name, n)
			}
			continue
		}
		break
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}
