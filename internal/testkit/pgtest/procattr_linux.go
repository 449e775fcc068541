package pgtest

import "syscall"

// sysProcAttr runs the child as uid and gid (-1: as the test) and kills it
// when the test binary dies. Go sets the parent-death signal after
// switching credentials, which would otherwise clear it.
func sysProcAttr(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return a
}
