package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// writeFleetFile creates n databases, each set up for the relay (slot the
// database's name, publication pub_fleet), and writes a fleet file of head
// followed by one source sNN per database, whose URL is url(db) (nil: the
// database's own). It returns the file's path and the databases.
func writeFleetFile(t testing.TB, bin, head string, n int, url func(*testenv.DB) string) (string, []*testenv.DB) {
	t.Helper()
	file := head
	dbs := make([]*testenv.DB, n)
	for i := range dbs {
		dbs[i] = testenv.NewDB(t)
		mustRunRelay(t, bin, "setup", "--database-url", dbs[i].URL, "--slot", dbs[i].Name, "--publication", "pub_fleet")
		u := dbs[i].URL
		if url != nil {
			u = url(dbs[i])
		}
		file += fmt.Sprintf("  - name: s%02d\n    database-url: %s\n    slot: %s\n    publication: pub_fleet\n", i, u, dbs[i].Name)
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dbs
}

// fleetLeaders reads /status of each replica (nil for one that does not
// answer) and returns, per source, the replicas streaming it.
func fleetLeaders(addrs []string) map[string][]int {
	leaders := map[string][]int{}
	client := &http.Client{Timeout: 2 * time.Second}
	for i, addr := range addrs {
		resp, err := client.Get("http://" + addr + "/status")
		if err != nil {
			continue
		}
		var st struct {
			Sources []struct{ Name, State string }
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, s := range st.Sources {
			if s.State == "streaming" {
				leaders[s.Name] = append(leaders[s.Name], i)
			}
		}
	}
	return leaders
}

// TestFleetReplicaKilledLosesNothing runs one fleet file of three sources
// on two relay processes that spread them (with a fleet secret), SIGKILLs the one leading more
// while writers commit into every source, and checks that the other takes
// every source over and Kafka finally holds every committed message in
// commit order per aggregate.
func TestFleetReplicaKilledLosesNothing(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	kafka := testenv.NewBroker(t)
	const sources = 3
	// The replicas prove to each other that they run this fleet.
	secret := testenv.TempFile(t, "fleet.secret", "e2e-fleet-secret-0123456789\n")
	head := fmt.Sprintf("spread:\n  group: %s\n  session-timeout: 6s\n  secret-file: %s\ndefaults:\n  brokers: [%s]\n  topic-template: %s\n  standby-retry-interval: 200ms\nsources:\n",
		kafka.Topic(fmt.Sprintf("fleet-e2e-%d", os.Getpid())), secret, kafka.Brokers[0], kafka.Topic(topicTemplate))
	path, dbs := writeFleetFile(t, bin, head, sources, nil)
	addrs := []string{freeAddr(t), freeAddr(t)}
	procs := make([]*relayProc, len(addrs))
	for i, addr := range addrs {
		procs[i] = startRelay(t, bin, relayLog(t), "run", "--config", path, "--metrics-addr", addr, "--log-format", "json")
	}
	var leaders map[string][]int
	testenv.WaitFor(t, 2*time.Minute, "each source streamed by one replica, spread over both", func() (bool, error) {
		for _, p := range procs {
			if p.exited() {
				return false, fmt.Errorf("replica exited: %v", p.err)
			}
		}
		leaders = fleetLeaders(addrs)
		per := make([]int, len(addrs))
		for _, rs := range leaders {
			if len(rs) != 1 {
				return false, nil
			}
			per[rs[0]]++
		}
		return len(leaders) == sources && per[0] >= 1 && per[1] >= 1, nil
	})

	l := newLedger()
	var stops []func()
	for i, db := range dbs {
		stops = append(stops, startWritersFrom(t, db.Pool, 2*i, l))
	}
	time.Sleep(2 * time.Second)
	victim := 0
	if n := count(leaders, 1); n > sources-n {
		victim = 1
	}
	survivor := 1 - victim
	procs[victim].kill()
	killed := time.Now()
	testenv.WaitFor(t, 2*time.Minute, "the survivor streaming every source", func() (bool, error) {
		if procs[survivor].exited() {
			return false, fmt.Errorf("survivor exited: %v", procs[survivor].err)
		}
		return count(fleetLeaders(addrs[survivor:survivor+1]), 0) == sources, nil
	})
	t.Logf("SIGKILL of the replica leading %d of %d sources: the other streamed all of them %s later (session timeout 6s)",
		count(leaders, victim), sources, time.Since(killed).Round(100*time.Millisecond))
	time.Sleep(time.Second)
	for _, stop := range stops {
		stop()
	}
	for _, db := range dbs { // one at a time: the fences share an aggregate
		waitConfirmed(t, db.Pool, db.Name, writeFence(t, db.Pool, l), procs[survivor])
	}
	if code := procs[survivor].stop(time.Minute); code != 0 {
		t.Fatalf("survivor after SIGTERM: exit code %d, want 0", code)
	}
	records, duplicates := checkDelivered(t, kafka, l)
	t.Logf("%d committed messages over %d sources; Kafka holds %d records: %d duplicates", l.count, sources, records, duplicates)
}

// count is how many sources replica i streams.
func count(leaders map[string][]int, i int) int {
	n := 0
	for _, rs := range leaders {
		for _, r := range rs {
			if r == i {
				n++
			}
		}
	}
	return n
}
