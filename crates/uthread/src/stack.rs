//! Stacks: `mmap`'d, lazily committed, optionally with a `PROT_NONE` guard page below, and
//! pooled for reuse.
//!
//! Memory is reserved with `MAP_NORESERVE`, so a 256 KiB stack costs only the pages a thread
//! actually touches. A guarded stack is two kernel mappings (the guard and the usable part);
//! `vm.max_map_count` (default 65530) therefore caps the number of guarded stacks at roughly
//! 32,000 per process — see the README.

use std::io;

/// Smallest stack accepted (a signal frame alone can take 3.5 KiB with AVX-512 state).
pub const MIN_STACK_SIZE: usize = 8 * 1024;

pub(crate) fn page_size() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p <= 0 { 4096 } else { p as usize };
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// One mapped stack. Dropping it unmaps the memory.
#[derive(Debug)]
pub(crate) struct Stack {
    /// Lowest mapped address (start of the guard page if there is one).
    base: usize,
    /// Total mapped length, guard included.
    len: usize,
    guard: usize,
}

impl Stack {
    /// Maps a stack with `usable` bytes (a multiple of the page size) above an optional guard page.
    pub(crate) fn new(usable: usize, guard_page: bool) -> io::Result<Stack> {
        let page = page_size();
        let guard = if guard_page { page } else { 0 };
        let len = usable + guard;
        // SAFETY: anonymous private mapping at a kernel-chosen address; no existing memory is
        // affected. The result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("uthread: mmap of a {len}-byte stack failed: {e}"),
            ));
        }
        let stack = Stack {
            base: base as usize,
            len,
            guard,
        };
        if guard_page {
            // SAFETY: the first page of the mapping we just created; nothing else uses it.
            let r = unsafe { libc::mprotect(base, guard, libc::PROT_NONE) };
            if r != 0 {
                let e = io::Error::last_os_error();
                drop(stack);
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "uthread: cannot protect a stack guard page ({e}); every guarded stack \
                         takes 2 kernel mappings and vm.max_map_count limits them: raise it \
                         (sysctl -w vm.max_map_count=N) or build the runtime with \
                         guard_pages(false)"
                    ),
                ));
            }
        }
        Ok(stack)
    }

    /// One past the highest usable byte (16-byte aligned since it is page aligned).
    pub(crate) fn top(&self) -> usize {
        self.base + self.len
    }

    /// Usable bytes (guard excluded).
    pub(crate) fn usable(&self) -> usize {
        self.len - self.guard
    }

    pub(crate) fn has_guard(&self) -> bool {
        self.guard != 0
    }

    /// The guard page range `[lo, hi)`; empty when there is no guard.
    pub(crate) fn guard_range(&self) -> (usize, usize) {
        (self.base, self.base + self.guard)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: we own this mapping; no context runs on it any more (the pool only drops
        // stacks of finished threads).
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// A free list of stacks, keyed by (usable size, guard). Reusing a stack avoids two or three
/// system calls and the page faults of touching fresh memory.
#[derive(Debug)]
pub(crate) struct StackPool {
    /// (usable size, guarded, free stacks). Few distinct sizes are expected; linear search.
    classes: Vec<(usize, bool, Vec<Stack>)>,
    pooled: usize,
    max_pooled: usize,
}

impl StackPool {
    pub(crate) fn new(max_pooled: usize) -> Self {
        StackPool {
            classes: Vec::new(),
            pooled: 0,
            max_pooled,
        }
    }

    pub(crate) fn get(&mut self, usable: usize, guard: bool) -> io::Result<Stack> {
        for (size, g, list) in self.classes.iter_mut() {
            if *size == usable && *g == guard {
                if let Some(s) = list.pop() {
                    self.pooled -= 1;
                    return Ok(s);
                }
                break;
            }
        }
        Stack::new(usable, guard)
    }

    pub(crate) fn put(&mut self, stack: Stack) {
        if self.pooled >= self.max_pooled {
            return; // dropped: unmapped
        }
        let (usable, guard) = (stack.usable(), stack.has_guard());
        self.pooled += 1;
        for (size, g, list) in self.classes.iter_mut() {
            if *size == usable && *g == guard {
                list.push(stack);
                return;
            }
        }
        self.classes.push((usable, guard, vec![stack]));
    }

    pub(crate) fn pooled(&self) -> usize {
        self.pooled
    }
}

/// Rounds a requested stack size up to whole pages, with the minimum applied.
pub(crate) fn round_stack_size(requested: usize) -> usize {
    let page = page_size();
    let s = requested.max(MIN_STACK_SIZE);
    if page.is_power_of_two() {
        // Every spawn passes here: a mask instead of a 64-bit division. A request so large that
        // rounding would overflow falls through to the checked path (and fails to map).
        if let Some(t) = s.checked_add(page - 1) {
            return t & !(page - 1);
        }
    }
    s.div_ceil(page) * page
}
