package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaModeEnv names the environment variable that picks the broker of the
// tests written for any broker (those that call NewBroker) when KafkaEnv is
// unset: "kfake" (the default) or "kafka", a real Apache Kafka node that
// the test binary starts once (StartApacheKafka) and shares.
const KafkaModeEnv = "PGOUTBOX_TEST_KAFKA"

// KafkaCacheEnv names the environment variable that overrides where the
// Apache Kafka jars are kept between runs. Defaults to
// $XDG_CACHE_HOME/pgoutbox (or ~/.cache/pgoutbox).
const KafkaCacheEnv = "PGOUTBOX_TEST_KAFKA_CACHE"

// RealKafka reports whether NewBroker gives tests a real broker (KafkaEnv,
// or KafkaModeEnv=kafka) rather than kfake.
func RealKafka() bool {
	return os.Getenv(KafkaEnv) != "" || os.Getenv(KafkaModeEnv) == "kafka"
}

// ApacheKafka is a running single-node Apache Kafka (KRaft, broker and
// controller in one JVM) on free loopback ports, with its data in a
// temporary directory.
type ApacheKafka struct {
	// Brokers is the bootstrap address ("127.0.0.1:port").
	Brokers []string
	// Dir holds server.properties, the log directory and kafka.log.
	Dir string

	cmd  *exec.Cmd
	done chan struct{} // closed when the JVM exited
	err  error         // the JVM's exit, once done is closed
	once sync.Once

	mu       sync.Mutex
	stopping bool // Stop was called: the JVM's end is expected
}

// StartApacheKafka fetches the Apache Kafka pinned in test/kafka/pom.xml
// into the cache (once; Maven is needed only then), formats a KRaft log
// directory and starts the broker, returning once it answers metadata.
// Stop ends it and removes its directory; on error nothing is left behind.
func StartApacheKafka(ctx context.Context) (*ApacheKafka, error) {
	return StartApacheKafkaWith(ctx, ApacheKafkaOptions{})
}

// StartApacheKafkaWith is StartApacheKafka with opts.
func StartApacheKafkaWith(ctx context.Context, opts ApacheKafkaOptions) (*ApacheKafka, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("apache kafka: java not found on PATH: install a JDK 17 or newer (Debian: default-jdk-headless), or run the tests on kfake (%s=kfake)", KafkaModeEnv)
	}
	libs, err := kafkaLibs(ctx)
	if err != nil {
		return nil, fmt.Errorf("apache kafka: %w", err)
	}
	dir, err := os.MkdirTemp("", "pgoutbox-kafka-")
	if err != nil {
		return nil, err
	}
	k := &ApacheKafka{Dir: dir, done: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		err = k.start(ctx, java, libs, opts)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
		// A port taken between freePort and the JVM's bind: a fresh directory and ports.
		k.Stop()
		if dir, err = os.MkdirTemp("", "pgoutbox-kafka-"); err != nil {
			return nil, err
		}
		k = &ApacheKafka{Dir: dir, done: make(chan struct{})}
	}
	if err != nil {
		k.Stop()
		return nil, fmt.Errorf("apache kafka: %w", err)
	}
	return k, nil
}

// start formats k.Dir and runs the broker in it.
func (k *ApacheKafka) start(ctx context.Context, java, libs string, opts ApacheKafkaOptions) error {
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	props := filepath.Join(k.Dir, "server.properties")
	conf := serverProperties(ports[0], ports[1], filepath.Join(k.Dir, "data"))
	if opts.Listener != nil {
		conf = opts.Listener.properties(conf)
	}
	if err := os.WriteFile(props, []byte(conf), 0o644); err != nil {
		return err
	}
	logConf := filepath.Join(k.Dir, "log4j2.properties")
	if err := os.WriteFile(logConf, []byte(log4jProperties(filepath.Join(k.Dir, "kafka.log"))), 0o644); err != nil {
		return err
	}
	jvm := jvmArgs(libs, logConf)
	format := exec.CommandContext(ctx, java, append(jvm, "kafka.tools.StorageTool", "format",
		"--cluster-id", clusterID(), "--config", props, "--ignore-formatted")...)
	format.SysProcAttr = kafkaProcAttr()
	if out, err := format.CombinedOutput(); err != nil {
		return fmt.Errorf("format log directory: %v: %s", err, bytes.TrimSpace(out))
	}
	if err := k.run(java, jvm, props); err != nil {
		return err
	}
	if err := k.waitReady(ctx, addr); err != nil {
		return err
	}
	k.Brokers = []string{addr}
	return nil
}

// jvmArgs are the JVM's arguments before the main class: a small heap,
// the log configuration logConf and the jars in libs.
func jvmArgs(libs, logConf string) []string {
	cp := filepath.Join(libs, "*") // the java launcher expands it
	return []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
		"-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + logConf, "-cp", cp}
}

// run starts the broker's JVM on the formatted directory k.Dir, its output
// appended to kafka.out; k.done closes when it exits.
func (k *ApacheKafka) run(java string, jvm []string, props string) error {
	out, err := os.OpenFile(filepath.Join(k.Dir, "kafka.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child holds its own descriptor
	k.cmd = exec.Command(java, append(jvm, "kafka.Kafka", props)...)
	k.cmd.Stdout, k.cmd.Stderr = out, out
	k.cmd.SysProcAttr = kafkaProcAttr()
	if err := k.cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	done := k.done
	go func() {
		k.err = k.cmd.Wait()
		close(done)
	}()
	return nil
}

// waitReady waits until the broker at addr lists itself in metadata and
// coordinates consumer groups. A fresh broker creates __consumer_offsets at
// the first group request and answers COORDINATOR_NOT_AVAILABLE until it
// has (seconds; kfake coordinates at once): waiting here keeps that out of
// the first test's timings and offset checks (docs/kafka.md).
func (k *ApacheKafka) waitReady(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		select {
		case <-k.done:
			return fmt.Errorf("broker exited: %v%s", k.err, k.logTail())
		default:
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := adm.BrokerMetadata(rctx)
		if err == nil && (len(m.Brokers) == 0 || m.Controller < 0) {
			err = errors.New("no broker or controller in metadata yet")
		}
		if err == nil {
			err = adm.FindGroupCoordinators(rctx, "pgoutbox-testenv-ready").Error()
		}
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no metadata from %s: %v (last: %v)%s", addr, ctx.Err(), err, k.logTail())
		case <-k.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FreePorts returns n distinct loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are picked, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail is the end of the broker's output and log, for an error.
func (k *ApacheKafka) logTail() string {
	var b strings.Builder
	for _, name := range []string{"kafka.out", "kafka.log"} {
		data, _ := os.ReadFile(filepath.Join(k.Dir, name))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		if len(bytes.TrimSpace(data)) > 0 {
			fmt.Fprintf(&b, "\n%s:\n%s", name, bytes.TrimSpace(data))
		}
	}
	return b.String()
}

// Stop kills the broker's process group, waits for it and removes Dir. It
// is idempotent. The data is thrown away, so there is no orderly shutdown
// to wait for.
func (k *ApacheKafka) Stop() {
	k.once.Do(func() {
		k.mu.Lock()
		k.stopping = true
		k.mu.Unlock()
		if k.cmd != nil && k.cmd.Process != nil {
			killGroup(k.cmd.Process, k.done)
			<-k.done
		}
		_ = os.RemoveAll(k.Dir)
	})
}

// serverProperties is the configuration of a one-node test cluster:
// replication factor 1 for the internal topics, auto-created topics with
// DefaultPartitions partitions like kfake's, sessions as short as the
// inbox tests give kfake (GroupMinSessionTimeout), few threads.
func serverProperties(port, controllerPort int, data string) string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
auto.create.topics.enable=true
num.partitions=%[4]d
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=100
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
background.threads=2
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=4194304
log.segment.bytes=16777216
log.flush.interval.messages=9223372036854775807
`, port, controllerPort, data, DefaultPartitions)
}

// log4jProperties sends the broker's log, warnings and up, to file.
func log4jProperties(file string) string {
	return fmt.Sprintf(`appender.file.type=File
appender.file.name=file
appender.file.fileName=%s
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%%d] %%p %%m (%%c)%%n
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
`, file)
}

// clusterID is a fresh KRaft cluster ID: 16 random bytes, base64url.
func clusterID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// kafkaLibs returns the directory holding the jars of the pinned Kafka
// (test/kafka/pom.xml), fetching them first if need be (mavenLibs).
func kafkaLibs(ctx context.Context) (string, error) {
	return mavenLibs(ctx, "kafka", "kafka.version")
}

// mavenLibs returns the directory holding the runtime jars of
// test/<name>/pom.xml, whose version property versionProp names the
// version pinned there, fetching them with Maven into the cache first if
// they are not there. Concurrent test binaries take a file lock, so one
// fetches and the others wait.
func mavenLibs(ctx context.Context, name, versionProp string) (string, error) {
	return mavenLibsOf(ctx, name, versionProp, "")
}

// mavenLibsOf is mavenLibs for a pom that pins several versions: with
// selectProp set, Maven runs with -D<selectProp>=<the version versionProp
// pins>, so the dependencies name that one (test/postgres/pom.xml).
// cacheBase is where what the tests fetch or make once is kept between
// runs: KafkaCacheEnv, else $XDG_CACHE_HOME/pgoutbox (or ~/.cache/pgoutbox).
func cacheBase() (string, error) {
	if cache := os.Getenv(KafkaCacheEnv); cache != "" {
		return cache, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set %s): %w", KafkaCacheEnv, err)
	}
	return filepath.Join(base, "pgoutbox"), nil
}

func mavenLibsOf(ctx context.Context, name, versionProp, selectProp string) (string, error) {
	pom, err := modulePOM(name)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(pom)
	if err != nil {
		return "", err
	}
	version := "unknown"
	if m := regexp.MustCompile(`<` + regexp.QuoteMeta(versionProp) + `>([^<]+)</`).FindSubmatch(data); m != nil {
		version = string(m[1])
	}
	sum := sha256.Sum256(data)
	cache, err := cacheBase()
	if err != nil {
		return "", err
	}
	// The pom's hash in the name: any change to the pins fetches anew.
	dir := filepath.Join(cache, fmt.Sprintf("%s-%s-%s", name, version, hex.EncodeToString(sum[:4])))
	libs := filepath.Join(dir, "libs")
	complete := filepath.Join(dir, "complete")
	return libs, makeOnce(dir, complete, func() error {
		mvn, err := exec.LookPath("mvn")
		if err != nil {
			instead := fmt.Sprintf("run the tests on kfake (%s=kfake)", KafkaModeEnv)
			if selectProp != "" {
				instead = "run the tests on the default version"
			}
			return fmt.Errorf("%s %s is not in %s yet and mvn is not on PATH to fetch it: install Maven (Debian: maven), or %s", name, version, dir, instead)
		}
		_ = os.RemoveAll(libs)
		args := []string{"-q", "-B", "-f", pom, "dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory=" + libs}
		if selectProp != "" {
			args = append(args, "-D"+selectProp+"="+version)
		}
		cmd := exec.CommandContext(ctx, mvn, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("fetch %s %s with Maven (%s): %v: %s", name, version, pom, err, bytes.TrimSpace(out))
		}
		return os.WriteFile(complete, []byte(version+"\n"), 0o644)
	})
}

// makeOnce runs build unless the file complete exists, under a file lock in
// dir (created if need be): of test binaries that start together, one
// builds it (fetches, unpacks, writes) and the others wait and find it built.
// build writes complete last.
func makeOnce(dir, complete string, build func() error) error {
	if _, err := os.Stat(complete); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(complete); err == nil {
		return nil // another test binary built it while we waited
	}
	return build()
}

// modulePOM finds test/<name>/pom.xml in the module that holds the working
// directory (tests run in their package's directory).
func modulePOM(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			pom := filepath.Join(dir, "test", name, "pom.xml")
			if _, err := os.Stat(pom); err != nil {
				return "", fmt.Errorf("the pins of %s: %w", name, err)
			}
			return pom, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: cannot find test/%s/pom.xml", name)
		}
		dir = parent
	}
}

var (
	apacheOnce sync.Once
	apache     *ApacheKafka
	apacheErr  error
)

// sharedApacheKafka returns the broker of this test binary, starting it on
// first use; exit stops it.
func sharedApacheKafka() (*ApacheKafka, error) {
	apacheOnce.Do(func() {
		apache, apacheErr = StartApacheKafka(context.Background())
		if apacheErr == nil {
			go apache.reportExit()
		}
	})
	return apache, apacheErr
}

// reportExit prints to stderr why the shared broker's JVM ended, if it
// ends before Stop: every later test of the binary then fails with a
// refused connection, and its log directory goes with the binary's exit.
func (k *ApacheKafka) reportExit() {
	<-k.done
	k.mu.Lock()
	stopping := k.stopping
	k.mu.Unlock()
	if !stopping {
		fmt.Fprintf(os.Stderr, "testenv: the shared Apache Kafka broker (pid %d) exited before the tests ended: %v%s\n", k.PID(), k.err, k.logTail())
	}
}

func stopApacheKafka() {
	if apache != nil {
		apache.Stop()
	}
}

// PID is the broker's process ID (its process group's, too).
func (k *ApacheKafka) PID() int { return k.cmd.Process.Pid }
