//! x86-64 System V context switch.
//!
//! All assembly for this architecture lives in this file. A suspended context is represented by
//! a single stack pointer: everything else the ABI requires us to preserve is pushed on the
//! suspended stack by [`switch`]. The layout of a suspended stack, from the saved `rsp` upwards:
//!
//! ```text
//!   rsp + 0   MXCSR (4 bytes)        SSE control/status: rounding mode, exception masks, FTZ/DAZ
//!   rsp + 4   x87 FPU control word   (2 bytes, 2 bytes padding)
//!   rsp + 8   r15
//!   rsp + 16  r14
//!   rsp + 24  r13
//!   rsp + 32  r12
//!   rsp + 40  rbx
//!   rsp + 48  rbp
//!   rsp + 56  return address
//! ```
//!
//! The SysV ABI makes rbx, rbp, r12-r15, rsp, the x87 control word and the control bits of
//! MXCSR callee-saved; every other register (rax, rcx, rdx, rsi, rdi, r8-r11, xmm0-15, the x87
//! stack, the status flags) is caller-saved, so the compiler already assumes `switch` destroys
//! them. The direction flag is clear at every call by ABI rule, so it needs no saving.

use core::arch::global_asm;

/// Size of the frame `switch` leaves on a suspended stack (see the module docs).
pub const SWITCH_FRAME_BYTES: usize = 64;

/// MXCSR value at process start (all exceptions masked, round to nearest).
pub const DEFAULT_MXCSR: u32 = 0x1F80;
/// x87 control word at process start (all exceptions masked, 64-bit precision, round to nearest).
pub const DEFAULT_FPU_CW: u16 = 0x037F;

extern "C" {
    /// Saves the callee-saved state of the caller on its stack, stores the resulting stack
    /// pointer to `*save_sp`, loads `load_sp` and restores the state found there, then returns
    /// into the context that was suspended at `load_sp`.
    fn uthread_x86_64_switch_v1(save_sp: *mut usize, load_sp: usize);
    /// First instructions of a fresh context; see [`init_stack`].
    fn uthread_x86_64_start_v1();
}

global_asm!(
    ".pushsection .text.uthread_x86_64_switch_v1,\"ax\",@progbits",
    ".globl uthread_x86_64_switch_v1",
    ".hidden uthread_x86_64_switch_v1",
    ".type uthread_x86_64_switch_v1,@function",
    ".p2align 4",
    "uthread_x86_64_switch_v1:",
    ".cfi_startproc",
    // Callee-saved integer registers of the SysV ABI.
    "push rbp",
    ".cfi_adjust_cfa_offset 8",
    "push rbx",
    ".cfi_adjust_cfa_offset 8",
    "push r12",
    ".cfi_adjust_cfa_offset 8",
    "push r13",
    ".cfi_adjust_cfa_offset 8",
    "push r14",
    ".cfi_adjust_cfa_offset 8",
    "push r15",
    ".cfi_adjust_cfa_offset 8",
    // Callee-saved floating-point control state: MXCSR and the x87 control word. Each green
    // thread keeps its own rounding mode / exception masks, exactly as an OS thread would.
    "sub rsp, 8",
    ".cfi_adjust_cfa_offset 8",
    "stmxcsr [rsp]",
    "fnstcw [rsp + 4]",
    // Publish our stack pointer, adopt the other one. From here on we run on the target stack;
    // rax (caller-saved) keeps the old one so we can compare the two saved control words.
    "mov [rdi], rsp",
    "mov rax, rsp",
    "mov rsp, rsi",
    // Restore the target's FP control state. LDMXCSR and FLDCW are slow (microcoded, partly
    // serialising) whereas comparing is cheap, and threads rarely differ in rounding mode or
    // exception masks: load only on a difference. (The comparison reads what the CPU holds
    // now, as just stored in the old frame.)
    "mov ecx, [rax]",
    "cmp ecx, [rsp]",
    "je 2f",
    "ldmxcsr [rsp]",
    "2:",
    "movzx edx, word ptr [rax + 4]",
    "cmp dx, [rsp + 4]",
    "je 3f",
    "fldcw [rsp + 4]",
    "3:",
    "add rsp, 8",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".cfi_endproc",
    ".size uthread_x86_64_switch_v1, .-uthread_x86_64_switch_v1",
    ".popsection",
    //
    // Entry of a fresh context. `switch` "returns" here with r12 = argument, r13 = entry function
    // (both placed by `init_stack`) and rsp 16-byte aligned. The function never returns; the
    // `ud2` makes a broken promise fail loudly instead of running off into garbage.
    // `.cfi_undefined rip` marks the bottom of the call stack for unwinders and debuggers, so a
    // backtrace stops here rather than walking into the stack's unused memory.
    ".pushsection .text.uthread_x86_64_start_v1,\"ax\",@progbits",
    ".globl uthread_x86_64_start_v1",
    ".hidden uthread_x86_64_start_v1",
    ".type uthread_x86_64_start_v1,@function",
    ".p2align 4",
    "uthread_x86_64_start_v1:",
    ".cfi_startproc",
    ".cfi_undefined rip",
    "mov rdi, r12",
    "call r13",
    "ud2",
    ".cfi_endproc",
    ".size uthread_x86_64_start_v1, .-uthread_x86_64_start_v1",
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
    // A direct `call` from inline assembly rather than a Rust call of the extern function:
    // in a position-independent executable the latter goes through the GOT (a load and an
    // indirect call on every switch), while `sym` of a hidden symbol resolves to a direct,
    // PC-relative call. The operands describe exactly the SysV call contract of the routine:
    // arguments in rdi/rsi, every caller-saved register (general, vector, x87/MMX, mask) and
    // the flags clobbered (`clobber_abi("C")`), memory read and written (no `nomem`), and the
    // stack used below rsp (no `nostack`, so the compiler keeps nothing in the red zone and
    // rsp is call-aligned here, as the routine's frame layout expects).
    // SAFETY: forwarded contract; the routine only touches the two stacks and the state it
    // saves and restores, and returns (when this context is resumed) with rsp and every
    // callee-saved register, the x87 control word and MXCSR as they were at the call.
    unsafe {
        core::arch::asm!(
            "call {f}",
            f = sym uthread_x86_64_switch_v1,
            in("rdi") save_sp,
            in("rsi") load_sp,
            clobber_abi("C"),
        )
    }
}

/// Prepares a fresh stack so that the first `switch` to the returned stack pointer calls
/// `entry(arg)` on it. `top` is one past the highest usable byte.
///
/// # Safety
/// `top` must be 16-byte aligned with at least 128 writable bytes below it.
pub unsafe fn init_stack(top: usize, entry: unsafe extern "C" fn(usize) -> !, arg: usize) -> usize {
    debug_assert_eq!(top % 16, 0);
    // Leave 16 zero bytes at the very top (a null "caller" for any frame-pointer walker), then
    // the switch frame. After `ret` pops the return address, rsp = sp + 64, which must be
    // 16-aligned so that the `call` in the start stub gives the entry function a standard
    // (rsp + 8) % 16 == 0 frame.
    let sp = top - 16 - SWITCH_FRAME_BYTES;
    let words = sp as *mut usize;
    // SAFETY: the caller guarantees [top - 128, top) is writable; we write [sp, top).
    unsafe {
        core::ptr::write(
            words,
            (DEFAULT_MXCSR as usize) | ((DEFAULT_FPU_CW as usize) << 32),
        );
        core::ptr::write(words.add(1), 0); // r15
        core::ptr::write(words.add(2), 0); // r14
        core::ptr::write(words.add(3), entry as *const () as usize); // r13: function to call
        core::ptr::write(words.add(4), arg); // r12: its argument
        core::ptr::write(words.add(5), 0); // rbx
        core::ptr::write(words.add(6), 0); // rbp = 0 ends frame-pointer chains
        core::ptr::write(words.add(7), uthread_x86_64_start_v1 as *const () as usize); // return address
        core::ptr::write(words.add(8), 0);
        core::ptr::write(words.add(9), 0);
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
