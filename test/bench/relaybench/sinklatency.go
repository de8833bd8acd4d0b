package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// kafkaLatencyBroker is the latency mode's kfake broker process, its
// topic seeded with partitions.
type kafkaLatencyBroker struct {
	*broker
	partitions int
}

func (b *kafkaLatencyBroker) describe() string {
	return fmt.Sprintf("kfake in a process of its own (records in memory, nothing on disk), topic %s with %d partitions", topic, b.partitions)
}

func (b *kafkaLatencyBroker) fresh(context.Context) error { return nil }

func (b *kafkaLatencyBroker) relayArgs() []string { return kafkaArgs(b.addrs) }

func (b *kafkaLatencyBroker) pid() int { return b.cmd.Process.Pid }

func (b *kafkaLatencyBroker) consumerSpec() string { return kafkaConsumerSpec(b.addrs, b.partitions) }

// sinksLatency starts, for the latency mode's -sinks, each sink's broker
// in a process of its own, its destination and a consumer process reading
// it from the start, and lists the runs: o.rounds of each sink in the
// order ABC CBA..., each on a slot of its own. The function returned
// stops the consumers and the brokers.
func sinksLatency(ctx context.Context, bin, dbURL string, o *options, record func(seq int, recv, commit time.Time)) ([]latencyRunner, func(), error) {
	var stops []func()
	stopAll := sync.OnceFunc(func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	})
	brokers := map[string]sinkBroker{}
	for _, s := range o.sinkList {
		var (
			b   sinkBroker
			err error
		)
		switch s {
		case sinkKafka:
			var bk *broker
			if bk, err = startBroker(3); err == nil {
				b = &kafkaLatencyBroker{broker: bk, partitions: 3}
			}
		case sinkNATS:
			b, err = startNATSChild()
		case sinkRabbitMQ:
			fmt.Printf("starting rabbitmq-server...\n")
			b, err = startRabbitMQBroker(ctx, false)
		}
		if err == nil {
			stops = append(stops, b.stop)
			err = b.fresh(ctx)
		}
		var cons *consumer
		if err == nil {
			cons, err = startConsumer(b.consumerSpec(), record)
		}
		if err != nil {
			stopAll()
			return nil, nil, fmt.Errorf("%s: %w", s, err)
		}
		stops = append(stops, cons.stop)
		brokers[s] = b
		fmt.Printf("%s: %s\n", s, b.describe())
	}
	var runs []latencyRunner
	for i, s := range sinkOrder(o.sinkList, o.rounds) {
		b, slot := brokers[s], fmt.Sprintf("bench_%s_%d", s, i+1)
		runs = append(runs, latencyRunner{label: s, bin: bin, slot: slot, setup: true, brokerPid: b.pid(),
			cmd: func(logf *os.File) *exec.Cmd { return relayCommand(bin, slot, dbURL, b.relayArgs(), o.relayArgs, logf) }})
	}
	return runs, stopAll, nil
}
