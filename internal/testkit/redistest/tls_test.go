package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestTLSServer(t *testing.T) {
	s := TLSServer(t)
	ctx := context.Background()
	if got, err := s.Client(t).Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS with the client certificate: got %q, %v", got, err)
	}
	if got := s.Client(t).ConfigGet(ctx, "port").Val()["port"]; got != "0" {
		t.Fatalf("plain port: exp 0 (TLS only), got %q", got)
	}

	try := func(cfg *tls.Config) error {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: cfg, MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
	// tls-auth-clients yes: a client that trusts the CA but has no
	// certificate is refused.
	noCert, err := ClientTLSConfig(s.Files.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := try(noCert); err == nil {
		t.Fatal("PING without a client certificate: exp a refusal, got none")
	} else {
		t.Logf("without a client certificate: %v", err)
	}
	// A client that does not trust the private CA refuses the server.
	if err := try(&tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("PING without the CA: exp an unknown-authority error, got none")
	} else {
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) {
			t.Fatalf("PING without the CA: exp x509.UnknownAuthorityError, got %v", err)
		}
	}
	// Plain RESP at the TLS port gets no reply.
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("plain PING at the TLS port: exp an error, got none")
	} else {
		t.Logf("plain RESP at the TLS port: %v", err)
	}
}
