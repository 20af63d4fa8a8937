//! Architecture-specific code: the context switch and stack-frame layout.
//!
//! One module per architecture, each exporting the same items (`switch`, `init_stack`,
//! `ucontext_sp`). Only x86-64 exists today; an aarch64 port adds `aarch64.rs` with the same
//! surface.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use self::x86_64::*;
