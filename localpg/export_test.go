package localpg

// Abandon leaves the server running and releases its directory, as a
// pgtables killed with SIGKILL does where no parent-death signal stops
// the server; it returns the server's PID.
func (s *Server) Abandon() int {
	s.lock.Close()
	s.lock = nil
	return s.cmd.Process.Pid
}
