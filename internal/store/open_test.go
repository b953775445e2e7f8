package store

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A PostgreSQL URL that is wrong, or a server that is not there, is an
// error saying what was wrong and how to fix it, never showing the password.
func TestOpenPostgresErrors(t *testing.T) {
	const pw = "s3cr3t-pw-9f8e"
	// A port with nothing listening: taken and released.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	good := pg.Database(t)
	wrongDB := strings.Replace(good, "/t_", "/nothere_", 1)
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:" + pw + "@host/db?sslmode=bogus", "not valid"},
		{"postgresql://u:" + pw + "@%zz/db", "does not parse"},
		{"postgres://u:" + pw + "@" + closed + "/db?sslmode=disable&connect_timeout=5", "cannot connect to PostgreSQL"},
		{"postgres://u@" + closed + "/db?sslmode=disable&password=" + pw, "cannot connect to PostgreSQL"},
		{wrongDB, `database "nothere_`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := Open(ctx, c.dsn)
		cancel()
		if err == nil {
			st.Close()
			t.Errorf("Open(%s) worked", Redact(c.dsn))
			continue
		}
		msg := err.Error()
		t.Log(msg)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, pw) {
			t.Errorf("Open(%s): %q; want it to say %q and never show the password", Redact(c.dsn), msg, c.want)
		}
		if !strings.Contains(msg, "postgres://") && !strings.Contains(msg, "postgresql://") {
			t.Errorf("Open(%s): %q does not say which URL", Redact(c.dsn), msg)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=require": "postgres://u:xxxxx@h:5432/db?sslmode=require",
		"postgres://u@h/db?password=pw":             "postgres://u@h/db?password=xxxxx",
		"postgresql://u:p%40w@h/db":                 "postgresql://u:xxxxx@h/db",
		"/var/lib/withruntime/runtime.db":           "/var/lib/withruntime/runtime.db",
		"postgres://u:pw@%zz/db":                    "postgres://(unparsable URL)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
