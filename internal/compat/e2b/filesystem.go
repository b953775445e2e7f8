package e2b

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
	"withruntime.dev/runtime/internal/store"
)

// filesystemService is envd's filesystem.Filesystem over Runtime's file
// routes. Relative paths start in the user's home, as in envd. The agent
// does the file operations as root and gives new entries to the sandbox
// user, whichever user the request names.
type filesystemService struct{ s *Server }

func (f *filesystemService) stat(ctx context.Context, t target, p string) (*agentapi.FileInfo, error) {
	var fi agentapi.FileInfo
	if err := f.s.api.json(ctx, t.as, "GET", t.base()+"/files/stat?path="+url.QueryEscape(p), nil, &fi); err != nil {
		return nil, rpcError(err)
	}
	return &fi, nil
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	t := targetFrom(ctx)
	fi, err := f.stat(ctx, t, t.abs(req.Msg.GetPath()))
	if err != nil {
		return nil, err
	}
	e := entryInfo(*fi)
	if fi.Type == "symlink" {
		// envd stats a link as what it points to, with the target's
		// absolute path; a dangling link stays a symlink.
		if target, ti, ok := f.follow(ctx, t, *fi); ok {
			te := entryInfo(*ti)
			e.Type, e.Size, e.Mode, e.Permissions, e.SymlinkTarget = te.Type, te.Size, te.Mode, te.Permissions, &target
		}
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: e}), nil
}

// maxLinkHops is how many symlinks follow resolves in a chain (Linux's
// MAXSYMLINKS).
const maxLinkHops = 40

// follow resolves the symlink fi to the file at the end of its chain: its
// absolute path and what it is. ok is false for a dangling link, a loop, or
// a chain longer than maxLinkHops.
func (f *filesystemService) follow(ctx context.Context, t target, fi agentapi.FileInfo) (string, *agentapi.FileInfo, bool) {
	cur := fi
	for range maxLinkHops {
		next := cur.Target
		if !path.IsAbs(next) {
			next = path.Join(path.Dir(cur.Path), next)
		}
		ti, err := f.stat(ctx, t, path.Clean(next))
		if err != nil {
			return "", nil, false
		}
		if ti.Type != "symlink" {
			return path.Clean(next), ti, true
		}
		cur = *ti
	}
	return "", nil, false
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	t := targetFrom(ctx)
	p := t.abs(req.Msg.GetPath())
	if fi, err := f.stat(ctx, t, p); err == nil {
		if fi.Type == "dir" {
			return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("directory "+p+" already exists"))
		}
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New(p+" already exists and is not a directory"))
	}
	var fi agentapi.FileInfo
	began := time.Now()
	if err := f.s.api.json(ctx, t.as, "POST", t.base()+"/files/mkdir", agentapi.MkdirRequest{Path: p, Parents: true}, &fi); err != nil {
		return nil, rpcError(err)
	}
	f.s.fileOps.add(t.id, fileOp{path: p, at: began, last: lastOfMkdir})
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: entryInfo(fi)}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	t := targetFrom(ctx)
	var fi agentapi.FileInfo
	in := agentapi.RenameRequest{From: t.abs(req.Msg.GetSource()), To: t.abs(req.Msg.GetDestination())}
	began := time.Now()
	if err := f.s.api.json(ctx, t.as, "POST", t.base()+"/files/rename", in, &fi); err != nil {
		return nil, rpcError(err)
	}
	f.s.fileOps.add(t.id, fileOp{path: in.From, at: began, last: lastOfRenameFrom},
		fileOp{path: in.To, at: began, last: lastOfRenameTo})
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: entryInfo(fi)}), nil
}

// maxListDepth is the deepest listing Runtime's API gives.
const maxListDepth = agentapi.ListMaxDepth

// maxListDirEntries and maxListDirBytes bound what one listing gathers
// across Runtime's pages: ListDir answers in one message, held whole in the
// server's memory, and the pages come from inside the sandbox (which may be
// hostile: 30,000 entries of 2.5 KB paths made one answer of 88 MB). The
// bytes are an estimate of what the entries hold (their names, paths and
// link targets, and entryOverhead each); they are also booked, three times
// over (the page read, the entries, the answer encoded), against the key's
// bound on request memory while the listing is gathered.
var (
	maxListDirEntries = 250_000
	maxListDirBytes   = int64(32 << 20)
)

// entryOverhead is what one listed entry holds beyond its strings, in bytes
// (the decoded FileInfo, the EntryInfo and its encoding).
const entryOverhead = 256

// entryBytes estimates what one listed entry holds in the server: its
// strings, its metadata (up to 4 KiB a file, which a program inside the
// sandbox may set on every file) twice (decoded, then in the EntryInfo and
// its encoding), and entryOverhead.
func entryBytes(e agentapi.FileInfo) int64 {
	n := int64(len(e.Name)+len(e.Path)+len(e.Target)) + entryOverhead
	for k, v := range e.Metadata {
		n += 2 * int64(len(k)+len(v)+metadataEntryOverhead)
	}
	return n
}

// metadataEntryOverhead is what one metadata pair holds beyond its bytes
// (map entry and string headers), in bytes.
const metadataEntryOverhead = 64

// list calls each for every entry of p's listing to depth, in listing
// order, following Runtime's pages (agentapi.ListMaxLimit entries each)
// until the last. A listing of more than maxListDirEntries entries, or
// pages that do not move forward, end it with an error.
//
// What the listing holds is booked in h (see maxListDirBytes): the caller
// releases it once it no longer holds the entries.
func (f *filesystemService) list(ctx context.Context, t target, p string, depth int, h *held, each func(agentapi.FileInfo)) error {
	q := t.base() + "/files/list?path=" + url.QueryEscape(p) + "&depth=" + strconv.Itoa(depth) +
		"&limit=" + strconv.Itoa(agentapi.ListMaxLimit)
	cursor, last, n, size := "", "", 0, int64(0)
	for {
		var page agentapi.FileList
		if err := f.s.api.json(ctx, t.as, "GET", q+cursor, nil, &page); err != nil {
			return err
		}
		n += len(page.Entries)
		var pageBytes int64
		for _, e := range page.Entries {
			pageBytes += entryBytes(e)
		}
		size += pageBytes
		if n > maxListDirEntries || size > maxListDirBytes {
			return &apiError{Status: http.StatusBadRequest, Code: agentapi.CodeBadRequest,
				Message: fmt.Sprintf("%s holds more than %d entries or %d MiB of names to depth %d, more than one ListDir answers in Runtime; list a subdirectory or a smaller depth", p, maxListDirEntries, maxListDirBytes>>20, depth)}
		}
		if !h.take(translateCopies * pageBytes) {
			return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: heldError()}
		}
		for _, e := range page.Entries {
			each(e)
		}
		if !page.Truncated {
			return nil
		}
		next, err := agentapi.ParseListCursor(page.Next)
		if err != nil || len(page.Entries) == 0 || (last != "" && agentapi.ComparePaths(next, last) <= 0) {
			return &apiError{Status: http.StatusBadGateway, Code: "bad_answer",
				Message: fmt.Sprintf("listing %s: the sandbox's agent gave a page that does not move the listing forward (was it replaced from inside the sandbox?)", p)}
		}
		cursor, last = "&cursor="+url.QueryEscape(page.Next), next
	}
}

// ListDir lists a directory to the depth asked (0: 1, at most
// maxListDepth), every entry, as envd does, however many of Runtime's pages
// that takes.
func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	t := targetFrom(ctx)
	depth := int(req.Msg.GetDepth())
	switch {
	case depth == 0:
		depth = 1
	case depth > maxListDepth:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("depth is at most "+strconv.Itoa(maxListDepth)+" in Runtime"))
	}
	out := &filesystempb.ListDirResponse{}
	h := &held{key: t.keyID()}
	defer h.release()
	err := f.list(ctx, t, t.abs(req.Msg.GetPath()), depth, h, func(e agentapi.FileInfo) {
		out.Entries = append(out.Entries, entryInfo(e))
	})
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	t := targetFrom(ctx)
	p := t.abs(req.Msg.GetPath())
	began := time.Now()
	if err := f.s.api.json(ctx, t.as, "DELETE", t.base()+"/files?recursive=true&path="+url.QueryEscape(p), nil, nil); err != nil {
		// envd removes as os.RemoveAll does: a path that is not there is no
		// error. The API's 404 is the path's when the sandbox still runs.
		if ae := asAPIError(err); ae.Status != http.StatusNotFound || !f.s.running(ctx, t.id) {
			return nil, rpcError(err)
		}
	} else {
		f.s.fileOps.add(t.id, fileOp{path: p, at: began, last: lastOfRemove})
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

// running says the store has sandbox id running.
func (s *Server) running(ctx context.Context, id string) bool {
	sb, err := s.cfg.Store.GetSandbox(ctx, id)
	return err == nil && sb.State == store.StateRunning
}

// entryInfo describes a file in envd's terms. A symlink is FILE_TYPE_SYMLINK
// with is_symlink and its target (the agent does not follow it).
func entryInfo(fi agentapi.FileInfo) *filesystempb.EntryInfo {
	perm, _ := strconv.ParseUint(fi.Mode, 8, 32)
	mode := fs.FileMode(perm) & fs.ModePerm
	e := &filesystempb.EntryInfo{Name: fi.Name, Path: fi.Path, Size: fi.Size, Owner: account(fi.Uid), Group: account(fi.Gid),
		ModifiedTime: timestamppb.New(fi.ModTime), Metadata: map[string]string{}}
	for k, v := range agentapi.CleanMetadata(fi.Metadata) { // from inside the sandbox: checked again
		e.Metadata[k] = v
	}
	switch fi.Type {
	case "file":
		e.Type = filesystempb.FileType_FILE_TYPE_FILE
	case "dir":
		e.Type = filesystempb.FileType_FILE_TYPE_DIRECTORY
		mode |= fs.ModeDir
	case "symlink":
		e.Type, e.IsSymlink = filesystempb.FileType_FILE_TYPE_SYMLINK, true
		mode |= fs.ModeSymlink
		target := fi.Target
		e.SymlinkTarget = &target
	}
	e.Mode = uint32(mode.Perm())
	e.Permissions = mode.String()
	return e
}

// account names a uid or gid of a Runtime sandbox: 0 root, 1000 user, any
// other as its number.
func account(id int) string {
	switch id {
	case 0:
		return "root"
	case 1000:
		return "user"
	}
	return strconv.Itoa(id)
}

// relName is p relative to dir, as envd names watch events.
func relName(dir, p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
}
