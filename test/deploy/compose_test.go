package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of docker-compose.yml these checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Restart     string            `yaml:"restart"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// pinned matches an image tag with at least major.minor (postgres:15.14,
// apache/kafka:3.9.1, prom/prometheus:v3.5.0) or a digest.
var pinned = regexp.MustCompile(`:v?\d+\.\d+[\w.-]*$|@sha256:[0-9a-f]{64}$`)

// The compose file comes up on a fresh volume, does not clash with local
// tools and exposes nothing to the network, checked without a Docker
// engine: Postgres is checked over TCP, relay setup waits for the database
// and is restarted on failure, every host port is overridable and bound to
// 127.0.0.1 (Postgres has the superuser app:app, Kafka no authentication),
// anonymous Grafana users are Viewers, and no image tag floats.
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, want := range []string{"postgres", "kafka", "relay-setup", "relay", "producer", "payment-consumer", "prometheus", "grafana"} {
		if _, ok := f.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	pg := f.Services["postgres"]
	if hc := strings.Join(pg.Healthcheck.Test, " "); !strings.Contains(hc, "pg_isready -h 127.0.0.1") {
		t.Errorf("postgres healthcheck %q does not check over TCP (-h 127.0.0.1): it passes during initdb's socket-only start", hc)
	}
	setup := f.Services["relay-setup"]
	cmd := strings.Join(setup.Command, " ")
	if !regexp.MustCompile(`^relay setup .*--wait \d+[smh]`).MatchString(cmd) {
		t.Errorf("relay-setup command %q does not wait for the database (--wait)", cmd)
	}
	if setup.Restart != "on-failure" {
		t.Errorf("relay-setup restart %q, want on-failure", setup.Restart)
	}
	if setup.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("relay-setup does not wait for a healthy postgres")
	}
	grafana := f.Services["grafana"].Environment
	if grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "true" && grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Viewer" {
		t.Errorf("grafana: anonymous users get role %q, want Viewer", grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"])
	}
	hostPort := regexp.MustCompile(`^127\.0\.0\.1:\$\{PGOUTBOX_[A-Z_]+_PORT:-(\d+)\}:\d+$`)
	for name, s := range f.Services {
		if s.Image != "" && s.Image != "pgoutbox:local" && !pinned.MatchString(s.Image) {
			t.Errorf("service %s: image %q floats; pin an exact version", name, s.Image)
		}
		for _, p := range s.Ports {
			m := hostPort.FindStringSubmatch(p)
			if m == nil {
				t.Errorf("service %s: port %q is not 127.0.0.1:${PGOUTBOX_..._PORT:-N}:port", name, p)
				continue
			}
			switch m[1] {
			case "5432", "8080", "8081", "9090", "3000", "9092", "9187":
				t.Errorf("service %s: default host port %s clashes with common local tools", name, m[1])
			}
		}
		if s.Restart == "no" {
			t.Errorf("service %s: restart \"no\" never recovers from a start-up race", name)
		}
	}
}

// docker-compose itself accepts the file where it is installed (Debian's
// docker-compose package; it needs no engine for `config`).
func TestComposeConfigValid(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose is not installed")
	}
	if out, err := exec.Command(bin, "-f", "../../docker-compose.yml", "config", "-q").CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config -q: %v\n%s", err, out)
	}
}

// The image's bases are pinned too: every FROM names scratch, an earlier
// stage, or an image with an exact version or digest.
func TestDockerfileBasesPinned(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{"scratch": true}
	from := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`)
	ms := from.FindAllStringSubmatch(string(b), -1)
	if len(ms) == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	for _, m := range ms {
		if !stages[m[1]] && !pinned.MatchString(m[1]) {
			t.Errorf("Dockerfile: FROM %s floats; pin an exact version or a digest", m[1])
		}
		if m[2] != "" {
			stages[m[2]] = true
		}
	}
}
