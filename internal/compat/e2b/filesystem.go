package e2b

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
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
	return connect.NewResponse(&filesystempb.StatResponse{Entry: entryInfo(*fi)}), nil
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
	if err := f.s.api.json(ctx, t.as, "POST", t.base()+"/files/mkdir", agentapi.MkdirRequest{Path: p, Parents: true}, &fi); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: entryInfo(fi)}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	t := targetFrom(ctx)
	var fi agentapi.FileInfo
	in := agentapi.RenameRequest{From: t.abs(req.Msg.GetSource()), To: t.abs(req.Msg.GetDestination())}
	if err := f.s.api.json(ctx, t.as, "POST", t.base()+"/files/rename", in, &fi); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: entryInfo(fi)}), nil
}

// maxListDepth is the deepest listing Runtime's API gives.
const maxListDepth = 10

func (f *filesystemService) list(ctx context.Context, t target, p string, depth int) ([]agentapi.FileInfo, error) {
	var list agentapi.FileList
	q := "?path=" + url.QueryEscape(p) + "&depth=" + strconv.Itoa(depth)
	if err := f.s.api.json(ctx, t.as, "GET", t.base()+"/files/list"+q, nil, &list); err != nil {
		return nil, err
	}
	return list.Entries, nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	t := targetFrom(ctx)
	depth := int(req.Msg.GetDepth())
	switch {
	case depth == 0:
		depth = 1
	case depth > maxListDepth:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("depth is at most "+strconv.Itoa(maxListDepth)+" in Runtime"))
	}
	entries, err := f.list(ctx, t, t.abs(req.Msg.GetPath()), depth)
	if err != nil {
		return nil, rpcError(err)
	}
	out := &filesystempb.ListDirResponse{}
	for _, e := range entries {
		out.Entries = append(out.Entries, entryInfo(e))
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	t := targetFrom(ctx)
	p := t.abs(req.Msg.GetPath())
	if err := f.s.api.json(ctx, t.as, "DELETE", t.base()+"/files?recursive=true&path="+url.QueryEscape(p), nil, nil); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

// entryInfo describes a file in envd's terms. A symlink is FILE_TYPE_SYMLINK
// with is_symlink and its target (the agent does not follow it).
func entryInfo(fi agentapi.FileInfo) *filesystempb.EntryInfo {
	perm, _ := strconv.ParseUint(fi.Mode, 8, 32)
	mode := fs.FileMode(perm) & fs.ModePerm
	e := &filesystempb.EntryInfo{Name: fi.Name, Path: fi.Path, Size: fi.Size, Owner: account(fi.Uid), Group: account(fi.Gid),
		ModifiedTime: timestamppb.New(fi.ModTime), Metadata: map[string]string{}}
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
