package tools

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The sandbox's seccomp filter refuses the few system calls that would
// carry a command past its limits or out of its uid (docs/DESIGN.md §4):
//
//   - a new user namespace (unshare, clone with CLONE_NEWUSER; clone3,
//     whose flags a filter cannot read, answers ENOSYS and glibc falls
//     back to clone): inside one, a process holds every capability over
//     what it creates, which is kernel attack surface no command needs;
//   - fallocate with a mode (FALLOC_FL_KEEP_SIZE above all): it reserves
//     disk blocks past RLIMIT_FSIZE in one call, faster than any watch
//     could stop it. Plain fallocate (mode 0) grows the file and so obeys
//     the file-size limit; glibc's posix_fallocate emulates the rest;
//   - io_uring, whose operations (fallocate among them) bypass seccomp;
//   - the kernel keyrings, which every command of the sandbox's uid would
//     share: one user's command could read what another's stored.
//
// A process of another architecture (i386 or x32 system calls on x86-64,
// arm32 on arm64) is killed: the filter could not name its calls.

// seccomp_data offsets (linux/seccomp.h): the call's number, its
// architecture and its arguments, 8 bytes each. The low half of an
// argument comes first on the little-endian machines supported.
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
	seccompArg1 = 24
)

// seccomp return actions (linux/seccomp.h).
const (
	seccompAllow       = 0x7fff0000
	seccompErrno       = 0x00050000
	seccompKillProcess = 0x80000000
)

// x32SyscallBit marks the x32 ABI's system call numbers on x86-64.
const x32SyscallBit = 0x40000000

// auditArch is the AUDIT_ARCH value of the architectures the filter
// knows; elsewhere the sandbox runs without it and says so.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// seccompRule is what the filter does with one system call.
type seccompRule struct {
	nr uint32
	// errno refuses the call; with arg set, only when the argument at
	// arg has one of bits set, or (bits 0) is not zero.
	errno unix.Errno
	arg   uint32
	bits  uint32
}

func seccompRules() []seccompRule {
	refuse := func(nr uintptr, errno unix.Errno) seccompRule { return seccompRule{nr: uint32(nr), errno: errno} }
	return []seccompRule{
		{nr: unix.SYS_UNSHARE, errno: unix.EPERM, arg: seccompArg0, bits: unix.CLONE_NEWUSER},
		{nr: unix.SYS_CLONE, errno: unix.EPERM, arg: seccompArg0, bits: unix.CLONE_NEWUSER},
		refuse(unix.SYS_CLONE3, unix.ENOSYS),
		{nr: unix.SYS_FALLOCATE, errno: unix.EOPNOTSUPP, arg: seccompArg1},
		refuse(unix.SYS_IO_URING_SETUP, unix.ENOSYS),
		refuse(unix.SYS_IO_URING_ENTER, unix.ENOSYS),
		refuse(unix.SYS_IO_URING_REGISTER, unix.ENOSYS),
		refuse(unix.SYS_KEYCTL, unix.ENOSYS),
		refuse(unix.SYS_ADD_KEY, unix.ENOSYS),
		refuse(unix.SYS_REQUEST_KEY, unix.ENOSYS),
	}
}

// seccompProgram assembles the filter as the raw sock_filter array that
// bwrap's --seccomp reads, or returns nil on an architecture it does not
// know.
func seccompProgram() ([]byte, error) {
	if auditArch == 0 {
		return nil, nil
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: seccompKillProcess},
		bpf.LoadAbsolute{Off: seccompNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipFalse: 1},
		bpf.RetConstant{Val: seccompKillProcess},
	}
	for _, r := range seccompRules() {
		action := r.action()
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(action))})
		prog = append(prog, action...)
	}
	prog = append(prog, bpf.RetConstant{Val: seccompAllow})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.LittleEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.LittleEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

// action is what runs once the call's number matched: a refusal, or a
// test of one argument that ends in a refusal or an allow (the argument
// replaced the number in the accumulator, so no other rule can follow).
func (r seccompRule) action() []bpf.Instruction {
	refuse := bpf.RetConstant{Val: seccompErrno | uint32(r.errno)}
	if r.arg == 0 {
		return []bpf.Instruction{refuse}
	}
	test := bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: r.bits, SkipFalse: 1}
	if r.bits == 0 {
		test = bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1}
	}
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: r.arg, Size: 4},
		test,
		refuse,
		bpf.RetConstant{Val: seccompAllow},
	}
}

// seccompFile returns a pipe whose read end holds the filter, for one
// bwrap to read through --seccomp; the caller closes it once bwrap has
// started. The program is under a page, so the write never blocks.
func seccompFile(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(prog)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	return r, nil
}
