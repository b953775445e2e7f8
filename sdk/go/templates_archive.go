package withruntime

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// What a template upload reads on this machine: an OCI image layout, sent
// as a `docker save` tarball, and a Dockerfile's build context, sent as a
// tar less what its .dockerignore excludes.

// maxLayoutJSON bounds an OCI layout's index and manifests.
const maxLayoutJSON = 4 << 20

// digestRE is an OCI digest, "ALGORITHM:ENCODED", safe as a path.
var digestRE = regexp.MustCompile(`^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)

// layoutImage is one image of an OCI layout: its config and layer blobs,
// by their names in the `docker save` tarball, with their files.
type layoutImage struct {
	dir    string
	config string
	layers []string
}

// ociDescriptor is the part of an OCI descriptor, index or manifest read
// here.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

func isIndexType(mt string) bool {
	return mt == "application/vnd.oci.image.index.v1+json" || mt == "application/vnd.docker.distribution.manifest.list.v2+json"
}

func isManifestType(mt string) bool {
	return mt == "application/vnd.oci.image.manifest.v1+json" || mt == "application/vnd.docker.distribution.manifest.v2+json"
}

// readOCILayout finds the linux/amd64 image of the OCI layout dir (through
// nested indexes; an index of one image without a platform is that image).
// ref names it in errors, which match ErrBadRequest or ErrNotFound.
func readOCILayout(dir, ref string) (*layoutImage, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return nil, badRequest("image %s: %s has no oci-layout file, so it is not an OCI image layout (make one with `skopeo copy ... oci:DIR` or `crane pull --format=oci`)", ref, dir)
	}
	var idx ociIndex
	if err := readLayoutJSON(filepath.Join(dir, "index.json"), ref, &idx); err != nil {
		return nil, err
	}
	desc, err := pickManifest(dir, ref, idx, 0)
	if err != nil {
		return nil, err
	}
	var m ociManifest
	if err := readBlobJSON(dir, ref, desc.Digest, &m); err != nil {
		return nil, err
	}
	img := &layoutImage{dir: dir}
	if img.config, err = blobName(dir, ref, m.Config.Digest); err != nil {
		return nil, err
	}
	if len(m.Layers) == 0 {
		return nil, badRequest("image %s has no layers", ref)
	}
	for _, l := range m.Layers {
		name, err := blobName(dir, ref, l.Digest)
		if err != nil {
			return nil, err
		}
		img.layers = append(img.layers, name)
	}
	return img, nil
}

func pickManifest(dir, ref string, idx ociIndex, depth int) (ociDescriptor, error) {
	if depth > 4 {
		return ociDescriptor{}, badRequest("image %s: indexes nested too deep", ref)
	}
	var others []string
	var unlabelled []ociDescriptor
	for _, d := range idx.Manifests {
		switch {
		case isIndexType(d.MediaType):
			var child ociIndex
			if err := readBlobJSON(dir, ref, d.Digest, &child); err != nil {
				return ociDescriptor{}, err
			}
			m, err := pickManifest(dir, ref, child, depth+1)
			if err == nil {
				return m, nil
			}
			others = append(others, "(a nested index: "+err.Error()+")")
		case !isManifestType(d.MediaType):
		case d.Platform == nil:
			unlabelled = append(unlabelled, d)
		case d.Platform.OS == "linux" && d.Platform.Architecture == "amd64":
			return d, nil
		case d.Platform.OS == "unknown":
			// buildx attestations
		default:
			others = append(others, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	if len(unlabelled) == 1 && len(others) == 0 {
		return unlabelled[0], nil
	}
	if len(others) > 0 {
		return ociDescriptor{}, badRequest("image %s has no linux/amd64 variant (it has: %s); Runtime runs linux/amd64 images only", ref, strings.Join(others, ", "))
	}
	if len(unlabelled) == 0 {
		return ociDescriptor{}, badRequest("image %s: the layout's index holds no image", ref)
	}
	return ociDescriptor{}, badRequest("image %s: the layout's index holds %d images without a platform; keep one", ref, len(unlabelled))
}

// blobName checks that digest's blob is a regular file of the layout and
// returns its name, "blobs/ALGORITHM/ENCODED".
func blobName(dir, ref, digest string) (string, error) {
	if !digestRE.MatchString(digest) {
		return "", badRequest("image %s: %q is not a digest", ref, digest)
	}
	alg, enc, _ := strings.Cut(digest, ":")
	name := path.Join("blobs", alg, enc)
	st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return "", fmt.Errorf("%w: image %s: blob %s: %w", ErrNotFound, ref, digest, err)
	}
	if !st.Mode().IsRegular() {
		return "", badRequest("image %s: blob %s is not a regular file", ref, digest)
	}
	return name, nil
}

func readBlobJSON(dir, ref, digest string, v any) error {
	name, err := blobName(dir, ref, digest)
	if err != nil {
		return err
	}
	return readLayoutJSON(filepath.Join(dir, filepath.FromSlash(name)), ref, v)
}

func readLayoutJSON(file, ref string, v any) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("%w: image %s: %w", ErrNotFound, ref, err)
	}
	defer f.Close()
	if err := json.NewDecoder(io.LimitReader(f, maxLayoutJSON)).Decode(v); err != nil {
		return badRequest("image %s: %s is not valid JSON: %v", ref, filepath.Base(file), err)
	}
	return nil
}

// writeArchive writes the image as a `docker save` tarball: manifest.json
// naming the config and layers, which follow as they are in the layout
// (compressed or not).
func (img *layoutImage) writeArchive(w io.Writer) error {
	manifest, err := json.Marshal([]map[string]any{{"Config": img.config, "RepoTags": []string{}, "Layers": img.layers}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifest))}); err != nil {
		return err
	}
	if _, err := tw.Write(manifest); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, name := range append([]string{img.config}, img.layers...) {
		if seen[name] {
			continue
		}
		seen[name] = true
		if err := addFile(tw, filepath.Join(img.dir, filepath.FromSlash(name)), name); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile writes the regular file src into tw as name.
func addFile(tw *tar.Writer, src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: st.Size()}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, io.LimitReader(f, st.Size())); err != nil {
		return err
	} else if n != st.Size() {
		return fmt.Errorf("%s shrank while it was read", src)
	}
	return nil
}

// dockerignore is a .dockerignore's patterns, matched as Docker does: a
// path is excluded when the last pattern that matches it or one of its
// parent directories is not an exception ("!").
type dockerignore struct {
	patterns []ignorePattern
}

type ignorePattern struct {
	re        *regexp.Regexp
	exception bool
}

// readDockerignore reads dir/.dockerignore; nil if there is none.
func readDockerignore(dir string) (*dockerignore, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("withruntime: .dockerignore: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("withruntime: .dockerignore: %w", err)
	}
	return parseDockerignore(lines)
}

// parseDockerignore compiles .dockerignore lines: blank lines and "#"
// comments are skipped; "!" makes an exception; a pattern is cleaned and
// rooted at the context ("/a" is "a"); "*" matches within a path element,
// "?" one character of it, "**" any number of elements, "[...]" a class,
// and "\" escapes.
func parseDockerignore(lines []string) (*dockerignore, error) {
	d := &dockerignore{}
	for _, line := range lines {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		exception := false
		if p[0] == '!' {
			exception, p = true, strings.TrimSpace(p[1:])
			if p == "" {
				return nil, badRequest(".dockerignore: %q is an exception without a pattern", line)
			}
		}
		p = path.Clean(filepath.ToSlash(p))
		if len(p) > 1 && p[0] == '/' {
			p = p[1:]
		}
		re, err := regexp.Compile(ignoreRegexp(p))
		if err != nil {
			return nil, badRequest(".dockerignore: bad pattern %q: %v", line, err)
		}
		d.patterns = append(d.patterns, ignorePattern{re: re, exception: exception})
	}
	return d, nil
}

// ignoreRegexp translates a .dockerignore pattern to a regular expression
// (moby's patternmatcher's translation).
func ignoreRegexp(p string) string {
	var b strings.Builder
	b.WriteString("^")
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch ch := rs[i]; {
		case ch == '*' && i+1 < len(rs) && rs[i+1] == '*':
			i++
			if i+1 < len(rs) && rs[i+1] == '/' {
				i++
			}
			if i+1 == len(rs) {
				b.WriteString(".*")
			} else {
				b.WriteString("(.*/)?")
			}
		case ch == '*':
			b.WriteString("[^/]*")
		case ch == '?':
			b.WriteString("[^/]")
		case strings.ContainsRune(".+()|{}$", ch):
			b.WriteString(`\` + string(ch))
		case ch == '\\':
			if i+1 < len(rs) {
				i++
				b.WriteString(regexp.QuoteMeta(string(rs[i])))
			} else {
				b.WriteString(`\\`)
			}
		default:
			b.WriteRune(ch)
		}
	}
	b.WriteString("$")
	return b.String()
}

// excluded reports whether the context path rel ("a/b", forward slashes)
// is left out.
func (d *dockerignore) excluded(rel string) bool {
	if d == nil {
		return false
	}
	parent := path.Dir(rel)
	var parents []string
	if parent != "." {
		parents = strings.Split(parent, "/")
	}
	matched := false
	for _, p := range d.patterns {
		if p.exception != matched {
			continue
		}
		match := p.re.MatchString(rel)
		for i := range parents {
			if match {
				break
			}
			match = p.re.MatchString(strings.Join(parents[:i+1], "/"))
		}
		if match {
			matched = !p.exception
		}
	}
	return matched
}

func (d *dockerignore) hasExceptions() bool {
	if d == nil {
		return false
	}
	for _, p := range d.patterns {
		if p.exception {
			return true
		}
	}
	return false
}

// writeContext writes the build context as a tar: dir's regular files,
// directories and symlinks (owners left out) that ignore does not
// exclude, and the Dockerfile df as dfName unless it is among them.
func writeContext(w io.Writer, dir string, ignore *dockerignore, dfName string, df []byte) error {
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
		if rel == contextDockerfile {
			return nil // the place of a Dockerfile from elsewhere
		}
		if rel != dfName && ignore.excluded(rel) {
			if d.IsDir() && !ignore.hasExceptions() {
				return filepath.SkipDir
			}
			return nil
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
		if !fi.Mode().IsRegular() {
			return tw.WriteHeader(hdr)
		}
		sawDockerfile = sawDockerfile || rel == dfName
		return addFileHeader(tw, p, hdr)
	})
	if err != nil {
		return fmt.Errorf("withruntime: build context: %w", err)
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

// addFileHeader writes the regular file src under hdr, whose Size is its
// size when it was listed.
func addFileHeader(tw *tar.Writer, src string, hdr *tar.Header) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%s shrank while it was read", src)
	}
	return nil
}
