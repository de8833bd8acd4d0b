package main

import (
	"fmt"
	"slices"
	"time"
)

func topicName(c config, round int) string {
	return fmt.Sprintf("bench.%s.%d.%d", c.side, c.batch, round)
}

// perMessage is the CPU time per 1,000 messages (on Linux) and the
// statements and round trips per message of s, a run of n messages.
func perMessage(s sample, n int) string {
	out := fmt.Sprintf("  stmts/msg %.2f trips/msg %.2f", float64(s.statements)/float64(n), float64(s.roundTrips)/float64(n))
	if s.self == 0 {
		return out
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 * 1e3 / float64(n) }
	if s.server == 0 {
		return fmt.Sprintf("  cpu/1k: go %.1fms", ms(s.self)) + out
	}
	return fmt.Sprintf("  cpu/1k: go %.1fms pg %.1fms", ms(s.self), ms(s.server)) + out
}

// median returns the median of f over samples (the upper one of an even
// count).
func median[T int64 | time.Duration](samples []sample, f func(sample) T) T {
	v := make([]T, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// report prints the medians of every configuration and the ratios the
// bench is for.
func report(o options, cs []config, samples map[config][]sample) {
	fmt.Printf("medians over %d rounds:\n", o.rounds)
	for _, c := range cs {
		ss := samples[c]
		m := sample{
			wall:       median(ss, func(s sample) time.Duration { return s.wall }),
			self:       median(ss, func(s sample) time.Duration { return s.self }),
			server:     median(ss, func(s sample) time.Duration { return s.server }),
			statements: median(ss, func(s sample) int64 { return s.statements }),
			roundTrips: median(ss, func(s sample) int64 { return s.roundTrips }),
		}
		fmt.Printf("  %-20s %8.0f msg/s  (%v)%s\n", c, float64(o.n)/m.wall.Seconds(), m.wall.Round(time.Millisecond), perMessage(m, o.n))
	}
	ratio := func(what string, base, in config) { ratios(what, o.rounds, samples[base], samples[in]) }
	if !o.loopsOnly {
		fmt.Printf("inbox time over the hand-rolled dedup baseline (target <= 1.0x):\n")
		ratio(fmt.Sprintf("batched (BatchSize=%d vs dedup in %d-message transactions)", batchSize, batchSize),
			config{sideDedup, batchSize}, config{sideInbox, batchSize})
		ratio("one message per transaction (BatchSize=1 vs dedup, one transaction per message)", config{sideDedup, 1}, config{sideInbox, 1})
		fmt.Printf("for reference, over the plain consumer without dedup:\n")
		ratio("batched", config{sidePlain, batchSize}, config{sideInbox, batchSize})
		ratio("one message per transaction (vs autocommit INSERT)", config{sidePlain, 1}, config{sideInbox, 1})
	}
	if o.withSQL {
		fmt.Printf("the inbox on database/sql over the inbox on pgx:\n")
		ratio("batched", config{sideInbox, batchSize}, config{sideInboxDB, batchSize})
		ratio("one message per transaction", config{sideInbox, 1}, config{sideInboxDB, 1})
	}
	if o.kafkaGo {
		fmt.Printf("the kgo loop's time over the kafka-go reader loop's (below 1.0x: the kgo loop is faster; target <= 1.0x):\n")
		ratio("one message per transaction (BatchSize=1)", config{sideKafkaGo, 1}, config{sideInbox, 1})
		ratio(fmt.Sprintf("the kgo loop batched (BatchSize=%d; kafka-go has no batch path)", batchSize), config{sideKafkaGo, 1}, config{sideInbox, batchSize})
	}
}

// ratios prints in's wall time over base's, paired by round (both ran in
// the same round), as a median with its range. The CPU time of both
// processes per run is paired the same way; on a shared machine it is
// steadier than the wall time.
func ratios(what string, rounds int, base, in []sample) {
	var wall, cpu []float64
	for r := range rounds {
		b, i := base[r], in[r]
		wall = append(wall, i.wall.Seconds()/b.wall.Seconds())
		if b.self+b.server > 0 {
			cpu = append(cpu, (i.self+i.server).Seconds()/(b.self+b.server).Seconds())
		}
	}
	slices.Sort(wall)
	line := fmt.Sprintf("  %s: %.2fx median, %.2fx..%.2fx over rounds", what, wall[len(wall)/2], wall[0], wall[len(wall)-1])
	if len(cpu) == len(wall) {
		slices.Sort(cpu)
		line += fmt.Sprintf("; cpu %.2fx median, %.2fx..%.2fx", cpu[len(cpu)/2], cpu[0], cpu[len(cpu)-1])
	}
	fmt.Println(line)
}
