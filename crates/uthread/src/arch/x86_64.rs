//! x86-64 System V context switch.
//!
//! All assembly for this architecture lives in this file. A suspended context is represented by
//! a single stack pointer; the registers the compiler cannot preserve itself are stored just
//! below the suspended code's stack pointer by [`switch`]. The saved pointer points at that
//! frame; from it upwards:
//!
//! ```text
//!   rsp + 0   rbx
//!   rsp + 8   rbp
//!   rsp + 16  resume address         where the suspended code continues
//! ```
//!
//! The SysV ABI makes rbx, rbp, r12-r15, rsp, the x87 control word and the control bits of
//! MXCSR callee-saved; every other register (rax, rcx, rdx, rsi, rdi, r8-r11, xmm0-15, the x87
//! stack, the status flags) is caller-saved. [`switch`] is inline assembly, not a called
//! routine, so it tells the compiler exactly what it destroys:
//!
//! * every caller-saved register, by `clobber_abi("C")`, as a call would;
//! * r12-r15, declared clobbered: the compiler keeps no value in them across the switch and
//!   preserves them for its own caller in the enclosing function's prologue and epilogue, so a
//!   switch spills only the ones actually live (usually none, and never per switch in a loop);
//! * rbx and rbp, which LLVM reserves and will not let inline assembly declare clobbered: the
//!   switch saves and restores them itself.
//!
//! MXCSR and the x87 control word (the floating-point environment, [`FpEnv`]) are **not**
//! switched here. Nearly no thread changes them, and `stmxcsr` alone was ~3.5 ns of a 4.8 ns
//! switch on the machine below (it waits for the FP pipeline). The runtime saves and loads them
//! around `switch` only for threads that declare an environment of their own
//! (`Builder::own_fp_env`); every other thread runs in its carrier's environment and must leave
//! it as it found it. corosensei and Go's runtime make the same choice without the opt-in;
//! Boost.Context pays on every switch.
//!
//! The direction flag is clear at every call and every inline-assembly block by ABI rule, so it
//! needs no saving.
//!
//! Why inline and why `jmp` instead of `call`/`ret`: a called switch routine ends in a `ret` to
//! an address the return-stack predictor has never seen (it predicts the caller of the *old*
//! context), a mispredict on almost every switch. Resuming with an indirect `jmp` leaves the
//! return-stack predictor balanced and lets the indirect-branch predictor learn the alternation
//! of resume points.
//!
//! Why stores below rsp instead of pushes (the two measured the same): rsp keeps its value until
//! the one instruction that moves onto the target stack, and on either side of it the frame in
//! use lies within the 128-byte red zone below rsp, which the kernel skips when it builds a
//! signal frame. A signal arriving at any instruction of the switch (a preemption tick or any
//! other) therefore cannot overwrite the frame being saved or the one being restored. The tick
//! handler itself never switches while a switch is in progress (the runtime's preempt count is
//! raised around it).
//!
//! Measured on an AMD EPYC (Zen 4, 2.6 GHz), two contexts ping-ponging, ns per switch: called
//! routine ending in `ret` 10.4; the same ending in `pop` + `jmp` 6.6; inline with `jmp` 6.4;
//! inline with MXCSR loaded unconditionally instead of compared first 4.8 (reading back the
//! value `stmxcsr` just stored stalls on that store); without any FP control state, this
//! switch, about 1.1.

use core::arch::{asm, global_asm};

/// Size of the frame `switch` leaves on a suspended stack (see the module docs).
pub const SWITCH_FRAME_BYTES: usize = 24;

/// The floating-point environment the SysV ABI makes callee-saved: MXCSR (SSE rounding mode,
/// exception masks, flush-to-zero, denormals-are-zero; its sticky exception flags come along)
/// and the x87 control word (x87 rounding, precision, exception masks).
///
/// Only ever read from the processor (or the process default), so every value is one the
/// processor accepts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpEnv {
    mxcsr: u32,
    fcw: u16,
}

impl FpEnv {
    /// The environment every process starts with: all exceptions masked, round to nearest,
    /// no flush-to-zero, x87 at 64-bit precision.
    pub const PROCESS_DEFAULT: FpEnv = FpEnv {
        mxcsr: 0x1F80,
        fcw: 0x037F,
    };

    /// The calling OS thread's environment now.
    #[inline(always)]
    pub fn current() -> FpEnv {
        let mut env = FpEnv::PROCESS_DEFAULT;
        // SAFETY: both instructions only store their register (4 and 2 bytes) to the fields
        // they are given, which are valid for the write.
        unsafe {
            asm!(
                "stmxcsr [{m}]",
                "fnstcw [{c}]",
                m = in(reg) &mut env.mxcsr,
                c = in(reg) &mut env.fcw,
                options(nostack, preserves_flags),
            );
        }
        env
    }

    /// Makes `self` the calling OS thread's environment. `ldmxcsr` is issued unconditionally
    /// (reading MXCSR back to compare costs more than loading it); `fldcw`, the slower of the
    /// x87 pair, only when the control word differs.
    #[inline(always)]
    pub fn load(self) {
        // SAFETY: `self` holds values read from the processor or the process default, so no
        // reserved MXCSR bit is set (which would fault); the loads change only the FP
        // environment, which is what this function is for.
        unsafe {
            asm!(
                "ldmxcsr [{m}]",
                "fnstcw [{tmp}]",
                "mov {t:x}, [{tmp}]",
                "cmp {t:x}, [{c}]",
                "je 2f",
                "fldcw [{c}]",
                "2:",
                m = in(reg) &self.mxcsr,
                c = in(reg) &self.fcw,
                tmp = in(reg) &mut 0u16,
                t = out(reg) _,
                options(nostack),
            );
        }
    }
}

extern "C" {
    /// First instructions of a fresh context; see [`init_stack`]. Assembly symbols are not
    /// mangled, so the name carries the crate's; `.hidden` keeps it out of the exports of any
    /// shared object it is linked into. It needs no version: the stub and `init_stack`, which
    /// lays out the frame the stub expects, are always compiled together. (Two semver-
    /// incompatible copies of this crate in one binary would clash on it at link time, as on
    /// any unmangled symbol.)
    fn uthread_x86_64_start();
}

global_asm!(
    // Entry of a fresh context. The first `switch` into it pops rbx = argument, rbp = entry
    // function (both placed by `init_stack`) and jumps here with rsp 16-byte aligned, as at
    // any inline-assembly block. rbp is cleared so frame-pointer chains end here. The entry
    // function is entered by a jump over a pushed return address of 0, not by a `call`: it
    // never returns, and a `call` would leave an entry on the CPU's return-address stack that
    // no `ret` ever takes, so after the thread's exit every return of the context resumed next
    // would be predicted from the wrong entry (spawn + run + join 38.9 -> 28.9 ns here with
    // the exit inlined into the entry function for the same reason; see the README). The 0
    // ends backtraces and unwinders at the entry function, as `.cfi_undefined rip` does here.
    ".pushsection .text.uthread_x86_64_start,\"ax\",@progbits",
    ".globl uthread_x86_64_start",
    ".hidden uthread_x86_64_start",
    ".type uthread_x86_64_start,@function",
    ".p2align 4",
    "uthread_x86_64_start:",
    ".cfi_startproc",
    ".cfi_undefined rip",
    "mov rdi, rbx",
    "mov rax, rbp",
    "xor ebp, ebp",
    "push 0",
    "jmp rax",
    ".cfi_endproc",
    ".size uthread_x86_64_start, .-uthread_x86_64_start",
    ".popsection",
);

/// Switches from the running context to the one suspended at `load_sp`, saving the running
/// context's stack pointer in `*save_sp`. Returns when some context switches back to `*save_sp`,
/// with the `carry` word that context passed: a value both sides hold anyway (the runtime's
/// carrier state) arrives in a register, so the resumed code need not load it again through
/// its new stack (a chain of loads that waits for the stack pointer). A fresh context's start
/// stub ignores it. The floating-point environment is left as it is (module docs).
///
/// # Safety
/// `load_sp` must be a stack pointer produced by a previous `switch` (or by [`init_stack`]) whose
/// context has not been resumed since, on a stack that is still mapped; `save_sp` must be valid
/// for a write. Nothing may unwind across this call (the entry function catches all panics).
#[inline(always)]
pub unsafe fn switch(save_sp: *mut usize, load_sp: usize, carry: usize) -> usize {
    let carried;
    // SAFETY: forwarded contract. The block stores its 24-byte frame just below rsp (allowed:
    // without `nostack` the compiler keeps nothing there), stores the frame's address to
    // `*save_sp`, restores the target's frame and continues on the target stack at its resume
    // address. This context is resumed at label 7 with rsp exactly as it was on entry, rbx and
    // rbp restored, rdx holding the resuming side's `carry` (the block never writes rdx), and
    // r12-r15 plus every other caller-saved register holding garbage, all of which the operands
    // declare as clobbered.
    unsafe {
        asm!(
            // Save, below rsp (no `nostack`: the red zone is ours): resume address and the two
            // registers LLVM reserves. Plain stores, not pushes (module docs: the frames stay
            // inside the red zone at every instruction).
            "lea rax, [rip + 7f]",
            "mov [rsp - 8], rax",
            "mov [rsp - 16], rbp",
            "mov [rsp - 24], rbx",
            // Publish our frame.
            "lea rax, [rsp - 24]",
            "mov [rdi], rax",
            // Restore the target's registers, adopt its stack above the frame, resume it.
            "mov rbx, [rsi]",
            "mov rbp, [rsi + 8]",
            "lea rsp, [rsi + 24]",
            "jmp qword ptr [rsi + 16]",
            "7:",
            in("rdi") save_sp,
            in("rsi") load_sp,
            inout("rdx") carry => carried,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        )
    }
    carried
}

/// Prepares a fresh stack so that the first `switch` to the returned frame calls `entry(arg)`
/// on it. `top` is one past the highest usable byte.
///
/// # Safety
/// `top` must be 16-byte aligned with at least 64 writable bytes below it.
pub unsafe fn init_stack(top: usize, entry: unsafe extern "C" fn(usize) -> !, arg: usize) -> usize {
    debug_assert_eq!(top % 16, 0);
    // Leave 16 zero bytes at the very top (a null "caller" for any frame-pointer walker), then
    // the switch frame. When the frame is restored, rsp = sp + 24 = top - 16, which must be
    // 16-aligned (as at any inline-assembly block) so that the `call` in the start stub gives
    // the entry function a standard (rsp + 8) % 16 == 0 frame.
    let sp = top - 16 - SWITCH_FRAME_BYTES;
    let words = sp as *mut usize;
    // SAFETY: the caller guarantees [top - 64, top) is writable; we write [sp, top).
    unsafe {
        core::ptr::write(words, arg); // rbx: the argument
        core::ptr::write(words.add(1), entry as *const () as usize); // rbp: function to call
        core::ptr::write(words.add(2), uthread_x86_64_start as *const () as usize); // resume
        core::ptr::write(words.add(3), 0);
        core::ptr::write(words.add(4), 0);
    }
    sp
}

/// Stack pointer recorded in a signal's `ucontext`, used to attribute a SIGSEGV to a stack.
///
/// # Safety
/// `uctx` must be the third argument of an `SA_SIGINFO` handler.
pub unsafe fn ucontext_sp(uctx: *mut libc::c_void) -> usize {
    let uc = uctx as *const libc::ucontext_t;
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
    unsafe { (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] as usize }
}
