package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
)

// HelmEnv names the helm binary the chart tests run (make check-deploy sets
// it to the one it built); without it they run the pinned version with go
// run (built once, then cached by the go command).
const HelmEnv = "PGOUTBOX_TEST_HELM"

// helmModule is the pinned helm, as the Makefile pins it.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

const chartDir = "../../deploy/helm/pgoutbox-relay"

// helm runs helm with args; it returns stdout, and the error with stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var cmd *exec.Cmd
	if bin := os.Getenv(HelmEnv); bin != "" {
		cmd = exec.Command(bin, args...)
	} else {
		cmd = exec.Command("go", append([]string{"run", helmModule}, args...)...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.Join(err, errors.New(stderr.String()))
	}
	if strings.Contains(stderr.String(), "symbolic link") {
		t.Errorf("helm %s warns about a symbolic link in the chart:\n%s", args[0], stderr.String())
	}
	return stdout.String(), nil
}

// The chart's copy of the alert rules is deploy/prometheus/alerts.yml, byte
// for byte (a copy, since helm warns about a symbolic link every time).
func TestHelmChartAlertsCopy(t *testing.T) {
	src, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(chartDir + "/files/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, cp) {
		t.Errorf("deploy/helm/pgoutbox-relay/files/alerts.yml differs from deploy/prometheus/alerts.yml: " +
			"cp deploy/prometheus/alerts.yml deploy/helm/pgoutbox-relay/files/alerts.yml")
	}
}

// object is the part of a rendered Kubernetes object these checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		// Deployment
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			RollingUpdate struct {
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// PodDisruptionBudget, ServiceMonitor; Service (a plain map there)
		Selector                   yaml.Node `yaml:"selector"`
		MinAvailable               *int      `yaml:"minAvailable"`
		UnhealthyPodEvictionPolicy string    `yaml:"unhealthyPodEvictionPolicy"`
		PublishNotReadyAddresses   bool      `yaml:"publishNotReadyAddresses"`
		JobLabel                   string    `yaml:"jobLabel"`
		// PrometheusRule
		Groups []any `yaml:"groups"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	AutomountServiceAccountToken *bool       `yaml:"automountServiceAccountToken"`
	TerminationGracePeriod       int         `yaml:"terminationGracePeriodSeconds"`
	Containers                   []container `yaml:"containers"`
	Volumes                      []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
			Items      []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type container struct {
	Command         []string `yaml:"command"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string         `yaml:"name"`
		Value     string         `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  probe `yaml:"livenessProbe"`
	ReadinessProbe probe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// render runs helm template on the chart with the values files and returns
// the objects by kind.
func render(t *testing.T, args ...string) map[string]object {
	t.Helper()
	out, err := helm(t, append([]string{"template", "billing", chartDir}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs := make(map[string]object)
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("rendered chart: %v", err)
		}
		if o.Kind == "" {
			continue
		}
		if _, dup := objs[o.Kind]; dup {
			t.Fatalf("two %s objects", o.Kind)
		}
		objs[o.Kind] = o
	}
	return objs
}

// relayEnvVars are the environment variables relay run reads, from its
// help (urfave/cli prints each flag's [$RELAY_…]).
func relayEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := relaycli.Run(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("relay run --help: exit %d: %s", code, stderr.String())
	}
	vars := make(map[string]bool)
	for _, m := range regexp.MustCompile(`\$(RELAY_[A-Z0-9_]+)`).FindAllStringSubmatch(stdout.String(), -1) {
		vars[m[1]] = true
	}
	if !vars["RELAY_DATABASE_URL"] {
		t.Fatalf("relay run --help lists no RELAY_DATABASE_URL:\n%s", stdout.String())
	}
	return vars
}

// The chart, with every option on (ci/full-values.yaml): two relays (a
// leader and a standby) that survive a rollout and a drain, probed on
// /healthz and the standby-aware /readyz, non-root on a read-only root,
// with the database URL and the SASL password read from Secret files
// through *_FILE variables the relay knows, and the alert rules of
// deploy/prometheus/alerts.yml.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	objs := render(t, "-f", chartDir+"/ci/full-values.yaml")
	for _, kind := range []string{"Deployment", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceMonitor", "PrometheusRule"} {
		if _, ok := objs[kind]; !ok {
			t.Errorf("no %s rendered", kind)
		}
	}
	dep := objs["Deployment"]
	if r := dep.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("replicas %s, want 2 (a leader and a standby)", show(r))
	}
	if mu := dep.Spec.Strategy.RollingUpdate.MaxUnavailable; mu != 0 {
		t.Errorf("maxUnavailable %v, want 0: a rollout whose new pods cannot connect must stop before an old relay goes", mu)
	}
	pod := dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Metadata.Labels
	if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext: runAsNonRoot %v, runAsUser %v; want true and a non-zero uid", sc.RunAsNonRoot, sc.RunAsUser)
	}
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken %v, want false (the relay never calls the API)", a)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if got := strings.Join(c.Command, " "); got != "relay run" {
		t.Errorf("command %q, want relay run", got)
	}
	sc := c.SecurityContext
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if !reflect.DeepEqual(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("capabilities drop %v, want [ALL]", sc.Capabilities.Drop)
	}

	env := make(map[string]string)
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom["secretKeyRef"] != nil {
			t.Errorf("env %s from a secretKeyRef: secrets go in files (*_FILE), not in the environment", e.Name)
		}
	}
	known := relayEnvVars(t)
	for name := range env {
		if !known[name] && !known[strings.TrimSuffix(name, "_FILE")] {
			t.Errorf("env %s: relay run reads no such variable", name)
		}
	}
	for _, secret := range []string{"RELAY_DATABASE_URL", "RELAY_KAFKA_SASL_PASSWORD"} {
		if _, ok := env[secret]; ok {
			t.Errorf("env %s is set: the secret must come from a file (%s_FILE)", secret, secret)
		}
	}
	for name, want := range map[string]string{
		"RELAY_BROKERS": "kafka-0.kafka:9093,kafka-1.kafka:9093", "RELAY_TABLE": "billing.outbox",
		"RELAY_SLOT": "billing_outbox", "RELAY_PUBLICATION": "billing_outbox", "RELAY_ON_GAP": "backfill",
		"RELAY_NO_CREATE": "true", "RELAY_KAFKA_SASL_MECHANISM": "scram-sha-512", "RELAY_KAFKA_TLS": "true",
	} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q", name, env[name], want)
		}
	}
	// Each *_FILE names the file a Secret volume mounts, holding the
	// Secret's key.
	for file, secret := range map[string]struct{ name, key string }{
		"RELAY_DATABASE_URL_FILE":        {"billing-relay-db", "url"},
		"RELAY_KAFKA_SASL_PASSWORD_FILE": {"billing-relay-kafka", "password"},
	} {
		p := env[file]
		if p == "" {
			t.Errorf("env %s not set", file)
			continue
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if path.Dir(p) != m.MountPath {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != secret.name {
					continue
				}
				for _, it := range v.Secret.Items {
					mounted = mounted || (it.Key == secret.key && it.Path == path.Base(p))
				}
			}
		}
		if !mounted {
			t.Errorf("%s=%s is not key %q of Secret %s mounted there", file, p, secret.key, secret.name)
		}
	}

	// Probes on the port the relay serves them on.
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" {
		t.Fatalf("ports %+v, want one named metrics", c.Ports)
	}
	if want := ":" + strconv.Itoa(c.Ports[0].ContainerPort); env["RELAY_METRICS_ADDR"] != want {
		t.Errorf("RELAY_METRICS_ADDR %q, want %q (the container port)", env["RELAY_METRICS_ADDR"], want)
	}
	if p := c.LivenessProbe.HTTPGet; p.Path != "/healthz" || p.Port != "metrics" {
		t.Errorf("liveness probe %+v, want /healthz on metrics", p)
	}
	// Plain /readyz is 503 on a standby: never ready, it would stall
	// every rollout and, under the budget, every drain.
	if p := c.ReadinessProbe.HTTPGet; p.Path != "/readyz?standby=ok" || p.Port != "metrics" {
		t.Errorf("readiness probe %+v, want /readyz?standby=ok on metrics", p)
	}

	pdb := objs["PodDisruptionBudget"]
	if m := pdb.Spec.MinAvailable; m == nil || *m != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %s, want 1", show(m))
	}
	if pdb.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" {
		t.Errorf("unhealthyPodEvictionPolicy %q, want AlwaysAllow (a relay that cannot connect must not block a drain)", pdb.Spec.UnhealthyPodEvictionPolicy)
	}
	checkSelects(t, "PodDisruptionBudget", pdb.Spec.Selector, "matchLabels", podLabels)
	svc := objs["Service"]
	checkSelects(t, "Service", svc.Spec.Selector, "", podLabels)
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("the metrics Service does not publish not-ready pods: a relay that cannot connect would not be scraped")
	}
	sm := objs["ServiceMonitor"]
	checkSelects(t, "ServiceMonitor", sm.Spec.Selector, "matchLabels", svc.Metadata.Labels)
	if job := svc.Metadata.Labels[sm.Spec.JobLabel]; job != "pgoutbox-relay" {
		t.Errorf("Prometheus job %q (Service label %q), want pgoutbox-relay as alerts.yml's up{job=...} expects", job, sm.Spec.JobLabel)
	}

	// The rules are deploy/prometheus/alerts.yml's, unchanged.
	b, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var alerts struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &alerts); err != nil {
		t.Fatal(err)
	}
	if rules := objs["PrometheusRule"].Spec.Groups; len(alerts.Groups) == 0 || !reflect.DeepEqual(rules, alerts.Groups) {
		t.Errorf("PrometheusRule groups differ from deploy/prometheus/alerts.yml")
	}
}

// checkSelects fails t unless sel (under key, or itself when key is empty)
// is a non-empty label map that labels match.
func checkSelects(t *testing.T, what string, sel yaml.Node, key string, labels map[string]string) {
	t.Helper()
	var m map[string]map[string]string
	var flat map[string]string
	if key == "" {
		if err := sel.Decode(&flat); err != nil {
			t.Fatalf("%s selector: %v", what, err)
		}
	} else {
		if err := sel.Decode(&m); err != nil {
			t.Fatalf("%s selector: %v", what, err)
		}
		flat = m[key]
	}
	if len(flat) == 0 {
		t.Errorf("%s selects nothing", what)
	}
	for k, v := range flat {
		if labels[k] != v {
			t.Errorf("%s selects %s=%s, which the target's labels %v lack", what, k, v, labels)
		}
	}
}

// show prints an optional number.
func show(n *int) string {
	if n == nil {
		return "unset"
	}
	return strconv.Itoa(*n)
}

// The values a release must set are required, secrets are refused as
// flags, values of the wrong shape are refused (values.schema.json), and
// one replica gets no budget (it would block every drain).
func TestHelmChartValues(t *testing.T) {
	t.Parallel()
	base := []string{"--set", "brokers[0]=kafka:9092", "--set", "database.existingSecret=db"}
	objs := render(t, base...)
	if _, ok := objs["PodDisruptionBudget"]; !ok {
		t.Error("no PodDisruptionBudget with the default two replicas")
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if _, ok := objs[kind]; ok {
			t.Errorf("%s rendered by default: it needs the Prometheus Operator's CRDs", kind)
		}
	}
	objs = render(t, append(base, "--set", "replicaCount=1")...)
	if _, ok := objs["PodDisruptionBudget"]; ok {
		t.Error("a PodDisruptionBudget with one replica: minAvailable 1 would block every drain")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "database.existingSecret=db"}, "brokers:"},
		{[]string{"--set", "brokers[0]=kafka:9092"}, "database.existingSecret:"},
		{append(base, "--set", "kafka.sasl.mechanism=plain"), "kafka.sasl.existingSecret:"},
		{append(base, "--set", "flags.database-url=postgres://u:pw@db/app"), "flags.database-url:"},
		// values.schema.json: a list, and a slot name Postgres accepts.
		{[]string{"--set", "brokers=kafka:9092", "--set", "database.existingSecret=db"}, "/brokers"},
		{append(base, "--set", "slot=Billing-Outbox"), "/slot"},
	} {
		out, err := helm(t, append([]string{"template", "billing", chartDir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: err %v, want one naming %q", tc.args, err, tc.want)
		}
		if strings.Contains(out, "pw@") {
			t.Errorf("helm template %v printed the password", tc.args)
		}
	}
}

// Fleet mode: the fleet file comes from a Secret mounted as a directory
// (so the kubelet updates it in place and the relay reloads it), read
// through RELAY_CONFIG; no per-source setting is rendered (relay run
// --config refuses them beside the file), and values that belong in the
// file are refused.
func TestHelmChartFleet(t *testing.T) {
	t.Parallel()
	// The install line of docs/kubernetes.md's fleet section renders.
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	install := regexp.MustCompile(`(?m)^helm install relays deploy/helm/pgoutbox-relay (.*)$`).FindSubmatch(doc)
	if install == nil {
		t.Fatal("docs/kubernetes.md shows no helm install of a fleet")
	}
	if objs := render(t, strings.Fields(string(install[1]))...); objs["Deployment"].Spec.Replicas == nil || *objs["Deployment"].Spec.Replicas != 3 {
		t.Errorf("docs/kubernetes.md's fleet install: %s", install[1])
	}
	objs := render(t, "--set", "fleet.existingSecret=relay-fleet", "--set", "kafka.tls.existingSecret=kafka-ca", "--set", "networkPolicy.kafka.ports={9093}")
	if _, ok := objs["NetworkPolicy"]; !ok {
		t.Error("fleet mode renders no NetworkPolicy: it is on by default there")
	}
	if single := render(t, "--set", "brokers[0]=kafka:9093", "--set", "database.existingSecret=db"); len(single["NetworkPolicy"].Kind) > 0 {
		t.Error("one source renders a NetworkPolicy without networkPolicy.enabled")
	}
	pod := objs["Deployment"].Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if got := env["RELAY_CONFIG"]; got != "/var/run/secrets/pgoutbox/fleet/fleet.yaml" {
		t.Errorf("RELAY_CONFIG %q, want the mounted fleet file", got)
	}
	known := relayEnvVars(t)
	for name := range env {
		if !known[name] {
			t.Errorf("env %s: relay run reads no such variable", name)
		}
		switch name {
		case "RELAY_CONFIG", "RELAY_METRICS_ADDR", "RELAY_INSTANCE_ID", "RELAY_LOG_LEVEL", "RELAY_LOG_FORMAT":
		default:
			t.Errorf("env %s in fleet mode: a per-source setting beside --config is refused by relay run", name)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name == "fleet" && m.SubPath != "" {
			t.Error("the fleet file is mounted with subPath: the kubelet never updates it")
		}
	}
	if mounts["fleet"] != "/var/run/secrets/pgoutbox/fleet" || mounts["kafka-tls"] == "" || mounts["database"] != "" {
		t.Errorf("mounts %v: want the fleet Secret and the Kafka CA, no database Secret", mounts)
	}
	for _, v := range pod.Volumes {
		if v.Name == "fleet" && (v.Secret == nil || v.Secret.SecretName != "relay-fleet") {
			t.Errorf("fleet volume %+v, want Secret relay-fleet", v)
		}
	}
	// fleet.secretKey mounts the fleet secret (spread: secret-file:) beside
	// the file.
	withSecret := render(t, "--set", "fleet.existingSecret=relay-fleet", "--set", "fleet.secretKey=fleet.secret", "--set", "networkPolicy.kafka.ports={9093}")
	var keys []string
	for _, v := range withSecret["Deployment"].Spec.Template.Spec.Volumes {
		if v.Name == "fleet" && v.Secret != nil {
			for _, it := range v.Secret.Items {
				keys = append(keys, it.Key+"="+it.Path)
			}
		}
	}
	if strings.Join(keys, " ") != "fleet.yaml=fleet.yaml fleet.secret=fleet.secret" {
		t.Errorf("fleet volume items %v, want the file and the fleet secret", keys)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "brokers[0]=kafka:9092", "--set", "networkPolicy.kafka.ports={9093}"}, "brokers: with fleet.existingSecret"},
		{[]string{"--set", "slot=orders", "--set", "networkPolicy.kafka.ports={9093}"}, "slot: with fleet.existingSecret"},
		{[]string{"--set", "flags.prune-after=1h", "--set", "networkPolicy.kafka.ports={9093}"}, "flags.prune-after: with fleet.existingSecret"},
		{[]string{"--set", "networkPolicy.enabled=true"}, "networkPolicy.kafka.ports"},
		// On by default in fleet mode: the brokers' ports are needed.
		{nil, "networkPolicy.kafka.ports"},
	} {
		args := append([]string{"template", "billing", chartDir, "--set", "fleet.existingSecret=relay-fleet"}, tc.args...)
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: err %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}
