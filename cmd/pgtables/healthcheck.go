package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck asks the server configured by cfg (usually the one running
// in the same container) whether it is ready: it succeeds when /-/ready
// answers 200. It is what a container health check runs, since the image
// has no curl or wget.
func healthcheck(ctx context.Context, cfg *config, stdout io.Writer) error {
	url, err := readyURL(cfg)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 3 * time.Second}
	if cfg.tlsCert != "" {
		// The certificate names the public host, not the loopback address
		// asked here; this checks our own process, not its identity.
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback health check
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 512)).ReadString('\n')
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: %s %s", url, resp.Status, line)
	}
	fmt.Fprint(stdout, line)
	return nil
}

// readyURL is the /-/ready URL of the server listening on cfg.listen,
// reached over loopback when it listens on every address.
func readyURL(cfg *config) (string, error) {
	host, port, err := net.SplitHostPort(cfg.listen)
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.tlsCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/-/ready", nil
}
