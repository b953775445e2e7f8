package api

import (
	"context"
	"net/http"

	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Volumes' wire types (sdk/go/wire/volume.go).
type (
	CreateVolumeRequest = wire.CreateVolumeRequest
	Volume              = wire.Volume
	VolumeList          = wire.VolumeList
	VolumeMount         = wire.VolumeMount
)

// Volumes are every key's own: the routes look a volume up by name among
// the request's key's volumes, so another key's volume of any name is 404,
// for an administrator's key too (sandbox/volume.go).
func (s *Server) volumeRoutes() {
	s.handle("POST", "/v1/volumes", s.createVolume)
	s.handle("GET", "/v1/volumes", s.listVolumes)
	s.handle("GET", "/v1/volumes/{name}", s.getVolume)
	s.handle("DELETE", "/v1/volumes/{name}", s.deleteVolume)
	s.volumeFileRoutes()
}

func createVolumeBounds(req *CreateVolumeRequest, l sandbox.Limits) []bound {
	return []bound{intBound("sizeMiB", &req.SizeMiB, sandbox.MinVolumeMiB, l.MaxVolume(), "", "MiB")}
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) error {
	var req CreateVolumeRequest
	if err := decode(r, &req, createVolumeBounds(&req, s.cfg.Limits)...); err != nil {
		return err
	}
	if err := sandbox.CheckVolumeName(req.Name); err != nil {
		return err
	}
	v, err := s.cfg.Manager.CreateVolume(r.Context(), keyFrom(r.Context()).ID, req.Name, req.SizeMiB)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toVolume(v))
	return nil
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.RawQuery, nil); err != nil {
		return err
	}
	vols, err := s.cfg.Manager.ListVolumes(r.Context(), keyFrom(r.Context()).ID)
	if err != nil {
		return err
	}
	out := VolumeList{Volumes: make([]Volume, 0, len(vols))}
	for _, v := range vols {
		out.Volumes = append(out.Volumes, toVolume(v))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	v, err := s.cfg.Manager.GetVolume(r.Context(), keyFrom(r.Context()).ID, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toVolume(v))
	return nil
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Manager.DeleteVolume(r.Context(), keyFrom(r.Context()).ID, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func toVolume(v sandbox.VolumeInfo) Volume {
	out := Volume{Name: v.Name, ID: v.ID, SizeMiB: v.SizeMiB, UsedBytes: v.UsedBytes, CapacityBytes: v.CapacityBytes,
		State: v.State, CreatedAt: v.CreatedAt, MountedBy: v.MountedBy}
	if out.MountedBy == nil {
		out.MountedBy = []string{}
	}
	if v.Damaged != "" {
		out.State, out.Error = "damaged", v.Damaged
	}
	return out
}

// volumeRequests are a create's volumes as the manager takes them.
func volumeRequests(in []VolumeMount) []sandbox.VolumeRequest {
	out := make([]sandbox.VolumeRequest, len(in))
	for i, v := range in {
		out[i] = sandbox.VolumeRequest{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly}
	}
	return out
}

// toMounts are a sandbox's volumes as answered.
func toMounts(in []store.SandboxVolume) []VolumeMount {
	if len(in) == 0 {
		return nil
	}
	out := make([]VolumeMount, len(in))
	for i, v := range in {
		out[i] = VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly}
	}
	return out
}

// addVolumes fills in the volumes each of sbs mounts.
func (s *Server) addVolumes(ctx context.Context, sbs []store.Sandbox) error {
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.ID
	}
	mounts, err := s.cfg.Store.SandboxVolumes(ctx, ids)
	if err != nil {
		return err
	}
	for i := range sbs {
		sbs[i].Volumes = mounts[sbs[i].ID]
	}
	return nil
}
