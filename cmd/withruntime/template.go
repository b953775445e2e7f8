package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/client"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/image"
)

// buildFromImage makes the template name from an image: a registry image is
// pulled by the server; a local OCI layout or `docker save` tarball is read
// here and uploaded as a tarball, so that the server never reads a path on
// a caller's behalf.
func buildFromImage(ctx context.Context, tname, ref string, start *api.TemplateStart) error {
	if err := template.ValidName(tname); err != nil {
		return err
	}
	src, err := image.ParseSource(ref)
	if err != nil {
		return err
	}
	s, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer s.Close()
	// A taken name is refused before anything is pulled or uploaded.
	if _, err := s.GetTemplate(ctx, tname); err == nil {
		return fmt.Errorf("template %q already exists; delete it first (`withruntime template rm %s`) or pick another name", tname, tname)
	} else if ae := (*client.APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return err
	}
	onStep := func(ev api.TemplateEvent) {
		printProgress(template.Progress{Step: ev.Step, Done: ev.Done, Elapsed: time.Duration(ev.ElapsedSeconds * float64(time.Second))})
	}
	var t api.Template
	if !src.Local() {
		fmt.Fprintf(os.Stderr, "withruntime: making template %s from %s (pulled by the server)\n", tname, ref)
		t, err = s.CreateTemplate(ctx, api.CreateTemplateRequest{Name: tname, FromImage: ref, Start: start}, onStep)
	} else {
		var body io.ReadCloser
		if body, err = localImage(ctx, src); err != nil {
			return err
		}
		defer body.Close()
		fmt.Fprintf(os.Stderr, "withruntime: making template %s from %s (uploading it to the server)\n", tname, ref)
		t, err = s.UploadTemplate(ctx, tname, ref, start, body, onStep)
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("withruntime: template %s made from %s", t.Name, ref)
	if t.Origin != nil && t.Origin.Digest != "" {
		msg += " (" + t.Origin.Digest + ")"
	}
	fmt.Fprintf(os.Stderr, "%s, %d MiB; use it with --template %s\n", msg, t.SizeBytes>>20, t.Name)
	printWarm(t)
	if t.Origin != nil && t.Origin.Shell == "" {
		fmt.Fprintln(os.Stderr, "withruntime: note: the image has no /bin/sh, so only argv commands run in it (not shell command lines)")
	}
	return nil
}

// printWarm says, for a warm template, what its sandboxes start with.
func printWarm(t api.Template) {
	if t.Start != nil {
		fmt.Fprintf(os.Stderr, "withruntime: template %s is warm: its sandboxes start from a snapshot taken with %s\n", t.Name, startText(t.Start))
	}
}

// startText says what a template's start runs, for messages and template ls.
func startText(st *api.TemplateStart) string {
	if st == nil {
		return "-"
	}
	var parts []string
	if st.Kernel {
		parts = append(parts, "kernel")
	}
	if st.Command != "" {
		parts = append(parts, fmt.Sprintf("%q", st.Command))
	}
	if st.ReadyCommand != "" {
		parts = append(parts, fmt.Sprintf("ready: %q", st.ReadyCommand))
	}
	return strings.Join(parts, ", ")
}

// localImage returns a `docker save` tarball of a local image: the file
// itself, or an OCI layout written out as one.
func localImage(ctx context.Context, src image.Source) (io.ReadCloser, error) {
	if src.Kind == image.Archive {
		return os.Open(src.Path)
	}
	img, err := src.Open(ctx, image.FetchOptions{})
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag("withruntime.local/import:latest")
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(tag, img, pw)) }()
	return pr, nil
}

func newTemplateRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a template (refused while sandboxes use it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return s.DeleteTemplate(cmd.Context(), args[0])
		},
	}
}

func newTemplateLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List templates",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			l, err := s.TemplateList(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tBUILT\tFROM\tSTART")
			for _, t := range l.Templates {
				fmt.Fprintf(tw, "%s\t%dMiB\t%s\t%s\t%s\n", t.Name, t.SizeBytes>>20, t.CreatedAt.Local().Format(time.DateTime), originText(t), startText(t.Start))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			// On stderr: the table on stdout stays a table for scripts.
			if l.Note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: "+l.Note)
			}
			return nil
		},
	}
}

// originText says where a template came from, for `template ls`.
func originText(t api.Template) string {
	if t.Origin == nil {
		return "recipe"
	}
	d := t.Origin.Digest
	if len(d) > 19 {
		d = d[:19] // sha256: + 12
	}
	if d == "" {
		return t.Origin.Image
	}
	return t.Origin.Image + " (" + d + ")"
}
