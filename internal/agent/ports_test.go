package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// TestPortConnect: POST /ports/{port}/connect turns the agent's connection
// into a TCP connection to the port on loopback, half closes included;
// a closed port is 502 port_closed, a bad port or a missing Upgrade 400.
func TestPortConnect(t *testing.T) {
	a := newTestAgent(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		data, _ := io.ReadAll(c) // until the client's half close
		fmt.Fprintf(c, "got %d bytes", len(data))
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	connect := func(path string, upgrade bool) (net.Conn, *bufio.Reader, *http.Response) {
		t.Helper()
		c, err := net.Dial("unix", a.socket)
		if err != nil {
			t.Fatal(err)
		}
		up := ""
		if upgrade {
			up = "Connection: Upgrade\r\nUpgrade: " + agentapi.PortUpgrade + "\r\n"
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: agent\r\n%sContent-Length: 0\r\n\r\n", path, up)
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c, br, resp
	}

	c, br, resp := connect(fmt.Sprintf("/ports/%d/connect", port), true)
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != agentapi.PortUpgrade {
		t.Fatalf("connect: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := c.Write(make([]byte, 100000)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.UnixConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "got 100000 bytes" {
		t.Errorf("through the relayed connection: %q %v", got, err)
	}
	c.Close()

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	for _, tc := range []struct {
		path    string
		upgrade bool
		status  int
	}{
		{fmt.Sprintf("/ports/%d/connect", closedPort), true, http.StatusBadGateway},
		{"/ports/0/connect", true, http.StatusBadRequest},
		{"/ports/65536/connect", true, http.StatusBadRequest},
		{"/ports/080/connect", true, http.StatusBadRequest},
		{fmt.Sprintf("/ports/%d/connect", port), false, http.StatusBadRequest},
	} {
		c, _, resp := connect(tc.path, tc.upgrade)
		c.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s (upgrade %v): %d, want %d", tc.path, tc.upgrade, resp.StatusCode, tc.status)
		}
	}
}
