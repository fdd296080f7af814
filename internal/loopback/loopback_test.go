package loopback

import "testing"

func TestLoopback(t *testing.T) {
	for _, c := range []struct {
		in         string
		host, addr bool
	}{
		{"localhost", true, true},
		{"LOCALHOST.", true, true},
		{"127.0.0.1", true, true},
		{"127.8.9.10", true, true},
		{"::1", true, true},
		{"::ffff:127.0.0.1", true, true},
		{"", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"10.0.0.1", false, false},
		{"example.com", false, false},
		{"127.0.0.1:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:0", false, true},
		{":8080", false, false},
		{"0.0.0.0:8080", false, false},
	} {
		if got := Host(c.in); got != c.host {
			t.Errorf("Host(%q) = %v, want %v", c.in, got, c.host)
		}
		if got := Addr(c.in); got != c.addr {
			t.Errorf("Addr(%q) = %v, want %v", c.in, got, c.addr)
		}
	}
	for raw, want := range map[string]bool{
		"http://127.0.0.1:8080": true,
		"http://localhost":      true,
		"https://[::1]/herd":    true,
		"https://herd.example":  false,
		"https://10.1.2.3":      false,
		"not a url":             false,
		"":                      false,
		"http://%zz":            false,
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %v, want %v", raw, got, want)
		}
	}
}
