package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address local (127.0.0.2 and so on: all of 127/8 is this host's).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, MaxIdleConnsPerHost: 16,
	}}
}

// post sends a JSON body (nil: none) with extra headers (name, value...)
// and gives the status, the Retry-After header and the body.
func post(t *testing.T, c *http.Client, url string, body any, headers ...string) (int, string, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest("POST", url, rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), data
}

// TestDeviceLoginFloodFromOneAddress is issue 25's N10, with no key: a
// thousand device authorizations from one address (before: 200 of them
// made every real `withruntime login` and `--trial` answer 503 for ten
// minutes, renewable for ever). Now the address gets its share and then
// 429 rate_limited with Retry-After, a forged X-Forwarded-For changes
// nothing (no proxy is trusted), and a login from another address goes
// through: authorized, approved, key handed out. A network's addresses
// together get a larger share; another network is not touched by it.
func TestDeviceLoginFloodFromOneAddress(t *testing.T) {
	srv, addr, _ := openLoggedServer(t)
	base := "http://" + addr
	flood := clientFrom("127.0.0.2")

	const n = 1000
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range 8 {
		wg.Go(func() {
			for sent.Add(1) <= n {
				status, retry, data := post(t, flood, base+"/v1/device/authorize", api.DeviceAuthorizeRequest{ClientName: "flood"})
				mu.Lock()
				statuses[status]++
				mu.Unlock()
				if status == http.StatusTooManyRequests && (retry == "" || !strings.Contains(string(data), `"rate_limited"`) ||
					!strings.Contains(string(data), "per-address limit") || !strings.Contains(string(data), "127.0.0.2")) {
					t.Errorf("a refused authorization: Retry-After %q, %s", retry, data)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("1,000 authorizations from 127.0.0.2: %v", statuses)
	if statuses[http.StatusOK] != 10 || statuses[http.StatusTooManyRequests] != n-10 {
		t.Errorf("answers to 1,000 authorizations from one address: %v; want 10 200s and the rest 429", statuses)
	}
	// The header is the client's word, and no proxy is trusted.
	if status, _, data := post(t, flood, base+"/v1/device/authorize", nil, "X-Forwarded-For", "192.0.2.77"); status != http.StatusTooManyRequests {
		t.Errorf("127.0.0.2 with a forged X-Forwarded-For: %d %s, want 429", status, data)
	}

	// Another address logs in.
	other := clientFrom("127.0.0.3")
	status, _, data := post(t, other, base+"/v1/device/authorize", api.DeviceAuthorizeRequest{ClientName: "alice@laptop"})
	if status != http.StatusOK {
		t.Fatalf("authorize from 127.0.0.3 after the flood: %d %s", status, data)
	}
	var g api.DeviceAuthorization
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if status, _, data := post(t, http.DefaultClient, base+"/v1/device/approve",
		api.DeviceApproveRequest{UserCode: g.UserCode, KeyName: "alice", DailyLimitMicros: 1_000_000},
		"Authorization", "Bearer "+srv.LocalKey); status != http.StatusNoContent {
		t.Fatalf("approve: %d %s", status, data)
	}
	status, _, data = post(t, other, base+"/v1/device/token", api.DeviceTokenRequest{DeviceCode: g.DeviceCode})
	var tok api.DeviceToken
	if status != http.StatusOK || json.Unmarshal(data, &tok) != nil || !strings.HasPrefix(tok.APIKey, "wr_") {
		t.Fatalf("token from 127.0.0.3: %d %s", status, data)
	}

	// 127.0.0.0/24 is one network: its addresses together start at most
	// 50 (.2 has 10, .3 one, .4 to .7 ten each: 51 asked), and
	// 127.0.1.0/24 is another.
	got := 0
	for host := 4; host <= 7; host++ {
		c := clientFrom(fmt.Sprintf("127.0.0.%d", host))
		for range 10 {
			if status, _, _ := post(t, c, base+"/v1/device/authorize", nil); status == http.StatusOK {
				got++
			}
		}
	}
	if got != 39 {
		t.Errorf("127.0.0.4-7 got %d logins, want 39 (the /24's 50 less the 11 of .2 and .3)", got)
	}
	if status, _, data := post(t, clientFrom("127.0.0.8"), base+"/v1/device/authorize", nil); status != http.StatusTooManyRequests ||
		!strings.Contains(string(data), "per-network limit") || !strings.Contains(string(data), "127.0.0.0/24") {
		t.Errorf("a fresh address of a full network: %d %s, want 429 naming the per-network limit", status, data)
	}
	if status, _, data := post(t, clientFrom("127.0.1.2"), base+"/v1/device/authorize", nil); status != http.StatusOK {
		t.Errorf("another network: %d %s", status, data)
	}
}
