// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command oci-image writes and checks the driver's multi-architecture image
// for make release, with no registry and no emulation: one image per
// platform, each `scratch` plus the driver binary cross-compiled on the host
// (as the Dockerfile makes the host's), under one OCI image index, in an OCI
// image layout and its tar archive.
//
//	oci-image write -out DIR -version V -label K=V... -binary linux/amd64=PATH...
//	oci-image verify DIR
//
// It is a Go module of its own, so that the driver's module graph does not
// take in go-containerregistry's.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binaryPath is where the image holds the driver (the Dockerfile's COPY).
const binaryPath = "usr/local/bin/per-node"

// ErrBadImage: an image of the layout is not what its platform says.
var ErrBadImage = errors.New("bad image")

// Spec is what the image index holds.
type Spec struct {
	Version string
	Labels  map[string]string
	// Binaries are the driver's binary for each platform ("linux/arm64").
	Binaries map[string]string
}

// Write writes the OCI image layout of spec to dir, which must not exist:
// one image index, named spec.Version, with one image per platform.
func Write(dir string, spec Spec) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("write %s: %w", dir, os.ErrExist)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range sortedKeys(spec.Binaries) {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return fmt.Errorf("platform %q: %w", platform, err)
		}
		if err := checkBinary(spec.Binaries[platform], p); err != nil {
			return err
		}
		img, err := image(spec, p)
		if err != nil {
			return fmt.Errorf("image for %s: %w", platform, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	return l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": spec.Version}))
}

// image is scratch plus the platform's binary, with the Dockerfile's
// entrypoint and labels.
func image(spec Spec, p *v1.Platform) (v1.Image, error) {
	bin, err := os.ReadFile(spec.Binaries[p.String()])
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: binaryPath, Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS: p.OS, Architecture: p.Architecture, Variant: p.Variant,
		Config: v1.Config{Entrypoint: []string{"/" + binaryPath}, Labels: spec.Labels},
	})
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layer)
}

// machines are the ELF machine of each architecture a release builds.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary: a static ELF executable of p's architecture.
func checkBinary(path string, p *v1.Platform) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %s for %s: %w", ErrBadImage, path, p, err)
	}
	defer f.Close()
	return checkELF(f, path, p)
}

func checkELF(f *elf.File, name string, p *v1.Platform) error {
	want, ok := machines[p.Architecture]
	switch {
	case p.OS != "linux" || !ok:
		return fmt.Errorf("%w: %s: platform %s is not linux/amd64 or linux/arm64", ErrBadImage, name, p)
	case f.Machine != want:
		return fmt.Errorf("%w: %s for %s is an ELF for %s, expected %s", ErrBadImage, name, p, f.Machine, want)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s for %s asks for a dynamic loader: the image is scratch, build it with CGO_ENABLED=0", ErrBadImage, name, p)
		}
	}
	return nil
}

// Verify reads the layout in dir back: one index named version whose images
// are the platforms want, each holding a static ELF of its architecture at
// the entrypoint.
func Verify(dir, version string, want []string) error {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return err
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		return fmt.Errorf("%w: %s holds %d entries, expected one index named %s", ErrBadImage, dir, len(rm.Manifests), version)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var seen []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("%w: manifest %s names no platform", ErrBadImage, d.Digest)
		}
		seen = append(seen, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := verifyImage(img, d.Platform); err != nil {
			return err
		}
	}
	sort.Strings(seen)
	want = append([]string(nil), want...)
	sort.Strings(want)
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		return fmt.Errorf("%w: the index names %v, expected %v", ErrBadImage, seen, want)
	}
	return nil
}

func verifyImage(img v1.Image, p *v1.Platform) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
		return fmt.Errorf("%w: the image for %s is configured for %s/%s", ErrBadImage, p, cfg.OS, cfg.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		bin, err := fileIn(rc, binaryPath)
		rc.Close()
		if err != nil {
			return err
		}
		if bin == nil {
			continue
		}
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("%w: /%s in the image for %s: %w", ErrBadImage, binaryPath, p, err)
		}
		return checkELF(f, "/"+binaryPath+" in the image for "+p.String(), p)
	}
	return fmt.Errorf("%w: the image for %s holds no /%s", ErrBadImage, p, binaryPath)
}

// fileIn returns the contents of name in the tar stream r, or nil.
func fileIn(r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if filepath.Clean(h.Name) == name {
			return io.ReadAll(tr)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
