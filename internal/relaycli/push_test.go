package relaycli_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// gateway is a stand-in Pushgateway that keeps what it was sent.
type gateway struct {
	*httptest.Server
	mu     sync.Mutex
	pushes []push
	answer int // status to answer; 0 for 200
}

// push is one request the gateway received.
type push struct {
	method, path, body, user, password string
}

func newGateway(t *testing.T) *gateway {
	g := &gateway{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		user, password, _ := r.BasicAuth()
		g.mu.Lock()
		g.pushes = append(g.pushes, push{r.Method, r.URL.Path, string(body), user, password})
		answer := g.answer
		g.mu.Unlock()
		if answer != 0 {
			w.WriteHeader(answer)
			// As a proxy may: the answer echoes the request's
			// Authorization header.
			_, _ = io.WriteString(w, "gateway trouble (Authorization: "+r.Header.Get("Authorization")+") "+strings.Repeat("x", 5000))
		}
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gateway) last(t *testing.T) push {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pushes) == 0 {
		t.Fatal("nothing was pushed")
	}
	return g.pushes[len(g.pushes)-1]
}

// relay verify --pushgateway pushes the gauges, grouped by job and table
// (the series themselves carry no table label, which the gateway would
// refuse), with basic auth from --pushgateway-username and the password;
// a gateway that answers 500 fails the run (exit 1) with its answer cut
// short and no credentials in the output, not even the base64 of the
// Authorization header it echoes; credentials in the URL, plain
// http without --pushgateway-insecure and a URL without a scheme are bad
// usage. Before, the push never happened (client_golang refused the
// label clash) and the run exited 0.
func TestVerifyPushgateway(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	g := newGateway(t)
	args := []string{"--brokers", k.Brokers[0], "--since", "1h", "--allow-empty", "--pushgateway", g.URL, "--pushgateway-insecure"}

	r := f.cli(t, "verify", args...)
	wantCode(t, r, 0)
	p := g.last(t)
	if p.method != http.MethodPut || p.path != "/metrics/job/pgoutbox_verify/table/public.outbox" ||
		!strings.Contains(p.body, "pgoutbox_verify_ok 1") || strings.Contains(p.body, `table="`) {
		t.Fatalf("push %s %s:\n%s", p.method, p.path, p.body)
	}

	const password = "s3cret-pw"
	r = f.cli(t, "verify", append(args, "--pushgateway-username", "auditor", "--pushgateway-password", password)...)
	wantCode(t, r, 0)
	if p := g.last(t); p.user != "auditor" || p.password != password {
		t.Fatalf("basic auth %q:%q, want auditor and the password", p.user, p.password)
	}

	g.mu.Lock()
	g.answer = http.StatusInternalServerError
	g.mu.Unlock()
	r = f.cli(t, "verify", append(args, "--pushgateway-username", "auditor", "--pushgateway-password", password)...)
	wantCode(t, r, 1)
	// The password given as a flag is warned about first.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	wantOneErrorLine(t, lines[len(lines)-1], "--pushgateway", "500", "gateway trouble")
	b64 := base64.StdEncoding.EncodeToString([]byte("auditor:" + password))
	if out := r.stdout + r.stderr; strings.Contains(out, password) || strings.Contains(out, b64) || strings.Contains(out, strings.Repeat("x", 600)) {
		t.Fatalf("the output holds the password, its Basic credential or the whole answer:\n%s", out)
	}
	if !strings.Contains(r.stderr, "Authorization: Basic xxxxx") {
		t.Errorf("the echoed Authorization header is not shown scrubbed:\n%s", r.stderr)
	}

	for _, bad := range []string{"http://u:p@" + strings.TrimPrefix(g.URL, "http://"), "localhost:9091"} {
		r := f.cli(t, "verify", "--brokers", k.Brokers[0], "--allow-empty", "--pushgateway", bad, "--pushgateway-insecure")
		wantCode(t, r, 2)
		if strings.Contains(r.stderr, ":p@") {
			t.Fatalf("the usage error echoes the credentials: %s", r.stderr)
		}
	}
	r = f.cli(t, "verify", "--brokers", k.Brokers[0], "--allow-empty", "--pushgateway", g.URL)
	wantCode(t, r, 2)
	wantOneErrorLine(t, r.stderr, "use https, or --pushgateway-insecure")
}
