// Package deploy checks the operations files in deploy/ against the code:
// every pgoutbox metric that the Grafana dashboard or the Prometheus alert
// rules query must be one that the relay or the inbox registers, so a
// renamed metric cannot leave a silent panel or an alert that never fires.
package deploy
