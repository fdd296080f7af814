package tools

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompFilter runs the filter bwrap loads on every call it decides,
// in x/net/bpf's interpreter: each rule refuses what it is for and lets
// through the calls beside it.
func TestSeccompFilter(t *testing.T) {
	if auditArch == 0 {
		t.Skip("no seccomp filter on this architecture")
	}
	raw, err := seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	var ins []bpf.RawInstruction
	for i := 0; i+8 <= len(raw); i += 8 {
		ins = append(ins, bpf.RawInstruction{
			Op: binary.LittleEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.LittleEndian.Uint32(raw[i+4:]),
		})
	}
	prog, ok := bpf.Disassemble(ins)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	// seccomp_data as the interpreter reads it: its loads are big-endian,
	// the kernel's native, so each 32-bit field is written big-endian here.
	call := func(arch, nr, arg0, arg1 uint32) uint32 {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[seccompNr:], nr)
		binary.BigEndian.PutUint32(data[seccompArch:], arch)
		binary.BigEndian.PutUint32(data[seccompArg0:], arg0)
		binary.BigEndian.PutUint32(data[seccompArg1:], arg1)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(got)
	}
	errno := func(e unix.Errno) uint32 { return seccompErrno | uint32(e) }
	cases := []struct {
		name       string
		arch, nr   uint32
		arg0, arg1 uint32
		want       uint32
	}{
		{"read", auditArch, unix.SYS_READ, 0, 0, seccompAllow},
		{"unshare of a user namespace", auditArch, unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, errno(unix.EPERM)},
		{"unshare of a mount namespace", auditArch, unix.SYS_UNSHARE, unix.CLONE_NEWNS, 0, seccompAllow},
		{"clone of a user namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint32(unix.SIGCHLD), 0, errno(unix.EPERM)},
		{"clone of a thread", auditArch, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_THREAD, 0, seccompAllow},
		{"clone3", auditArch, unix.SYS_CLONE3, 0, 0, errno(unix.ENOSYS)},
		{"fallocate growing the file", auditArch, unix.SYS_FALLOCATE, 3, 0, seccompAllow},
		{"fallocate keeping the size", auditArch, unix.SYS_FALLOCATE, 3, unix.FALLOC_FL_KEEP_SIZE, errno(unix.EOPNOTSUPP)},
		{"fallocate zeroing a range", auditArch, unix.SYS_FALLOCATE, 3, unix.FALLOC_FL_ZERO_RANGE, errno(unix.EOPNOTSUPP)},
		{"io_uring_setup", auditArch, unix.SYS_IO_URING_SETUP, 0, 0, errno(unix.ENOSYS)},
		{"io_uring_enter", auditArch, unix.SYS_IO_URING_ENTER, 0, 0, errno(unix.ENOSYS)},
		{"io_uring_register", auditArch, unix.SYS_IO_URING_REGISTER, 0, 0, errno(unix.ENOSYS)},
		{"keyctl", auditArch, unix.SYS_KEYCTL, 0, 0, errno(unix.ENOSYS)},
		{"add_key", auditArch, unix.SYS_ADD_KEY, 0, 0, errno(unix.ENOSYS)},
		{"request_key", auditArch, unix.SYS_REQUEST_KEY, 0, 0, errno(unix.ENOSYS)},
		{"an x32 call", auditArch, x32SyscallBit | unix.SYS_READ, 0, 0, seccompKillProcess},
		{"another architecture's call", unix.AUDIT_ARCH_I386, 3, 0, 0, seccompKillProcess},
	}
	for _, tc := range cases {
		if got := call(tc.arch, tc.nr, tc.arg0, tc.arg1); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
