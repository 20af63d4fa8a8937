//! x86-64 System V context switch.
//!
//! All assembly for this architecture lives in this file. A suspended context is represented by
//! a single stack pointer; everything the ABI requires us to preserve that the compiler cannot
//! preserve itself is stored just below the suspended code's stack pointer by [`switch`]. The
//! saved pointer points at that frame; from it upwards:
//!
//! ```text
//!   rsp + 0   MXCSR (4 bytes)        SSE control/status: rounding mode, exception masks, FTZ/DAZ
//!   rsp + 4   x87 FPU control word   (2 bytes, 2 bytes padding)
//!   rsp + 8   rbx
//!   rsp + 16  rbp
//!   rsp + 24  resume address         where the suspended code continues
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
//!   switch saves and restores them itself;
//! * MXCSR and the x87 control word, which the compiler does not model: saved and restored.
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
//! value `stmxcsr` just stored stalls on that store; with floating-point work in flight around
//! each switch the unconditional `ldmxcsr` costs nothing measurable either). Without any FP
//! control state the switch would be 1.1 ns: `stmxcsr`, the price of keeping MXCSR per thread
//! as the ABI requires, is most of what is left.

use core::arch::{asm, global_asm};

/// Size of the frame `switch` leaves on a suspended stack (see the module docs).
pub const SWITCH_FRAME_BYTES: usize = 32;

/// MXCSR value at process start (all exceptions masked, round to nearest).
pub const DEFAULT_MXCSR: u32 = 0x1F80;
/// x87 control word at process start (all exceptions masked, 64-bit precision, round to nearest).
pub const DEFAULT_FPU_CW: u16 = 0x037F;

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
    // any inline-assembly block. rbp is cleared so frame-pointer chains end here. The function
    // never returns; the `ud2` makes a broken promise fail loudly instead of running off into
    // garbage. `.cfi_undefined rip` marks the bottom of the call stack for unwinders and
    // debuggers, so a backtrace stops here rather than walking into the stack's unused memory.
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
    "call rax",
    "ud2",
    ".cfi_endproc",
    ".size uthread_x86_64_start, .-uthread_x86_64_start",
    ".popsection",
);

/// Switches from the running context to the one suspended at `load_sp`, saving the running
/// context's stack pointer in `*save_sp`. Returns when some context switches back to `*save_sp`.
///
/// # Safety
/// `load_sp` must be a stack pointer produced by a previous `switch` (or by [`init_stack`]) whose
/// context has not been resumed since, on a stack that is still mapped; `save_sp` must be valid
/// for a write. Nothing may unwind across this call (the entry function catches all panics).
#[inline(always)]
pub unsafe fn switch(save_sp: *mut usize, load_sp: usize) {
    // SAFETY: forwarded contract. The block stores its 32-byte frame just below rsp (allowed:
    // without `nostack` the compiler keeps nothing there, and on entry rsp is 16-byte aligned,
    // so the frame is too), stores the frame's address to `*save_sp`, restores the target's
    // frame and continues on the target stack at its resume address. This context is resumed
    // at label 7 with rsp exactly as it was on entry, rbx, rbp, MXCSR and the x87 control word
    // restored, and r12-r15 plus every caller-saved register holding garbage, all of which the
    // operands declare as clobbered.
    unsafe {
        asm!(
            // Save, below rsp (no `nostack`: the red zone is ours): resume address, the two
            // registers LLVM reserves, the FP control words. Plain stores, not pushes (module
            // docs: the frames stay inside the red zone at every instruction).
            "lea rax, [rip + 7f]",
            "mov [rsp - 8], rax",
            "mov [rsp - 16], rbp",
            "mov [rsp - 24], rbx",
            "stmxcsr [rsp - 32]",
            "fnstcw [rsp - 28]",
            // Publish our frame; rax (clobbered) keeps it to compare the x87 control words.
            "lea rax, [rsp - 32]",
            "mov [rdi], rax",
            // Restore the target's FP control state. MXCSR is loaded unconditionally: reading
            // back the value STMXCSR just stored, to skip an equal load, waits on that store
            // and cost more than the load itself (module docs). FLDCW is the slow one of the
            // x87 pair while FNSTCW's value compares cheaply, so the control word is loaded
            // only when the two threads differ (rarely: few programs change rounding or
            // precision).
            "ldmxcsr [rsi]",
            "movzx edx, word ptr [rsi + 4]",
            "cmp dx, [rax + 4]",
            "je 3f",
            "fldcw [rsi + 4]",
            "3:",
            // Restore the target's registers, adopt its stack above the frame, resume it.
            "mov rbx, [rsi + 8]",
            "mov rbp, [rsi + 16]",
            "lea rsp, [rsi + 32]",
            "jmp qword ptr [rsi + 24]",
            "7:",
            in("rdi") save_sp,
            in("rsi") load_sp,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        )
    }
}

/// Prepares a fresh stack so that the first `switch` to the returned frame calls `entry(arg)`
/// on it. `top` is one past the highest usable byte.
///
/// # Safety
/// `top` must be 16-byte aligned with at least 64 writable bytes below it.
pub unsafe fn init_stack(top: usize, entry: unsafe extern "C" fn(usize) -> !, arg: usize) -> usize {
    debug_assert_eq!(top % 16, 0);
    // Leave 16 zero bytes at the very top (a null "caller" for any frame-pointer walker), then
    // the switch frame. When the frame is restored, rsp = sp + 32, which must be 16-aligned (as
    // at any inline-assembly block) so that the `call` in the start stub gives the entry
    // function a standard (rsp + 8) % 16 == 0 frame.
    let sp = top - 16 - SWITCH_FRAME_BYTES;
    let words = sp as *mut usize;
    // SAFETY: the caller guarantees [top - 64, top) is writable; we write [sp, top).
    unsafe {
        core::ptr::write(
            words,
            (DEFAULT_MXCSR as usize) | ((DEFAULT_FPU_CW as usize) << 32),
        );
        core::ptr::write(words.add(1), arg); // rbx: the argument
        core::ptr::write(words.add(2), entry as *const () as usize); // rbp: function to call
        core::ptr::write(words.add(3), uthread_x86_64_start as *const () as usize); // resume address
        core::ptr::write(words.add(4), 0);
        core::ptr::write(words.add(5), 0);
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
