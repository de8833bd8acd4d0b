package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// SecureNATS is an embedded nats-server with JetStream that speaks only
// TLS, requires a client certificate of its own throwaway CA, and
// authenticates users by JWT (operator mode): what a production NATS
// asks of the relay. The files are PEM (CAFile, CertFile, KeyFile) and a
// NATS credentials file (CredsFile), in a temporary directory.
type SecureNATS struct {
	// URL is the client URL ("nats://127.0.0.1:port"; TLS is required).
	URL string
	// CAFile is the CA that signed the server's and the client's
	// certificates; CertFile and KeyFile are the client's.
	CAFile, CertFile, KeyFile string
	// CredsFile is a user's credentials file (its JWT and NKey seed);
	// OtherCredsFile is one of a user of an account the server does not
	// know.
	CredsFile, OtherCredsFile string
	// Secrets are the strings of the credentials files that must never
	// be printed: the user JWTs and seeds.
	Secrets []string
}

// NewSecureNATS starts a SecureNATS for t, stopped when t ends.
func NewSecureNATS(t testing.TB) *SecureNATS {
	t.Helper()
	dir := t.TempDir()
	n := &SecureNATS{}
	serverTLS := n.writePKI(t, dir)
	op, sys, accounts := n.writeCreds(t, dir)
	resolver := &server.MemAccResolver{}
	for pub, claims := range accounts {
		if err := resolver.Store(pub, claims); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "pgoutbox-test-secure",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   filepath.Join(dir, "js"),
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
		TLS:        true,
		TLSVerify:  true,
		TLSConfig:  serverTLS,
		// Operator mode: the server trusts op and resolves accounts from
		// memory.
		TrustedOperators:   []*jwt.OperatorClaims{op},
		AccountResolver:    resolver,
		SystemAccount:      sys,
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	})
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats: server not ready within 30s")
	}
	n.URL = srv.ClientURL()
	return n
}

// JetStream connects an independent client with the client certificate
// and the user's credentials, closed when t ends.
func (n *SecureNATS) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	return connectJetStream(t, n.URL, nats.RootCAs(n.CAFile), nats.ClientCert(n.CertFile, n.KeyFile), nats.UserCredentials(n.CredsFile))
}

// writePKI writes a CA and a client certificate signed by it to dir, and
// returns the server's configuration: a certificate for 127.0.0.1 of the
// same CA, and a client certificate of it required.
func (n *SecureNATS) writePKI(t testing.TB, dir string) *tls.Config {
	t.Helper()
	p := NewPKI(t, dir)
	n.CAFile, n.CertFile, n.KeyFile = p.CAFile, p.CertFile, p.KeyFile
	return p.ServerTLS
}

// issue makes a key and a certificate of tmpl for it, signed by parent's
// key (self-signed when parent is nil), valid for an hour around now.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

// writePEM writes der as a PEM block of kind to dir/name and returns the
// path.
func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCreds makes an operator, its system account, an account with
// JetStream and a user of it, and a user of an account the server does
// not know, writes the users' credentials files to dir, and returns the
// operator, the system account's public key and the JWT of each account
// the server knows by public key.
func (n *SecureNATS) writeCreds(t testing.TB, dir string) (*jwt.OperatorClaims, string, map[string]string) {
	t.Helper()
	opKP, opPub := nkey(t, nkeys.CreateOperator)
	accounts := map[string]string{}
	account := func(js bool) (nkeys.KeyPair, string, string) {
		kp, pub := nkey(t, nkeys.CreateAccount)
		ac := jwt.NewAccountClaims(pub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		s, err := ac.Encode(opKP)
		if err != nil {
			t.Fatal(err)
		}
		return kp, pub, s
	}
	_, sysPub, sysJWT := account(false)
	acctKP, acctPub, acctJWT := account(true)
	otherKP, _, _ := account(true) // never given to the server
	accounts[sysPub], accounts[acctPub] = sysJWT, acctJWT
	op := jwt.NewOperatorClaims(opPub)
	op.SystemAccount = sysPub
	opJWT, err := op.Encode(opKP)
	if err != nil {
		t.Fatal(err)
	}
	if op, err = jwt.DecodeOperatorClaims(opJWT); err != nil {
		t.Fatal(err)
	}
	n.CredsFile = n.userCreds(t, dir, "relay.creds", acctKP)
	n.OtherCredsFile = n.userCreds(t, dir, "stranger.creds", otherKP)
	return op, sysPub, accounts
}

// userCreds writes the credentials file of a new user of the account
// whose key is acct to dir/name.
func (n *SecureNATS) userCreds(t testing.TB, dir, name string, acct nkeys.KeyPair) string {
	t.Helper()
	kp, pub := nkey(t, nkeys.CreateUser)
	uc := jwt.NewUserClaims(pub)
	userJWT, err := uc.Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	n.Secrets = append(n.Secrets, userJWT, string(seed))
	return p
}

// nkey makes a key pair with create and returns it and its public key.
func nkey(t testing.TB, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}
