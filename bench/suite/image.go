package main

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/image"
)

// imageTemplate is the template the image section imports into the
// templates directory and deletes at the end (and the sweep deletes when a
// run was killed).
const imageTemplate = "bench-suite-image"

// removeImageTemplate deletes the image section's template, if there.
func (e *env) removeImageTemplate(ctx context.Context) error {
	st := &template.Store{Dir: e.o.Templates}
	err := st.Delete(ctx, imageTemplate, nil)
	os.Remove(filepath.Join(e.o.Templates, "."+imageTemplate+".lock"))
	if errors.Is(err, errs.NotFound) {
		return nil
	}
	return err
}

// imageSection imports the base template's root filesystem as a container
// image (one layer, no /dev nodes, as `docker build` would have it) and
// measures create-to-first-output of python3 from it against base, cold,
// interleaved.
func (e *env) imageSection(ctx context.Context) (err error) {
	layerPath := filepath.Join(workDir, "base-layer.tar")
	tarCmd := exec.CommandContext(ctx, "tar", "-C", e.rootfs, "--numeric-owner", "--exclude=./dev/*", "-cf", layerPath, ".")
	if out, err := tarCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tar the base rootfs: %v: %s", err, out)
	}
	defer os.Remove(layerPath)
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := e.removeImageTemplate(ctx); err != nil {
		return err
	}
	defer func() {
		if rerr := e.removeImageTemplate(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	st := &template.Store{Dir: e.o.Templates}
	t0 := time.Now()
	info, err := image.FromImage(ctx, st, imageTemplate, img, image.Source{Kind: image.Archive, Ref: "the base rootfs as an image"}, image.Options{}, nil)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	importTook := time.Since(t0)

	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	var baseD, imgD []time.Duration
	for i := -1; i < e.o.Runs; i++ {
		for _, tpl := range []string{"base", imageTemplate} {
			s, err := cold.c.CreateToFirstOutputFrom(ctx, tpl, pythonArgv, pythonOut)
			if s.ID != "" {
				if derr := cold.c.Del(context.WithoutCancel(ctx), s.ID); derr != nil && err == nil {
					err = derr
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", tpl, err)
			}
			if i < 0 {
				continue
			}
			if tpl == "base" {
				baseD = append(baseD, s.Total)
			} else {
				imgD = append(imgD, s.Total)
			}
		}
		if i >= 0 && (i+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "suite: image %d/%d\n", i+1, e.o.Runs)
		}
	}
	const sec = "image"
	rImport := e.add(sampleRow(sec, fmt.Sprintf("import of the base rootfs as an image (%d MiB)", info.SizeBytes>>20), "ms", stats.MSSamples([]time.Duration{importTook})))
	rImport.Note = "one sample: tar layer flattened from a gzip stream, made bootable, synced"
	rBase := e.add(sampleRow(sec, "API create→first output, cold, base", "ms", stats.MSSamples(baseD)))
	rBase.Baseline, rBase.Short = true, "base"
	rImg := e.add(sampleRow(sec, "API create→first output, cold, imported template", "ms", stats.MSSamples(imgD)))
	compare(rImg, rBase)
	return nil
}
