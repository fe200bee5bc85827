package sensitive

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

var key = []byte("-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n")

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

func TestRedactSecret(t *testing.T) {
	s := &tlsv3.Secret{Name: "s", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline([]byte("CHAIN")),
		PrivateKey:       inline(key),
		Password:         &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/pw"}},
	}}}
	orig := proto.Clone(s)
	out, changed := Redact(s)
	if !changed || !proto.Equal(s, orig) {
		t.Fatalf("changed %v; the input was modified: %v", changed, !proto.Equal(s, orig))
	}
	tc := out.(*tlsv3.Secret).GetTlsCertificate()
	if tc.GetPrivateKey().GetInlineString() != Redacted || string(tc.GetCertificateChain().GetInlineBytes()) != "CHAIN" ||
		tc.GetPassword().GetFilename() != "/etc/pw" {
		t.Fatalf("redacted = %v", out)
	}
	if b, _ := proto.Marshal(out); bytes.Contains(b, []byte("SECRET")) {
		t.Fatal("the key survived")
	}
}

func TestRedactInsideAny(t *testing.T) {
	ctx, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline([]byte("CHAIN")), PrivateKey: inline(key)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{
		TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}},
	}}}
	out, changed := Redact(l)
	b, _ := proto.Marshal(out)
	if !changed || bytes.Contains(b, []byte("SECRET")) || !bytes.Contains(b, []byte("CHAIN")) {
		t.Fatalf("changed %v, key left %v", changed, bytes.Contains(b, []byte("SECRET")))
	}
	plain := &listenerv3.Listener{Name: "p"}
	if out, changed := Redact(plain); changed || out != proto.Message(plain) {
		t.Fatal("a listener without secrets was changed")
	}
}
