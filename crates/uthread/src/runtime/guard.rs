//! Stack-overflow reporting: a `SIGSEGV`/`SIGBUS` handler on an alternate signal stack that
//! recognises a fault in the running green thread's guard page, names the thread on stderr and
//! aborts. Faults it does not recognise go to the previously installed handler (Rust's own
//! main-thread overflow handler, or the default action).

use crate::arch;
use crate::runtime::carrier::current_stack_info;
use crate::sys;
use core::fmt::Write;
use std::sync::Once;

static mut PREV_SEGV: Option<libc::sigaction> = None;
static mut PREV_BUS: Option<libc::sigaction> = None;

/// Installs the fault handler for `SIGSEGV` and `SIGBUS`, once per process, remembering the
/// handlers it replaces so that faults it does not recognise go to them.
pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let handler = on_fault as *const () as libc::sighandler_t;
        let flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `on_fault` has the SA_SIGINFO signature and is async-signal-safe (it formats
        // into a stack buffer and calls write, abort or the previous handler). This runs once,
        // before any fault handler of ours can read PREV_*, which are written only here.
        // Every signal is blocked while it runs: a preemption tick arriving during the handler
        // would otherwise nest its own frame on the (small) alternate stack and could overflow
        // it, and the process would die silently instead of naming the thread.
        unsafe {
            PREV_SEGV = sys::install_sigaction(libc::SIGSEGV, handler, flags, true);
            PREV_BUS = sys::install_sigaction(libc::SIGBUS, handler, flags, true);
        }
    });
}

/// A fixed buffer formatter: the fault handler must not allocate.
struct Buf {
    bytes: [u8; 768],
    len: usize,
}

impl Write for Buf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes valid siginfo/ucontext pointers to SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: as above.
    let sp = unsafe { arch::ucontext_sp(uctx) };
    if let Some(info) = current_stack_info() {
        let (lo, hi) = info.guard;
        let hit = lo != hi
            && ((addr >= lo && addr < hi)
                // The kernel could not push a signal frame below the stack's end (the fault
                // then carries no useful address, but the interrupted rsp is near the guard).
                || (addr == 0 && sp >= lo && sp < hi + 16 * 1024));
        if hit {
            let mut b = Buf {
                bytes: [0; 768],
                len: 0,
            };
            let _ = write!(
                b,
                "\nuthread: green thread '{}' (id {}) overflowed its stack of {} bytes \
                 (fault at {:#x}, guard page {:#x}..{:#x}); aborting. Give it a larger \
                 stack with uthread::Builder::stack_size(..).\n",
                info.name, info.id, info.stack_size, addr, lo, hi
            );
            // SAFETY: write(2) and abort(3) are async-signal-safe; `b` is a local buffer.
            unsafe {
                libc::write(2, b.bytes.as_ptr() as *const libc::c_void, b.len);
                libc::abort();
            }
        }
    }
    // Not ours: chain to the previous handler.
    // SAFETY: PREV_* were written once before this handler was installed and never again.
    let prev = unsafe {
        if sig == libc::SIGBUS {
            *core::ptr::addr_of!(PREV_BUS)
        } else {
            *core::ptr::addr_of!(PREV_SEGV)
        }
    };
    match prev {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed as an SA_SIGINFO handler.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { core::mem::transmute(p.sa_sigaction) };
                f(sig, info, uctx);
            } else {
                // SAFETY: the previous handler was installed as a plain handler.
                let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // Restore the default action and return: the faulting instruction re-executes and
            // the process dies with the original signal (core dump as usual).
            // SAFETY: SIG_DFL is always a valid disposition.
            unsafe { sys::install_sigaction(sig, libc::SIG_DFL, 0, false) };
        }
    }
}

/// Size of the alternate signal stack a carrier needs: the fault handler formats its message
/// there (in a debug build `core::fmt` alone takes several KiB) and the kernel's signal frame
/// with the full register state takes up to a few KiB more. The 8 KiB (`SIGSTKSZ`) stack Rust
/// gives its threads is not always enough.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// An alternate signal stack of at least [`ALT_STACK_SIZE`] for the carrier's OS thread. A
/// smaller one already installed (Rust's) is replaced for the carrier's lifetime and put back
/// when it ends.
pub(crate) struct AltStack {
    /// Our mapping (base, length including the guard page) and the stack it replaced.
    mem: Option<(usize, usize, libc::stack_t)>,
}

impl AltStack {
    pub(crate) fn ensure() -> AltStack {
        // SAFETY: querying the current alternate stack with a valid out-pointer; mapping,
        // protecting and installing a fresh region that nothing else refers to. We are not
        // running on the alternate stack (this is called from block_on), so replacing it is
        // allowed (sigaltstack fails with EPERM otherwise, and we keep the old one).
        unsafe {
            let mut cur: libc::stack_t = core::mem::zeroed();
            if libc::sigaltstack(core::ptr::null(), &mut cur) != 0 {
                return AltStack { mem: None };
            }
            if cur.ss_flags & libc::SS_DISABLE == 0 && cur.ss_size >= ALT_STACK_SIZE {
                return AltStack { mem: None };
            }
            let page = crate::stack::page_size();
            let len = ALT_STACK_SIZE + page;
            let p = libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return AltStack { mem: None };
            }
            // A guard page below the alternate stack: overflowing it is a clean fault.
            libc::mprotect(p, page, libc::PROT_NONE);
            let st = libc::stack_t {
                ss_sp: (p as usize + page) as *mut libc::c_void,
                ss_flags: 0,
                ss_size: ALT_STACK_SIZE,
            };
            if libc::sigaltstack(&st, core::ptr::null_mut()) != 0 {
                libc::munmap(p, len);
                return AltStack { mem: None };
            }
            AltStack {
                mem: Some((p as usize, len, cur)),
            }
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if let Some((p, len, prev)) = self.mem {
            // SAFETY: we installed this alternate stack; put back the one it replaced (or
            // disable it) before unmapping. We are not running on it (drop happens in block_on
            // on the normal stack).
            unsafe {
                let restore = if prev.ss_flags & libc::SS_DISABLE == 0 {
                    libc::stack_t {
                        ss_sp: prev.ss_sp,
                        ss_flags: 0,
                        ss_size: prev.ss_size,
                    }
                } else {
                    libc::stack_t {
                        ss_sp: core::ptr::null_mut(),
                        ss_flags: libc::SS_DISABLE,
                        ss_size: 0,
                    }
                };
                libc::sigaltstack(&restore, core::ptr::null_mut());
                libc::munmap(p as *mut libc::c_void, len);
            }
        }
    }
}
