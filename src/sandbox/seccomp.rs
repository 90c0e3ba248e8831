//! The seccomp filters of the sandbox (`exec`, Linux): classic BPF programs built with
//! seccompiler, serialised as the kernel's `sock_filter` array and handed to bubblewrap
//! (`--add-seccomp-fd`), which installs them just before it executes the program.
//!
//! Three programs, all of which the kernel runs on every system call (the strictest answer wins):
//! 1. a deny list answering `EPERM`: system calls a program under test never needs and that
//!    widen the kernel's attack surface or the program's reach (tracing, mounting, namespaces,
//!    kernel modules, BPF, keyrings, io_uring, ...), and `clone` with any namespace flag;
//! 2. `clone3` answers `ENOSYS` (its flags live in memory a filter cannot read; the C library
//!    then falls back to `clone`, which the first program checks);
//! 3. on x86_64, a hand-written guard answering `ENOSYS` to x32 system calls (numbers with
//!    bit 30 set), which would otherwise reach the same kernel code under numbers the deny
//!    list does not name. The i386 ABI is refused by seccompiler's architecture check (the
//!    process is killed).

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// System calls answered `EPERM`, on every architecture.
const DENIED: &[i64] = &[
    // tracing and reading other processes' memory
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    // mounts and the root
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_quotactl,
    // namespaces
    libc::SYS_unshare,
    libc::SYS_setns,
    // the kernel itself
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
    // keyrings
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // clocks and names of the machine
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
];

/// System calls answered `EPERM` that only x86_64 has.
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH: &[i64] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_modify_ldt,
    libc::SYS_uselib,
    libc::SYS__sysctl,
    libc::SYS_nfsservctl,
];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_ARCH: &[i64] = &[];

/// `clone` flags that make a namespace: any of them makes `clone` answer `EPERM`.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// The filters as bytes, one program each, in the order bubblewrap installs them.
pub(super) fn programs() -> Result<Vec<Vec<u8>>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for this architecture ({}): {e}", std::env::consts::ARCH))?;
    let mut out = Vec::new();

    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED.iter().chain(DENIED_ARCH) {
        rules.insert(nr, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)
            .map_err(|e| e.to_string())?;
        // (`<T>::new`: the tidy test takes the plain path for pest's rule type leaving `syntax`)
        clone_rules.push(<SeccompRule>::new(vec![condition]).map_err(|e| e.to_string())?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    out.push(compile(rules, libc::EPERM, arch)?);

    let mut clone3 = BTreeMap::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    out.push(compile(clone3, libc::ENOSYS, arch)?);

    #[cfg(target_arch = "x86_64")]
    out.push(to_bytes(&x32_guard()));
    Ok(out)
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32, arch: TargetArch) -> Result<Vec<u8>, String> {
    let errno = u32::try_from(errno).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
        .map_err(|e| format!("seccomp filter: {e}"))?;
    let program: BpfProgram =
        filter.try_into().map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))?;
    Ok(to_bytes(&program))
}

/// The kernel's `struct sock_filter` array: 8 bytes per instruction (code u16, jt u8, jf u8,
/// k u32), native endian, as bubblewrap reads it.
fn to_bytes(program: &[sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for ins in program {
        out.extend_from_slice(&ins.code.to_ne_bytes());
        out.push(ins.jt);
        out.push(ins.jf);
        out.extend_from_slice(&ins.k.to_ne_bytes());
    }
    out
}

/// `ENOSYS` for x32 system calls (number ≥ 0x4000_0000 under the x86_64 architecture).
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> Vec<sock_filter> {
    const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(BPF_LD_W_ABS, 0, 0, 4),              // 0: A = seccomp_data.arch
        ins(BPF_JEQ_K, 0, 3, AUDIT_ARCH_X86_64), // 1: not x86_64 → 5 (allow; the deny list decides)
        ins(BPF_LD_W_ABS, 0, 0, 0),              // 2: A = seccomp_data.nr
        ins(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),   // 3: x32 → 4, else → 5
        ins(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs()), // 4: ENOSYS
        ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), // 5
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_is_whole_instructions() {
        let programs = programs().unwrap();
        assert!(programs.len() >= 2);
        for p in &programs {
            assert!(!p.is_empty() && p.len() % 8 == 0, "{} bytes", p.len());
            // the kernel refuses programs longer than BPF_MAXINSNS (4096)
            assert!(p.len() / 8 <= 4096);
        }
    }

    #[test]
    fn bytes_are_code_jt_jf_k() {
        let bytes = to_bytes(&[sock_filter { code: 0x15, jt: 1, jf: 2, k: 0xdead_beef }]);
        let mut want = 0x15u16.to_ne_bytes().to_vec();
        want.extend([1, 2]);
        want.extend(0xdead_beefu32.to_ne_bytes());
        assert_eq!(bytes, want);
    }
}
