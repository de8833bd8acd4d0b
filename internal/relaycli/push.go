package relaycli

import (
	"encoding/base64"
	"net/url"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/report"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// relay verify --pushgateway: the gauges go to a Prometheus Pushgateway
// after each run, grouped by job and table. A push that fails fails the
// run (exit 1): an audit whose result never arrives must not look clean.

const (
	flagPushUser     = "pushgateway-username"
	flagPushPassword = "pushgateway-password"
	flagPushInsecure = "pushgateway-insecure"
)

// pushFlags are the Pushgateway flags besides --pushgateway and
// --pushgateway-job.
func pushFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagPushUser, catVerify, "", "basic-auth user name for --pushgateway (credentials in the URL are refused)"),
		&cli.StringFlag{Name: flagPushPassword, Category: catVerify, EnvVars: envVar(flagPushPassword),
			Usage: "basic-auth password for --pushgateway; prefer " + envName(flagPushPassword) + cliutil.FileSuffix + " (a file holding it): a flag is visible in ps. Never logged"},
		boolFlag(flagPushInsecure, catVerify, "allow an http:// --pushgateway (the gauges, and any password, travel in clear)"),
	}
}

// newPusher reads the Pushgateway flags; nil when --pushgateway is not
// set. The URL must name its scheme, https unless --pushgateway-insecure,
// and hold no credentials.
func newPusher(c *cli.Context, sc *scrubber, m *relay.VerifyMetrics, table, source string) (*report.Pusher, error) {
	raw := c.String(flagPushgateway)
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, usagef("--%s: not a URL", flagPushgateway)
	case u.User != nil:
		return nil, usagef("--%s: credentials in the URL are refused (they would show in ps and in error messages): use --%s and %s or %s%s",
			flagPushgateway, flagPushUser, envName(flagPushPassword), envName(flagPushPassword), cliutil.FileSuffix)
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		return nil, usagef("--%s %s: want https://HOST[:PORT] (the scheme is required)", flagPushgateway, u.Redacted())
	case u.Scheme == "http" && !c.Bool(flagPushInsecure):
		return nil, usagef("--%s %s: http sends the gauges in clear; use https, or --%s", flagPushgateway, u.Redacted(), flagPushInsecure)
	}
	pw, err := cliutil.ReadSecret(c, flagPushPassword, envName(flagPushPassword))
	if err != nil {
		return nil, err
	}
	sc.add(pw.Value)
	if pw.OnCommandLine {
		sc.exposed = append(sc.exposed, flagPushPassword)
	}
	if user := c.String(flagPushUser); user != "" && pw.Value != "" {
		// The Authorization header's form of the credential, which an
		// error quoting the request would show.
		sc.add(base64.StdEncoding.EncodeToString([]byte(user + ":" + pw.Value)))
	}
	user := c.String(flagPushUser)
	if pw.Value != "" && user == "" {
		return nil, usagef("a --%s needs --%s", flagPushPassword, flagPushUser)
	}
	// The grouping adds the table label.
	return report.NewPusher(report.PushTarget{URL: u.String(), Job: c.String(flagPushJob), Table: table, Source: source, User: user, Password: pw.Value},
		m.Unlabelled()), nil
}
