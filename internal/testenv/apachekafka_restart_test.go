package testenv

import (
	"strings"
	"testing"
)

// A proxied listener adds a listener named PROXIED on its port, advertised
// at the proxy's address, to the configuration and leaves the rest as it
// was.
func TestProxiedListenerProperties(t *testing.T) {
	conf := serverProperties(9092, 9093, "/data")
	got := (&ProxiedListener{Port: 9094, Advertised: "127.0.0.1:7000"}).properties(conf)
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,PROXIED://127.0.0.1:9094\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092,PROXIED://127.0.0.1:7000\n",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT\n",
		"inter.broker.listener.name=PLAINTEXT\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("configuration lacks %q:\n%s", want, got)
		}
	}
	if len(strings.Split(got, "\n")) != len(strings.Split(conf, "\n")) {
		t.Errorf("lines added or lost:\n%s", got)
	}
}
