//! What the sandbox's first process does to itself between `fork` and the `exec` of
//! bubblewrap: every inherited descriptor but 0, 1, 2 and the ones bubblewrap is given marked
//! close-on-exec, no inheritable capabilities, and the rlimits of the run. (The user and group
//! of a slot are set just before, by `Command::uid` and `Command::gid`, which also clear the
//! supplementary groups when `rubric` is root.) This replaces three helper executables (a shell
//! wrapper, `setpriv` and `prlimit`) that cost about 4.6 ms of every execution.
//!
//! The only `unsafe` of the sandbox is here, for two reasons: `CommandExt::pre_exec` is unsafe
//! (its closure runs in a forked child of a multi-threaded process, where only
//! async-signal-safe calls are sound), and the system calls are made through `libc`. The
//! closure allocates nothing, takes no lock and calls nothing but `close_range`, `fcntl`,
//! `getrlimit`, `setrlimit`, `capget` and `capset`, all plain system calls; it reads only the
//! [`ChildSetup`] moved into it, built in the parent before the fork.
#![expect(unsafe_code, reason = "pre_exec and raw system calls in the forked child; each block says why it is sound")]

use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The rlimits of a run, in the units the kernel takes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rlimits {
    /// RLIMIT_CPU soft limit, seconds (the hard limit is one more: SIGXCPU, then SIGKILL).
    pub cpu_s: u64,
    /// RLIMIT_AS, bytes.
    pub address_space: u64,
    /// RLIMIT_NPROC, processes and threads of the user.
    pub processes: u64,
    /// RLIMIT_FSIZE, bytes.
    pub file_size: u64,
    /// RLIMIT_NOFILE, descriptors.
    pub open_files: u64,
}

/// Everything the child does before `exec`, decided in the parent.
#[derive(Debug)]
pub(super) struct ChildSetup {
    pub limits: Rlimits,
    /// Descriptors of the parent that bubblewrap is given by number (the seccomp programs, its
    /// status pipe): they stay open across `exec`; every other one from 3 up is closed there.
    pub keep: Vec<RawFd>,
}

/// Installs `setup` to run in `cmd`'s child after the user change and before `exec`.
pub(super) fn install(cmd: &mut Command, setup: ChildSetup) {
    // SAFETY: the closure runs in the child between fork and exec. `ChildSetup::apply`
    // allocates nothing (`keep` was allocated in the parent and is only read), takes no lock,
    // touches no global state of the Rust runtime, and makes only async-signal-safe system
    // calls; its errors are `io::Error::last_os_error()`, which does not allocate.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
}

impl ChildSetup {
    fn apply(&self) -> io::Result<()> {
        close_inherited(&self.keep)?;
        clear_inheritable_capabilities()?;
        let l = &self.limits;
        set_limit(libc::RLIMIT_CPU, l.cpu_s, l.cpu_s.saturating_add(1))?;
        set_limit(libc::RLIMIT_AS, l.address_space, l.address_space)?;
        set_limit(libc::RLIMIT_NPROC, l.processes, l.processes)?;
        set_limit(libc::RLIMIT_FSIZE, l.file_size, l.file_size)?;
        set_limit(libc::RLIMIT_NOFILE, l.open_files, l.open_files)?;
        set_limit(libc::RLIMIT_CORE, 0, 0)
    }
}

fn check(r: libc::c_long) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Marks every descriptor from 3 up close-on-exec, then clears the flag on `keep`: whatever the
/// parent (or its parent) left open without close-on-exec never reaches bubblewrap or the
/// program. `close_range` (Linux 5.11) does it in one call; older kernels get a loop up to the
/// descriptor limit.
fn close_inherited(keep: &[RawFd]) -> io::Result<()> {
    // SAFETY: `close_range` with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors; it takes
    // integers and no pointers.
    let r = unsafe {
        libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC)
    };
    if r < 0 {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `lim` is a valid, writable `rlimit` for the duration of the call.
        check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }.into())?;
        let top = RawFd::try_from(lim.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in 3..top {
            // SAFETY: F_SETFD on any integer is harmless: EBADF for one that is not open.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    for &fd in keep {
        // SAFETY: F_SETFD takes an integer flag; `fd` is a descriptor inherited from the parent.
        check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }.into())?;
    }
    Ok(())
}

/// `struct __user_cap_header_struct` of `<linux/capability.h>`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `<linux/capability.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets as two `CapData`.
const CAP_VERSION_3: u32 = 0x2008_0522;

/// Empties the inheritable capability set (dropping capabilities is always allowed). Changing
/// from root to a slot's user already emptied the permitted, effective and ambient sets; the
/// inheritable one would survive, and with it capabilities a file's inheritable bits grant on
/// `exec`.
fn clear_inheritable_capabilities() -> io::Result<()> {
    let mut header = CapHeader { version: CAP_VERSION_3, pid: 0 };
    let mut data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: `header` and `data` are valid, writable, `repr(C)` and laid out as the kernel's
    // version-3 structures (one header, two data elements) for the duration of the call.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, data.as_mut_ptr()) })?;
    if data.iter().all(|d| d.inheritable == 0) {
        return Ok(());
    }
    for d in &mut data {
        d.inheritable = 0;
    }
    header.pid = 0;
    // SAFETY: as for `capget`; `capset` only reads them.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, data.as_ptr()) })
}

fn set_limit(resource: Resource, soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: `lim` is a valid `rlimit` for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &lim) }.into())
}

/// The type of `setrlimit`'s first argument (it differs between C libraries).
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;
