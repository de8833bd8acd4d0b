package relaycli

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// flagConfig is relay run's flag naming the fleet file.
const flagConfig = "config"

// Keys of a fleet file besides the flag names.
const (
	fleetKeyName     = "name"
	fleetKeyDefaults = "defaults"
	fleetKeySources  = "sources"
	fleetKeySpread   = "spread"
	fleetFileSuffix  = "-file"
)

// processFlags are relay run's flags that belong to the process, not to a
// source: with --config they stay on the command line (or in the
// environment) and may not appear in the file.
var processFlags = []string{flagMetricsAddr, flagLogLevel, flagLogFormat, flagConfig, flagInstanceID, flagTracing}

// secretFlags are the per-source flags whose value a fleet file may also
// give as KEY-file: the path of a file holding it, as RELAY_KEY_FILE does
// for a single source.
var secretFlags = []string{flagDatabaseURL, kafkaflags.FlagSASLPassword}

// sourceName is what a source may be called: it labels every metric
// series of the source and names it in /readyz?source= and the logs.
var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// fleetSource is one validated source of a fleet file.
type fleetSource struct {
	// Name is the source's name, unique in the file.
	Name string
	// Config is the relay's configuration, as relay run's flags would
	// have built it.
	Config *relay.Config
	// settings is the source's settings in a canonical form: a source
	// whose settings are unchanged on a reload keeps running.
	settings string
}

// sourceFlags are the flags a source of a fleet file is parsed with:
// relay run's, without --metrics-addr and without their environment
// variables (with --config the file alone configures a source). The log
// flags stay, at their defaults: the process's logger replaces the one
// they build. Built afresh per call: urfave/cli stores parsed values in
// them.
func sourceFlags() []cli.Flag {
	all := append(append(databaseFlags(), runFlags()...), gapFlags()...)
	all = slices.DeleteFunc(all, func(f cli.Flag) bool { return f.Names()[0] == flagMetricsAddr })
	for _, f := range all {
		if env := reflect.ValueOf(f).Elem().FieldByName("EnvVars"); env.IsValid() {
			env.Set(reflect.Zero(env.Type()))
		}
	}
	return all
}

// sourceKeys are the keys a source (or the defaults) of a fleet file may
// set: the names of relay run's per-source flags, and KEY-file for each
// secret.
func sourceKeys() map[string]bool {
	keys := map[string]bool{}
	for _, f := range sourceFlags() {
		if name := f.Names()[0]; !slices.Contains(processFlags, name) {
			keys[name] = true
		}
	}
	for _, s := range secretFlags {
		keys[s+fleetFileSuffix] = true
	}
	return keys
}

// fleetError is an error in a fleet file: the file, where in it, and what.
func fleetError(path, where string, err error) error {
	if where == "" {
		return usagef("--%s %s: %v", flagConfig, path, err)
	}
	return usagef("--%s %s: %s: %v", flagConfig, path, where, err)
}

// fleetConfig is a validated fleet file.
type fleetConfig struct {
	// Sources are the file's sources, in the file's order.
	Sources []fleetSource
	// Spread, when set, shares the sources out among the replicas
	// running the file.
	Spread *spread
	// secrets are the secret files the sources name, watched with the
	// file: a rotated password restarts its source.
	secrets []string
	// digest is the SHA-256 of the file and of the secrets read from
	// the secret files, to tell when one of them changed.
	digest [sha256.Size]byte
}

// loadFleet reads and validates the fleet file at path as a whole: every
// source must build a configuration relay.New accepts, and no two sources
// may share a name or a slot of one database. sc learns every secret the
// file holds before anything can print it.
func loadFleet(path string, sc *scrubber) (*fleetConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fleetError(path, "", err)
	}
	var file struct {
		Defaults map[string]any   `yaml:"defaults"`
		Sources  []map[string]any `yaml:"sources"`
		Spread   *spreadConfig    `yaml:"spread"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		return nil, fleetError(path, "", topLevelError(err))
	}
	if len(file.Sources) == 0 {
		return nil, fleetError(path, "", fmt.Errorf("no %s: list the sources to relay under the key %s", fleetKeySources, fleetKeySources))
	}
	sp, err := file.Spread.parse()
	if err != nil {
		return nil, fleetError(path, fleetKeySpread, err)
	}
	allowed := sourceKeys()
	if err := checkKeys(file.Defaults, allowed); err != nil {
		return nil, fleetError(path, fleetKeyDefaults, err)
	}
	if _, ok := file.Defaults[fleetKeyName]; ok {
		return nil, fleetError(path, fleetKeyDefaults, errors.New("name: each source has its own name"))
	}

	sources := make([]fleetSource, 0, len(file.Sources))
	names := map[string]int{}
	slots := map[string]string{}
	var reads []fileRead
	for i, raw := range file.Sources {
		where := fmt.Sprintf("%s[%d]", fleetKeySources, i)
		name, _ := raw[fleetKeyName].(string)
		switch {
		case name == "":
			return nil, fleetError(path, where, errors.New("name: required (it labels the source's metrics and log lines)"))
		case !sourceName.MatchString(name):
			return nil, fleetError(path, where, fmt.Errorf("name: %q may hold only lower case letters, digits, '_', '.' and '-', at most 63", name))
		}
		where = fmt.Sprintf("%s[%d] (%s)", fleetKeySources, i, name)
		if j, dup := names[name]; dup {
			return nil, fleetError(path, where, fmt.Errorf("name: %q is also the name of %s[%d]", name, fleetKeySources, j))
		}
		names[name] = i
		settings := map[string]any{}
		for k, v := range file.Defaults {
			settings[k] = v
		}
		for k, v := range raw {
			if k != fleetKeyName {
				settings[k] = v
			}
		}
		if err := checkKeys(settings, allowed); err != nil {
			return nil, fleetError(path, where, err)
		}
		cfg, canon, err := sourceConfig(settings, sc, &reads)
		if err != nil {
			return nil, fleetError(path, where, err)
		}
		if _, err := relay.New(cfg); err != nil { // no Registerer: validates only
			return nil, fleetError(path, where, err)
		}
		slot := slotIdentity(cfg)
		if other, dup := slots[slot]; dup {
			return nil, fleetError(path, where, fmt.Errorf("slot: %q is also the slot of source %s on the same server (slot names are per server, not per database): give each source a slot name of its own", cfg.Slot, other))
		}
		slots[slot] = name
		sources = append(sources, fleetSource{Name: name, Config: cfg, settings: canon})
	}
	reserved := &reservedTopics{}
	reserved.set(sources)
	for _, s := range sources {
		s.Config.ReservedTopic = reserved.has
	}
	fc := &fleetConfig{Sources: sources, Spread: sp, digest: fleetDigest(b, reads)}
	for _, r := range reads {
		fc.secrets = append(fc.secrets, r.path)
	}
	return fc, nil
}

// topLevelField is the YAML decoder's message for an unknown top-level key.
var topLevelField = regexp.MustCompile(`line (\d+): field (\S+) not found in type`)

// topLevelError says what is wrong at the top of a fleet file: an unknown
// key with the nearest one (default: for defaults:), rather than the YAML
// decoder's message, which names a Go type.
func topLevelError(err error) error {
	const holds = "the file holds " + fleetKeyDefaults + ":, " + fleetKeySources + ": and " + fleetKeySpread + ":"
	if m := topLevelField.FindStringSubmatch(err.Error()); m != nil {
		top := map[string]bool{fleetKeyDefaults: true, fleetKeySources: true, fleetKeySpread: true}
		if near := nearest(m[2], top); near != "" {
			return fmt.Errorf("line %s: %s: not a key of the file (did you mean %s?; %s)", m[1], m[2], near, holds)
		}
		return fmt.Errorf("line %s: %s: not a key of the file (%s)", m[1], m[2], holds)
	}
	return fmt.Errorf("%v (%s)", err, holds)
}

// checkKeys refuses a key that is not a per-source setting, naming the
// nearest one, or saying where a process setting goes.
func checkKeys(settings map[string]any, allowed map[string]bool) error {
	for _, k := range sortedKeys(settings) {
		switch {
		case allowed[k] || k == fleetKeyName:
		case slices.Contains(processFlags, k):
			return fmt.Errorf("%s: a setting of the process, not of a source: give it to relay run (--%s or %s)", k, k, envName(k))
		case strings.HasPrefix(k, "--"):
			return fmt.Errorf("%s: keys are flag names without the dashes (%s)", k, strings.TrimPrefix(k, "--"))
		default:
			if near := nearest(k, allowed); near != "" {
				return fmt.Errorf("%s: not a setting of relay run (did you mean %s?)", k, near)
			}
			return fmt.Errorf("%s: not a setting of relay run (see relay run --help; keys are its flag names)", k)
		}
	}
	return nil
}

// sourceConfig builds a source's configuration from its settings by
// parsing them as relay run's flags, so a fleet file and the command line
// can never mean different things. It returns the settings' canonical
// form too. The secrets the file gives as KEY-file are read here, each
// added to reads.
func sourceConfig(settings map[string]any, sc *scrubber, reads *[]fileRead) (*relay.Config, string, error) {
	args := []string{"relay", "source"}
	for _, k := range sortedKeys(settings) {
		flag := k
		if base, ok := strings.CutSuffix(k, fleetFileSuffix); ok && slices.Contains(secretFlags, base) {
			v, err := readSecretSetting(k, settings[k])
			if err != nil {
				return nil, "", err
			}
			if _, both := settings[base]; both {
				return nil, "", fmt.Errorf("%s: give %s or %s, not both", k, base, k)
			}
			*reads = append(*reads, fileRead{path: settings[k].(string), value: v})
			args = append(args, "--"+base+"="+v)
			continue
		}
		values, err := settingValues(k, settings[k])
		if err != nil {
			return nil, "", err
		}
		for _, v := range values {
			args = append(args, "--"+flag+"="+v)
		}
	}
	var (
		cfg  *relay.Config
		perr error
	)
	app := &cli.App{
		Name:            "relay",
		Writer:          io.Discard,
		ErrWriter:       io.Discard,
		HideHelp:        true,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		Commands: []*cli.Command{{
			Name:            "source",
			Flags:           sourceFlags(),
			HideHelp:        true,
			SkipFlagParsing: false,
			Action: func(c *cli.Context) error {
				cfg, perr = readStreamConfig(c, sc, streamingConfig)
				return perr
			},
		}},
	}
	if err := app.Run(args); err != nil {
		if perr != nil {
			return nil, "", perr
		}
		return nil, "", err
	}
	return cfg, strings.Join(args[2:], "\x00"), nil
}

// readSecretSetting reads the secret a KEY-file setting names: exactly
// one path, a string (not a list, a mapping or a number), of a regular
// file under the size cap.
func readSecretSetting(key string, v any) (string, error) {
	path, ok := v.(string)
	if !ok || path == "" {
		return "", fmt.Errorf("%s: want one path (a string), got %s", key, yamlKind(v))
	}
	secret, err := cliutil.ReadSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %v", key, err)
	}
	return secret, nil
}

// yamlKind names the kind of a decoded YAML value, for an error.
func yamlKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "no value"
	case []any:
		return fmt.Sprintf("a list of %d", len(v))
	case map[string]any:
		return "a mapping"
	case string:
		return "an empty string"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// settingValues is a setting's value as flag values: one for a scalar,
// one per element for a list.
func settingValues(key string, v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, fmt.Errorf("%s: no value", key)
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			switch e.(type) {
			case []any, map[string]any:
				return nil, fmt.Errorf("%s: a list of lists or mappings, where a list of values is expected", key)
			}
			s, err := settingValues(key, e)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case map[string]any:
		return nil, fmt.Errorf("%s: a mapping, where a value is expected", key)
	default:
		return []string{fmt.Sprint(v)}, nil
	}
}

// slotIdentity names a slot of one server: host, port and slot, since
// slot names are per server, whatever the database. Two sources on one
// database with the same identity would take turns as each other's
// standby; on two databases, one would find the other's slot and fail.
// (Two names of one host, an address and a DNS name, are not told apart.)
func slotIdentity(cfg *relay.Config) string {
	if pg, err := pgconn.ParseConfig(cfg.DatabaseURL); err == nil {
		return fmt.Sprintf("%s:%d\x00%s", pg.Host, pg.Port, cfg.Slot)
	}
	return cfg.DatabaseURL + "\x00" + cfg.Slot
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nearest returns the allowed key closest to k by edit distance, if it is
// close enough to be a typo.
func nearest(k string, allowed map[string]bool) string {
	best, bestD := "", max(2, len(k)/3)+1
	for a := range allowed {
		if d := editDistance(k, a); d < bestD || d == bestD && best != "" && a < best {
			best, bestD = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
