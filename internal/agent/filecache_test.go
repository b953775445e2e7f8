package agent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// accountServer is a Server whose account files are in a temporary
// directory, with a clock the test sets (now) for both caches.
func accountServer(t *testing.T, passwd, group string) (s *Server, dir string, now *time.Time) {
	t.Helper()
	dir = t.TempDir()
	write(t, filepath.Join(dir, "passwd"), passwd)
	write(t, filepath.Join(dir, "group"), group)
	s, err := New(Config{Workspace: dir, User: "user"})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	now = &clock
	s.passwdFile, s.groupFile = newFileCache(filepath.Join(dir, "passwd")), newFileCache(filepath.Join(dir, "group"))
	s.passwdFile.now = func() time.Time { return *now }
	s.groupFile.now = s.passwdFile.now
	return s, dir, now
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lookupUid(t *testing.T, s *Server, name string) int {
	t.Helper()
	a, err := s.lookupAccount(name)
	if err != nil {
		t.Fatalf("lookup %q: %v", name, err)
	}
	return a.Uid
}

const (
	passwd1000 = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"
	passwd1001 = "root:x:0:0:root:/root:/bin/sh\nuser:x:1001:1001::/home/user:/bin/sh\n" // same size
	groups     = "root:x:0:\nuser:x:1000:\ndocker:x:998:user\n"
)

// A file read long after its last change is kept, and read again only
// when its stat changes: an edit in place of the same size (a new ctime)
// is seen at once, so a cached lookup never gives a stale uid.
func TestAccountCacheSeesAnEditInPlace(t *testing.T) {
	s, dir, now := accountServer(t, passwd1000, groups)
	*now = now.Add(time.Hour) // the files' last change is an hour old
	if got := lookupUid(t, s, "user"); got != 1000 {
		t.Fatalf("uid %d, want 1000", got)
	}
	if got := lookupUid(t, s, ""); got != 1000 {
		t.Fatalf("uid %d, want 1000", got)
	}
	if s.passwdFile.reads != 1 || s.groupFile.reads != 1 {
		t.Fatalf("passwd read %d times, group %d, want once each (cached)", s.passwdFile.reads, s.groupFile.reads)
	}
	a, err := s.lookupAccount("user")
	if err != nil || len(a.Groups) != 2 || a.Groups[1] != 998 {
		t.Fatalf("groups %v (%v), want [1000 998]", a.Groups, err)
	}

	// The same size, written in place (same inode), with mtime set back to
	// what it was: only ctime tells, and it must.
	p := filepath.Join(dir, "passwd")
	var before syscall.Stat_t
	if err := syscall.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // past any timestamp tick
	write(t, p, passwd1001)
	mt := time.Unix(before.Mtim.Unix())
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	if got := lookupUid(t, s, "user"); got != 1001 {
		t.Fatalf("after an edit in place, uid %d, want 1001", got)
	}
	if s.passwdFile.reads != 2 {
		t.Fatalf("passwd read %d times, want 2", s.passwdFile.reads)
	}
}

// A user added after the agent started (useradd writes a new file and
// renames it over /etc/passwd) is found by the next lookup.
func TestAccountCacheSeesAUserAddedLater(t *testing.T) {
	s, dir, now := accountServer(t, "root:x:0:0:root:/root:/bin/sh\n", groups)
	*now = now.Add(time.Hour)
	if got := lookupUid(t, s, "user"); got != fallbackUid { // not in passwd: the protocol's default
		t.Fatalf("uid %d, want %d", got, fallbackUid)
	}
	tmp := filepath.Join(dir, "passwd+")
	write(t, tmp, "root:x:0:0:root:/root:/bin/sh\nuser:x:1234:1234::/home/user:/bin/sh\n")
	if err := os.Rename(tmp, filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	if got := lookupUid(t, s, "user"); got != 1234 {
		t.Fatalf("after useradd, uid %d, want 1234", got)
	}
}

// A file changed just before it was read is not kept (a change in the same
// timestamp tick could leave its stat equal): each lookup reads it again
// until its last change is racyWindow old.
func TestAccountCacheDoesNotKeepARacyRead(t *testing.T) {
	s, _, now := accountServer(t, passwd1000, groups)
	lookupUid(t, s, "user")
	lookupUid(t, s, "user")
	if s.passwdFile.reads != 2 {
		t.Fatalf("a file changed %v ago was read %d times in two lookups, want 2", time.Since(*now), s.passwdFile.reads)
	}
	*now = now.Add(racyWindow)
	lookupUid(t, s, "user")
	lookupUid(t, s, "user")
	if s.passwdFile.reads != 3 {
		t.Fatalf("read %d times, want 3 (kept once its change was racyWindow old)", s.passwdFile.reads)
	}
}

// A missing passwd gives the protocol's defaults; a FIFO at its path (root
// inside could make one) is refused at once instead of hanging the agent.
func TestAccountCacheMissingAndNotRegular(t *testing.T) {
	s, dir, _ := accountServer(t, passwd1000, groups)
	p := filepath.Join(dir, "passwd")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if got := lookupUid(t, s, "root"); got != 0 {
		t.Fatalf("root uid %d with no passwd, want 0", got)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.lookupAccount("user"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO as passwd was accepted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("lookup hangs on a FIFO as passwd")
	}
}
