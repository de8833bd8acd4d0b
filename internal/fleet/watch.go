package fleet

import (
	"crypto/sha256"
	"fmt"
	"os"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
)

// fileRead is a secret file a fleet file names and what was read from it.
type fileRead struct {
	path, value string
}

// fleetDigest is the SHA-256 of a fleet file's content and of the secrets
// read from its secret files, in the order read.
func fleetDigest(file []byte, reads []fileRead) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00", len(file))
	h.Write(file)
	for _, r := range reads {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%s", len(r.path), r.path, len(r.value), r.value)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// currentDigest is the digest the fleet file at path and the secret files
// it named at the last load have now: as loadFleet computes it, with an
// unreadable secret file counted by its error.
func currentDigest(path string, secrets []string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	reads := make([]fileRead, 0, len(secrets))
	for _, p := range secrets {
		v, err := cliutil.ReadSecretFile(p)
		if err != nil {
			v = "\x01" + err.Error()
		}
		reads = append(reads, fileRead{path: p, value: v})
	}
	return fleetDigest(b, reads), nil
}

// fileWatch tells when a fleet file or one of its secret files changed
// and has settled: a change is reported once two polls in a row read the
// same new content, so a file written in place, caught half-written, is
// not applied (a file renamed into place, as the kubelet does, is whole
// at once and waits one poll).
type fileWatch struct {
	path    string
	secrets []string
	seen    [sha256.Size]byte
	pending *[sha256.Size]byte
}

// loaded records what the last load read.
func (w *fileWatch) loaded(fc *File) {
	w.secrets, w.seen, w.pending = fc.secrets, fc.digest, nil
}

// poll reports whether the files changed and read the same at the last
// two polls. The change it reports is then taken as seen, whether or not
// the reload that follows succeeds, so a file that does not load is
// refused once, not at every poll.
func (w *fileWatch) poll() bool {
	d, err := currentDigest(w.path, w.secrets)
	if err != nil || d == w.seen {
		w.pending = nil
		return false
	}
	if w.pending == nil || *w.pending != d {
		w.pending = &d
		return false
	}
	w.seen, w.pending = d, nil
	return true
}
