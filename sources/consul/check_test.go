package consul

import "testing"

func TestCheckAddress(t *testing.T) {
	cases := []struct {
		addr, scheme string
		ok           bool
	}{
		{"127.0.0.1:8500", "http", true},
		{"[::1]:8500", "http", true},
		{"https://consul.example.org:8501", "https", true},
		{"unix:///var/run/consul.sock", "http", true},
		{"http://[::1", "http", false},
		{"unix://", "http", false},
		{"ftp://consul:21", "http", false},
		{"http://", "http", false},
	}
	for _, c := range cases {
		if err := checkAddress(c.addr, c.scheme); (err == nil) != c.ok {
			t.Errorf("checkAddress(%q) = %v, want ok=%t", c.addr, err, c.ok)
		}
	}
}
