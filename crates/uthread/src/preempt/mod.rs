//! Preemption control, as two leaves: the preempt-disable count with what is built on it
//! (`count`), and the per-carrier timer that produces ticks (`timer`). The tick handler that
//! decides whether to switch lives next to the switch it performs, in `runtime/tick.rs`, with
//! the safety model.

pub(crate) mod count;
pub(crate) mod timer;

pub use count::{
    critical_section, preempt_point, preempt_safe_alloc_installed, PreemptGuard, PreemptSafeAlloc,
};
pub use timer::PREEMPT_SIGNAL;
