package fleet

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.yaml.in/yaml/v3"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// flagConfig is relay run's flag naming the fleet file, which errors in
// the file name.
const flagConfig = "config"

// Keys of a fleet file besides the flag names.
const (
	fleetKeyName     = "name"
	fleetKeyDefaults = "defaults"
	fleetKeySources  = "sources"
	fleetKeySpread   = "spread"
	// FileSuffix ends a key KEY-file: the path of a file holding the
	// secret KEY, as RELAY_KEY_FILE does for a single source.
	FileSuffix = "-file"
)

// sourceName is what a source may be called: it labels every metric
// series of the source and names it in /readyz?source= and the logs.
var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Parser is how the command line reads a source's settings: a fleet
// file's keys are relay run's per-source flag names, and a source's
// configuration is what those flags build, so a fleet file and the
// command line can never mean different things.
type Parser struct {
	// Keys are the keys a source (or the defaults) may set: the flag
	// names, and KEY-file for each of Secrets.
	Keys map[string]bool
	// Secrets are the keys a source may also give as KEY-file.
	Secrets []string
	// Process are the flags of the process, not of a source: refused in
	// the file, with where they go instead.
	Process []string
	// Env names a flag's environment variable, for errors.
	Env func(flag string) string
	// Parse builds a source's configuration from its settings as flag
	// arguments (--key=value, by key), the secrets read from KEY-file
	// settings included.
	Parse func(args []string) (*relay.Config, error)
}

// Source is one validated source of a fleet file.
type Source struct {
	// Name is the source's name, unique in the file.
	Name string
	// Config is the relay's configuration, as relay run's flags would
	// have built it.
	Config *relay.Config
	// settings is the source's settings in a canonical form: a source
	// whose settings are unchanged on a reload keeps running.
	settings string
}

// fleetError is an error in a fleet file: the file, where in it, and what.
func fleetError(path, where string, err error) error {
	if where == "" {
		return cliutil.Usagef("--%s %s: %v", flagConfig, path, err)
	}
	return cliutil.Usagef("--%s %s: %s: %v", flagConfig, path, where, err)
}

// File is a validated fleet file.
type File struct {
	// Sources are the file's sources, in the file's order.
	Sources []Source
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

// Load reads and validates the fleet file at path as a whole: every
// source must build, through p, a configuration relay.New accepts, and no
// two sources may share a name or a slot of one server. p.Parse learns
// every secret the file holds before anything can print it.
func Load(path string, p *Parser) (*File, error) {
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
	var reads []fileRead
	if sp != nil && sp.secretFile != "" {
		reads = append(reads, fileRead{path: sp.secretFile, value: sp.secret})
	}
	if err := p.checkKeys(file.Defaults); err != nil {
		return nil, fleetError(path, fleetKeyDefaults, err)
	}
	if _, ok := file.Defaults[fleetKeyName]; ok {
		return nil, fleetError(path, fleetKeyDefaults, errors.New("name: each source has its own name"))
	}

	sources := make([]Source, 0, len(file.Sources))
	names := map[string]int{}
	slots := map[string]string{}
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
		if err := p.checkKeys(settings); err != nil {
			return nil, fleetError(path, where, err)
		}
		cfg, canon, err := p.sourceConfig(settings, &reads)
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
		sources = append(sources, Source{Name: name, Config: cfg, settings: canon})
	}
	reserved := &reservedTopics{}
	reserved.set(sources)
	for _, s := range sources {
		s.Config.ReservedTopic = reserved.has
	}
	fc := &File{Sources: sources, Spread: sp, digest: fleetDigest(b, reads)}
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
func (p *Parser) checkKeys(settings map[string]any) error {
	allowed := p.Keys
	for _, k := range sortedKeys(settings) {
		switch {
		case allowed[k] || k == fleetKeyName:
		case slices.Contains(p.Process, k):
			return fmt.Errorf("%s: a setting of the process, not of a source: give it to relay run (--%s or %s)", k, k, p.Env(k))
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
// parsing them as relay run's flags (p.Parse), so a fleet file and the
// command line can never mean different things. It returns the settings'
// canonical form too. The secrets the file gives as KEY-file are read
// here, each added to reads.
func (p *Parser) sourceConfig(settings map[string]any, reads *[]fileRead) (*relay.Config, string, error) {
	var args []string
	for _, k := range sortedKeys(settings) {
		flag := k
		if base, ok := strings.CutSuffix(k, FileSuffix); ok && slices.Contains(p.Secrets, base) {
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
	cfg, err := p.Parse(args)
	if err != nil {
		return nil, "", err
	}
	return cfg, strings.Join(args, "\x00"), nil
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
// (Two names of one host, an address and a DNS name, are not told apart
// here, without a connection: SameServerSlots tells them apart once the
// sources' status is read.)
func slotIdentity(cfg *relay.Config) string {
	if pg, err := pgconn.ParseConfig(cfg.DatabaseURL); err == nil {
		return fmt.Sprintf("%s:%d\x00%s", pg.Host, pg.Port, cfg.Slot)
	}
	return cfg.DatabaseURL + "\x00" + cfg.Slot
}

// SameServerSlots adds a problem to the status of each source whose slot
// is also another source's slot on the same server, told by the server's
// system identifier in the slot's state row: two names of one host (an
// address and a DNS name) that the file's check by host and port lets
// through. statuses[i] is sources[i]'s, nil when it could not be read.
// It returns the problems added, each after its source's name.
func SameServerSlots(sources []Source, statuses []*relaytype.SlotStatus) []string {
	var added []string
	first := map[string]int{}
	for i, st := range statuses {
		if st == nil || st.State == nil || st.ForeignSlot != "" {
			continue
		}
		key := st.State.SystemIdentifier + "\x00" + st.Slot
		j, dup := first[key]
		if !dup {
			first[key] = i
			continue
		}
		for _, pair := range [][2]int{{i, j}, {j, i}} {
			problem := fmt.Sprintf("slot %q is also the slot of source %s on the same server (system identifier %s; two names of one host?): give each source a slot name of its own",
				st.Slot, sources[pair[1]].Name, st.State.SystemIdentifier)
			statuses[pair[0]].Problems = append(statuses[pair[0]].Problems, problem)
			added = append(added, sources[pair[0]].Name+" ("+problem+")")
		}
	}
	return added
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
