package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLSFiles are the PEM files TLSServer wrote, all in one temp dir: a
// private CA, the server's certificate (for 127.0.0.1 and localhost) and a
// client certificate, each signed by the CA.
type TLSFiles struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// TLSSrv is a redis-server that listens for TLS only, on 127.0.0.1, and
// requires a client certificate signed by its CA (tls-auth-clients yes,
// Redis's default).
type TLSSrv struct {
	*Srv
	Files TLSFiles
	// Config is a client TLS config that trusts the CA and presents the
	// client certificate. Clone it before changing it.
	Config *tls.Config
}

// TLSServer generates a CA, a server and a client certificate with
// crypto/x509 (nothing is checked in), writes them as PEM files to a temp
// dir, and starts a redis-server with tls-port on a free loopback port and
// no plain port. It stops in t.Cleanup and skips t where redis-server is
// missing (see Require). Addr is the TLS address.
func TLSServer(t testing.TB, opts ...Option) *TLSSrv {
	t.Helper()
	Require(t)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dir := t.TempDir()
	files, err := writeTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ClientTLSConfig(files.CA, files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSrvArgs(dir, false, cfg, func(port int) ([]string, error) {
		args := serverArgs(dir, port, false, nil)
		args = append(args,
			"--port", "0", // after serverArgs' --port: the last one wins
			"--tls-port", fmt.Sprint(port),
			"--tls-cert-file", files.ServerCert,
			"--tls-key-file", files.ServerKey,
			"--tls-ca-cert-file", files.CA,
			"--tls-auth-clients", "yes",
		)
		return append(args, o.args...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cleanup(t) })
	return &TLSSrv{Srv: s, Files: files, Config: cfg}
}

// Client returns a go-redis client over TLS with the client certificate,
// closed in t.Cleanup.
func (s *TLSSrv) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: s.Config.Clone()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientTLSConfig builds a client TLS config that trusts the CA in caFile
// and, when certFile is set, presents that certificate.
func ClientTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("redistest: no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// writeTLSFiles generates the CA and both leaf certificates into dir.
func writeTLSFiles(dir string) (TLSFiles, error) {
	f := TLSFiles{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if err := leaf(2, "redistest server", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	if err := leaf(3, "redistest client", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey); err != nil {
		return f, err
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
