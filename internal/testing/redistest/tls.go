package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a certificate authority made for one test, with a server
// certificate for 127.0.0.1 and localhost and a client certificate, both
// signed by it. Each field is the path of a PEM file in the test's
// temporary directory.
type PKI struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewPKI generates a PKI with crypto/x509, valid for an hour.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	p := PKI{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
	}
	caKey := newKey(t)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "locksmith test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	writeCert(t, p.CA, ca, ca, &caKey.PublicKey, caKey)
	for i, leaf := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{
		{p.ServerCert, p.ServerKey, x509.ExtKeyUsageServerAuth},
		{p.ClientCert, p.ClientKey, x509.ExtKeyUsageClientAuth},
	} {
		key := newKey(t)
		writeCert(t, leaf.cert, &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: "localhost"},
			DNSNames:     []string{"localhost"},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore:    time.Now().Add(-time.Minute),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{leaf.usage},
		}, ca, &key.PublicKey, caKey) // the template names the issuer as the certificate does
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatalf("marshal a key: %v", err)
		}
		writePEM(t, leaf.key, "EC PRIVATE KEY", der)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate a key: %v", err)
	}
	return key
}

func writeCert(t testing.TB, path string, cert, parent *x509.Certificate, pub, priv any) {
	der, err := x509.CreateCertificate(rand.Reader, cert, parent, pub, priv)
	if err != nil {
		t.Fatalf("create a certificate: %v", err)
	}
	writePEM(t, path, "CERTIFICATE", der)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// StartTLS starts a server that speaks TLS only (--port 0, --tls-port),
// with p's server certificate, and that requires clients to present a
// certificate signed by p's CA. It stops when t ends. Its Command speaks
// TLS with p's client certificate.
func StartTLS(t testing.TB, p PKI) *Server {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatalf("load the client certificate: %v", err)
	}
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(p.CA); err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("load the CA certificate: %v", err)
	}
	client := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return startWith(t, "redis-server with TLS", func(s *Server) []string {
		s.tls = client
		return append(s.baseArgs("--tls-port"), "--port", "0",
			"--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey,
			"--tls-ca-cert-file", p.CA, "--tls-auth-clients", "yes")
	})
}
