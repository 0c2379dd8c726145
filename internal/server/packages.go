package server

import (
	"net/http"

	"github.com/trainyard/trainyard/internal/upload"
)

// getPackage answers GET /api/packages/{protocol}/{name}: 200 when the package was
// uploaded, 404 when not, as Ray's clients ask before they upload.
func (s *Server) getPackage(w http.ResponseWriter, r *http.Request) {
	name, err := packageName(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	ok, err := s.cfg.Packages.Has(name)
	switch {
	case err != nil:
		s.writeError(w, r, ray, err)
	case !ok:
		s.writeError(w, r, ray, refuse(errNoPackage, "Package %s://%s does not exist", packageProtocol, name))
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// putPackage answers PUT /api/packages/{protocol}/{name}: the body is a zip archive,
// kept if it is one whose entries a job may unpack and within the upload limits.
func (s *Server) putPackage(w http.ResponseWriter, r *http.Request) {
	name, err := packageName(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	limit := s.cfg.PackageLimits.MaxArchiveBytes
	if limit <= 0 {
		limit = upload.DefaultLimits().MaxArchiveBytes
	}
	if r.ContentLength > limit {
		s.writeError(w, r, ray, refuse(upload.ErrTooLarge, "package %s is %d bytes; this server keeps packages of at most %d",
			name, r.ContentLength, limit))
		return
	}
	if err := s.storePackage(name, r); err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// storePackage stores the request's body as the package name, in room reserved in the
// upload quota: its Content-Length, or the most a package may be when it has none.
func (s *Server) storePackage(name string, r *http.Request) error {
	size := r.ContentLength
	if size < 0 {
		size = s.cfg.PackageLimits.MaxArchiveBytes
		if size <= 0 {
			size = upload.DefaultLimits().MaxArchiveBytes
		}
	}
	room, err := s.quota.reserve(size, "package "+name)
	if err != nil {
		return err
	}
	if err := s.cfg.Packages.Put(name, r.Body, s.cfg.PackageLimits); err != nil {
		room.cancel()
		return err
	}
	info, err := s.cfg.Packages.Stat(name)
	if err != nil {
		room.cancel()
		return err
	}
	room.keepPackage(name, info.Size)
	return nil
}

// packageName returns the package name of the request's path, refusing a protocol
// other than gcs and a name that upload.ValidName refuses.
func packageName(r *http.Request) (string, error) {
	protocol, name := r.PathValue("protocol"), r.PathValue("name")
	if protocol != packageProtocol {
		return "", invalid("package protocol %q is not supported: packages are uploaded as %s://_ray_pkg_<hash>.zip",
			truncate(protocol, 64), packageProtocol)
	}
	if err := upload.ValidName(name); err != nil {
		return "", err
	}
	return name, nil
}
