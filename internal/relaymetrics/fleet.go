package relaymetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/promopts"
)

// NewFleetSourceRunning returns relay run --config's gauge
// pgoutbox_fleet_source_running{source}, unregistered: 1 for each source of
// the file this replica runs (streaming, standby, starting or restarting
// after a failure), 0 for one it does not (with spread: led elsewhere).
// Every replica reports every source, so a source that is 0 on all of
// them is run by none (a foreign member of the group took it).
func NewFleetSourceRunning() *prometheus.GaugeVec {
	return promopts.Subsystem{Namespace: "pgoutbox", Subsystem: "fleet"}.GaugeVec("source_running",
		"relay run --config: 1 for each source of the fleet file this replica runs (streaming, standby, starting or restarting), 0 for one it does not (with spread: led elsewhere). 0 on every replica: no replica runs it.", "source")
}
