package report

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/prometheus/common/expfmt"
)

// pushMaxBody bounds what of a Pushgateway's answer reaches an error
// message.
const pushMaxBody = 512

// PushTarget is where and as whom a Pusher pushes: the gateway's URL,
// the job, the table and, for a fleet file's source, the source (the
// group's labels), and the basic-auth user and password (none when User
// is empty). The caller checks the URL (its scheme, no credentials in
// it) and keeps the password out of its output.
type PushTarget struct {
	URL, Job, Table string
	Source          string // a fleet's source: grouped by it too; empty for a single relay
	User, Password  string
}

// Pusher pushes relay verify's gauges to a Prometheus Pushgateway,
// grouped by job and table (and source).
type Pusher struct {
	to  PushTarget
	reg *prometheus.Registry
}

// NewPusher returns a Pusher of the gauges of c to t. The gauges carry no
// table or source label: the grouping adds them (a series whose label
// clashes with the grouping is refused by the gateway).
func NewPusher(t PushTarget, c prometheus.Collector) *Pusher {
	p := &Pusher{to: t, reg: prometheus.NewRegistry()}
	p.reg.MustRegister(c)
	return p
}

// Push sends the gauges, replacing the group's last push. An error quotes
// at most pushMaxBody bytes of the gateway's answer.
func (p *Pusher) Push(ctx context.Context) error {
	client := &http.Client{Timeout: 30 * time.Second, Transport: cutBodies{http.DefaultTransport}}
	t := p.to
	pu := push.New(t.URL, t.Job).Gatherer(p.reg).Grouping("table", t.Table).Client(client).Format(expfmt.NewFormat(expfmt.TypeTextPlain))
	if t.Source != "" {
		pu = pu.Grouping("source", t.Source)
	}
	if t.User != "" {
		pu = pu.BasicAuth(t.User, t.Password)
	}
	return pu.PushContext(ctx)
}

// cutBodies cuts every response body to pushMaxBody bytes: client_golang
// quotes a failed push's answer in its error.
type cutBodies struct{ next http.RoundTripper }

func (t cutBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, pushMaxBody), resp.Body}
	}
	return resp, err
}
