package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"testing"
)

// PKI is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and a client certificate, all signed by it, as PEM files in a
// directory: what a TLS test server and its client need.
type PKI struct {
	// CAFile is the CA's certificate.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key.
	CertFile, KeyFile string
	// ServerCertFile and ServerKeyFile are the server's (127.0.0.1).
	ServerCertFile, ServerKeyFile string
	// ServerTLS is the server's configuration: its certificate, and a
	// client certificate of the CA required.
	ServerTLS *tls.Config
}

// NewPKI writes a PKI to dir.
func NewPKI(t testing.TB, dir string) *PKI {
	t.Helper()
	caKey, caDER := issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "pgoutbox test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvDER := issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	cliKey, cliDER := issue(t, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "pgoutbox-relay"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	p := &PKI{CAFile: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	p.CertFile = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	p.ServerCertFile = writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	for _, k := range []struct {
		name string
		path *string
		key  any
	}{{"client-key.pem", &p.KeyFile, cliKey}, {"server-key.pem", &p.ServerKeyFile, srvKey}} {
		der, err := x509.MarshalPKCS8PrivateKey(k.key)
		if err != nil {
			t.Fatal(err)
		}
		*k.path = writePEM(t, dir, k.name, "PRIVATE KEY", der)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	p.ServerTLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
		ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	return p
}

// ClientTLS is the TLS configuration of a client of p: its CA as the only
// root, and the client certificate when withCert.
func (p *PKI) ClientTLS(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", p.CAFile)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}
