package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// account is a user of the sandbox as read from /etc/passwd.
type account struct {
	Name   string
	Uid    int
	Gid    int
	Groups []uint32 // supplementary groups, including Gid
	Home   string
}

// defaultUserName is the name an ExecRequest uses for the sandbox's
// unprivileged user; the agent maps it to Config.User.
const defaultUserName = "user"

// fallbackUid is the uid/gid assumed for "user" when the sandbox image has no
// such entry in /etc/passwd (the protocol promises uid 1000).
const fallbackUid = 1000

// rootUserName is the name an ExecRequest uses to run as root.
const rootUserName = "root"

// lookupAccount resolves name from the sandbox's /etc/passwd and
// /etc/group: "" or "user" mean the configured default user, "root" root.
// No other name is accepted, whatever accounts the sandbox's image has: a
// caller runs commands as the documented users only. The files are
// checked on every call (a template or a command may change the accounts
// after the agent starts) and read again when they changed (fileCache).
func (s *Server) lookupAccount(name string) (account, error) {
	switch name {
	case "", defaultUserName:
		name = s.cfg.User
	case rootUserName:
	default:
		return account{}, badRequest("user %q is not allowed; use %q (the default, the sandbox's unprivileged user) or %q", abbrev(name, 64), defaultUserName, rootUserName)
	}
	passwd, err := s.passwdFile.get()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return account{}, fmt.Errorf("read %s: %w", s.passwdFile.path, err)
	}
	acct, found := findPasswd(passwd, name)
	if !found {
		switch name {
		case rootUserName:
			acct = account{Name: rootUserName, Uid: 0, Gid: 0, Home: "/root"}
		case defaultUserName:
			acct = account{Name: name, Uid: fallbackUid, Gid: fallbackUid, Home: "/home/" + name}
		default:
			return account{}, fmt.Errorf("the sandbox user %q (agent --user) is not in %s", name, s.passwdFile.path)
		}
	}
	group, _ := s.groupFile.get() // missing or unreadable: just the primary group
	acct.Groups = findGroups(group, acct.Name, acct.Gid)
	return acct, nil
}

// findPasswd finds name in the bytes of a passwd(5) file.
func findPasswd(data []byte, name string) (account, bool) {
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) < 7 || fields[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(fields[2])
		gid, err2 := strconv.Atoi(fields[3])
		if err1 != nil || err2 != nil {
			continue
		}
		home := fields[5]
		if home == "" {
			home = filepath.Join("/home", name)
		}
		return account{Name: name, Uid: uid, Gid: gid, Home: home}, true
	}
	return account{}, false
}

// findGroups returns gid plus every group in the bytes of a group(5) file
// that lists name as a member.
func findGroups(data []byte, name string, gid int) []uint32 {
	groups := []uint32{uint32(gid)}
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) < 4 {
			continue
		}
		g, err := strconv.Atoi(fields[2])
		if err != nil || g == gid {
			continue
		}
		for m := range strings.SplitSeq(fields[3], ",") {
			if strings.TrimSpace(m) == name {
				groups = append(groups, uint32(g))
				break
			}
		}
	}
	return groups
}

// credential is the SysProcAttr credential that runs a child as acct, or nil
// when the agent already is that user (a non-root agent cannot setgroups).
func (a account) credential() *syscall.Credential {
	if os.Getuid() != 0 && a.Uid == os.Getuid() && a.Gid == os.Getgid() {
		return nil
	}
	return &syscall.Credential{Uid: uint32(a.Uid), Gid: uint32(a.Gid), Groups: a.Groups}
}

// defaultPath is PATH for commands unless the sandbox environment sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// withUserBin puts HOME/.local/bin first in path, as Debian's ~/.profile
// does for a login shell: where `pip install --user` and `npm install -g
// --prefix ~/.local` put commands, so that they run by name.
func withUserBin(path, home string) string {
	if home == "" || home == "/" {
		return path
	}
	bin := filepath.Join(home, ".local", "bin")
	if slices.Contains(filepath.SplitList(path), bin) {
		return path
	}
	return bin + string(filepath.ListSeparator) + path
}

// commandEnv builds a command's environment. Precedence, lowest first:
// PATH/LANG/PYTHONUNBUFFERED defaults; the agent's own environment (which is
// the sandbox's environment, set by the host); HOME/USER/LOGNAME of the user
// the command runs as, and HOME/.local/bin first in PATH; the request's env.
func commandEnv(base []string, acct account, extra map[string]string) []string {
	env := map[string]string{
		"PATH":             defaultPath,
		"LANG":             "C.UTF-8",
		"PYTHONUNBUFFERED": "1",
	}
	var order []string
	order = append(order, "PATH", "LANG", "PYTHONUNBUFFERED")
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		set(k, v)
	}
	set("HOME", acct.Home)
	set("USER", acct.Name)
	set("LOGNAME", acct.Name)
	set("PATH", withUserBin(env["PATH"], acct.Home))
	for k, v := range extra {
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}

// lookPath finds prog in the PATH of env (not the agent's PATH), as execvp
// would. A name with a slash is returned unchanged (resolved against cwd).
func lookPath(prog string, env []string, cwd string) (string, error) {
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for dir := range strings.SplitSeq(path, ":") {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, prog)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", badRequest("program %q was not found in PATH (%s); install it, give its absolute path, or use \"command\" to run it through the shell", prog, path)
}

// checkExecutable reports why p cannot be executed, or nil.
func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return badRequest("program %s does not exist; check the path", p)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return badRequest("program %s is not an executable file; check the path or chmod +x it", p)
	}
	return nil
}

// canEnter reports whether acct may enter directory dir: search (x)
// permission on every directory from / down to it, by the owner, group
// and other bits as the kernel checks them (root always may). A kernel
// started in a directory its user cannot enter fails with a bare
// "permission denied" (a context with cwd /root as "user"); this says why
// first.
func canEnter(dir string, acct account) bool {
	if acct.Uid == 0 {
		return true
	}
	dirs := []string{"/"}
	p := "/"
	for _, part := range strings.Split(strings.Trim(filepath.Clean(dir), "/"), "/") {
		if part != "" {
			p = filepath.Join(p, part)
			dirs = append(dirs, p)
		}
	}
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		var bit os.FileMode
		switch {
		case int(sys.Uid) == acct.Uid:
			bit = 0o100
		case slices.Contains(acct.Groups, sys.Gid) || int(sys.Gid) == acct.Gid:
			bit = 0o010
		default:
			bit = 0o001
		}
		if st.Mode().Perm()&bit == 0 {
			return false
		}
	}
	return true
}
