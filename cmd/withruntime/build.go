package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/client"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/dockerfile"
)

// buildFlags are `template build`'s Dockerfile flags.
type buildFlags struct {
	file      string
	buildArgs []string
	internet  bool
	allow     []string
	// start is --start-cmd, --ready-cmd, --ready-timeout, --start-kernel
	// (with -f or --from-image).
	start api.TemplateStart
}

// startFlags is the build's start, nil when no flag gave one.
func (f buildFlags) startFlags() *api.TemplateStart {
	if f.start == (api.TemplateStart{}) {
		return nil
	}
	st := f.start
	return &st
}

// buildFromDockerfile sends the build context (the directory dir, less what
// its .dockerignore excludes, plus the Dockerfile) to the server, which runs
// the Dockerfile's steps in a sandbox and makes the template tname.
func buildFromDockerfile(ctx context.Context, tname, dir string, f buildFlags) error {
	if err := template.ValidName(tname); err != nil {
		return err
	}
	df, err := os.ReadFile(f.file)
	if err != nil {
		return fmt.Errorf("Dockerfile: %w", err)
	}
	dfName := dockerfile.ContextDockerfile
	if rel, err := filepath.Rel(dir, f.file); err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
		dfName = filepath.ToSlash(rel)
	}
	ignore, err := readDockerignore(dir)
	if err != nil {
		return err
	}
	q := url.Values{}
	for _, a := range f.buildArgs {
		if !strings.Contains(a, "=") {
			if v, ok := os.LookupEnv(a); ok {
				a += "=" + v
			} else {
				return fmt.Errorf("--build-arg %s: write KEY=VALUE (or KEY with KEY set in the environment)", a)
			}
		}
		q.Add("buildArg", a)
	}
	if f.internet {
		q.Set("internet", "true")
	}
	for _, h := range f.allow {
		q.Add("allow", h)
	}
	for k, v := range client.StartQuery(f.startFlags()) {
		q[k] = v
	}
	s, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.GetTemplate(ctx, tname); err == nil {
		return fmt.Errorf("template %q already exists; delete it first (`withruntime template rm %s`) or pick another name", tname, tname)
	} else if ae := (*client.APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeContext(pw, dir, ignore, dfName, df))
	}()
	defer pr.Close()
	fmt.Fprintf(os.Stderr, "withruntime: building template %s from %s (context %s)\n", tname, f.file, dir)
	t, err := s.BuildTemplate(ctx, tname, dfName, q, pr, func(ev api.TemplateEvent) {
		if ev.Type == "output" {
			fmt.Fprint(os.Stderr, ev.Data)
			return
		}
		printProgress(template.Progress{Step: ev.Step, Done: ev.Done, Elapsed: time.Duration(ev.ElapsedSeconds * float64(time.Second))})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "withruntime: template %s built, %d MiB; use it with --template %s\n", t.Name, t.SizeBytes>>20, t.Name)
	printWarm(t)
	return nil
}

func readDockerignore(dir string) (*patternmatcher.PatternMatcher, error) {
	fh, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	patterns, err := ignorefile.ReadAll(fh)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	return patternmatcher.New(patterns)
}

// writeContext writes the build context as a tar: dir's files (regular
// files, directories and symlinks; owners left out) not excluded by ignore,
// and the Dockerfile at dfName when it is not among them.
func writeContext(w io.Writer, dir string, ignore *patternmatcher.PatternMatcher, dfName string, df []byte) error {
	tw := tar.NewWriter(w)
	sawDockerfile := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignore != nil && rel != dfName {
			if skip, err := ignore.MatchesOrParentMatches(rel); err != nil {
				return err
			} else if skip {
				if d.IsDir() && !ignore.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // devices, sockets, FIFOs
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = rel, 0, 0, "", ""
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			sawDockerfile = sawDockerfile || rel == dfName
			fh, err := os.Open(p)
			if err != nil {
				return err
			}
			defer fh.Close()
			if _, err := io.Copy(tw, io.LimitReader(fh, hdr.Size)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !sawDockerfile {
		if err := tw.WriteHeader(&tar.Header{Name: dfName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(df))}); err != nil {
			return err
		}
		if _, err := tw.Write(df); err != nil {
			return err
		}
	}
	return tw.Close()
}
