package api

// volumeFileRoutes serves a volume's files without a sandbox.
func (s *Server) volumeFileRoutes() {}
