package realnode

import (
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"withruntime.dev/runtime/internal/template/registry"
)

// Image is an image made on the host and imported into the node (the
// node's pause image; Runtime's images are pushed to a registry the test
// serves, which Start's plainHTTP lets the node pull from): the directory
// Root as its one layer.
type Image struct {
	// Ref is the image's name as pods use it ("withruntime/agent:test").
	Ref string
	// Root is the directory that becomes the image's filesystem.
	Root string
	// Entrypoint is the image's entrypoint (may be empty).
	Entrypoint []string
}

// writeImage writes img as a `docker save` tarball at path.
func writeImage(img Image, path string) error {
	layer, err := registry.DirLayer(img.Root)
	if err != nil {
		return err
	}
	im, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := im.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Entrypoint: img.Entrypoint, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if im, err = mutate.ConfigFile(im, cf); err != nil {
		return err
	}
	ref, err := name.NewTag(img.Ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, im)
}
