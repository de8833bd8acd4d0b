package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/operations.md names every alert deploy/prometheus/alerts.yml ships,
// and the scrape job name PgoutboxRelayDown needs.
func TestOperationsDocListsEveryAlert(t *testing.T) {
	alerts, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(alerts), -1)
	if len(names) == 0 {
		t.Fatal("alerts.yml has no alerts")
	}
	for _, m := range names {
		if !strings.Contains(string(doc), "`"+m[1]+"`") {
			t.Errorf("docs/operations.md does not name alert %s", m[1])
		}
	}
	for _, job := range regexp.MustCompile(`job="([\w-]+)"`).FindAllStringSubmatch(string(alerts), -1) {
		if !strings.Contains(string(doc), "`"+job[1]+"`") {
			t.Errorf("docs/operations.md does not name the scrape job %s that alerts.yml needs", job[1])
		}
	}
}
