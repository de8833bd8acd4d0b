package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// envAsBroker, when set (to a partition count), makes a relaybench process
// the Kafka broker of the latency mode (see runAsBroker).
const envAsBroker = "RELAYBENCH_AS_BROKER"

// runAsBroker runs a kfake broker with topic seeded with the partitions of
// its environment when this process was started as the broker: it prints
// the broker's addresses on a line of stdout and serves until stdin ends.
// It reports whether it was the broker; code is its exit code.
func runAsBroker() (code int, ok bool) {
	v := os.Getenv(envAsBroker)
	if v == "" {
		return 0, false
	}
	partitions, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %s=%q: %v\n", envAsBroker, v, err)
		return 1, true
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: kfake: %v\n", err)
		return 1, true
	}
	defer cluster.Close()
	fmt.Println(strings.Join(cluster.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0, true
}

// broker is a kfake broker in a process of its own (this binary, started
// as the broker): in the latency mode, the broker then competes with the
// writer and the consumer for the machine's cores, as a real one would,
// not for this process's Go scheduler and garbage collector.
type broker struct {
	*child
	addrs []string
}

// startBroker starts the broker process with topic of partitions.
func startBroker(partitions int) (*broker, error) {
	c, err := startChild(envAsBroker + "=" + strconv.Itoa(partitions))
	if err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(c.stdout).ReadString('\n')
	if err != nil {
		c.stdin.Close()
		_ = c.cmd.Wait()
		return nil, fmt.Errorf("broker process: %w", err)
	}
	return &broker{child: c, addrs: strings.Split(strings.TrimSpace(line), ",")}, nil
}

// stop ends the broker process.
func (b *broker) stop() {
	b.stdin.Close()
	_ = b.cmd.Wait()
}

// child is this binary started in a role of the latency mode (broker,
// consumer): it serves until its stdin ends.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
}

// startChild starts this binary with env ("KEY=value") added to its
// environment, and not as the profiled relay.
func startChild(env string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env, envAsRelay+"=")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin, stdout: stdout}, nil
}

// envAsNATS, when set, makes a relaybench process the nats-server of the
// latency mode (see runAsNATS).
const envAsNATS = "RELAYBENCH_AS_NATS"

// runAsNATS runs an embedded nats-server (testenv's: JetStream on disk,
// sync_interval: always) when this process was started as it: it prints
// the client URL on a line of stdout and serves until stdin ends. It
// reports whether it was the server; code is its exit code.
func runAsNATS() (code int, ok bool) {
	if os.Getenv(envAsNATS) == "" {
		return 0, false
	}
	n, err := testenv.StartNATS()
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %v\n", err)
		return 1, true
	}
	defer n.Stop()
	fmt.Println(n.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0, true
}

// startNATSChild starts the nats-server process of the latency mode.
func startNATSChild() (*natsBroker, error) {
	c, err := startChild(envAsNATS + "=1")
	if err != nil {
		return nil, err
	}
	stop := func() {
		c.stdin.Close()
		_ = c.cmd.Wait()
	}
	line, err := bufio.NewReader(c.stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("nats-server process: %w", err)
	}
	return newNATSBroker(strings.TrimSpace(line), c.cmd.Process.Pid, stop)
}
