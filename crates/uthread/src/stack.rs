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

#[inline]
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
        let Some(len) = usable.checked_add(guard) else {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("uthread: a stack of {usable} bytes plus its guard page cannot be mapped"),
            ));
        };
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

    /// A descriptor of no memory, for the scheduler pseudo-thread (never dropped).
    pub(crate) const fn empty() -> Stack {
        Stack {
            base: 0,
            len: 0,
            guard: 0,
        }
    }

    /// Lowest usable address (just above the guard page, if any).
    pub(crate) fn bottom(&self) -> usize {
        self.base + self.guard
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

/// Header written into the top bytes of a pooled stack: the pool is a linked list threaded
/// through the stacks themselves, so pooling never allocates and a put or get is a few stores.
/// Those bytes were last used by the control block of the thread that ran there, so they are
/// already committed and usually still in cache.
struct FreeStack {
    next: *mut FreeStack,
    stack: Stack,
}

/// A `Stack`'s parts without its ownership (no `Drop`): whoever holds one with `base != 0`
/// owns the mapping and must turn it back into a `Stack` exactly once.
#[derive(Debug, Clone, Copy)]
struct RawStack {
    base: usize,
    len: usize,
    guard: usize,
}

impl RawStack {
    const NONE: RawStack = RawStack {
        base: 0,
        len: 0,
        guard: 0,
    };

    fn from_stack(s: Stack) -> RawStack {
        let r = RawStack {
            base: s.base,
            len: s.len,
            guard: s.guard,
        };
        // Ownership of the mapping moves into the parts.
        core::mem::forget(s);
        r
    }

    fn into_stack(self) -> Stack {
        Stack {
            base: self.base,
            len: self.len,
            guard: self.guard,
        }
    }
}

/// Free stacks of one (mapping size, guard) class.
#[derive(Debug)]
struct Class {
    usable: usize,
    guard: bool,
    head: *mut FreeStack,
}

/// A free list of stacks per (usable size, guard) class. Reusing a stack avoids two or three
/// system calls and the page faults of touching fresh memory.
#[derive(Debug)]
pub(crate) struct StackPool {
    /// The stack put back last, kept as a plain descriptor: a thread that is spawned, run and
    /// joined over and over takes and returns this one without touching the lists. Held as its
    /// parts (`base == 0`: none) rather than an `Option<Stack>`: taking an `Option` copied the
    /// descriptor through memory and read it back at another offset, a store-to-load
    /// forwarding stall that cost about 5 ns of every spawn.
    last: RawStack,
    /// Few distinct classes are expected (one per stack size in use): linear search, most
    /// recently added last.
    classes: Vec<Class>,
    pooled: usize,
    max_pooled: usize,
}

impl StackPool {
    pub(crate) fn new(max_pooled: usize) -> Self {
        StackPool {
            last: RawStack::NONE,
            classes: Vec::new(),
            pooled: 0,
            max_pooled,
        }
    }

    /// A stack of exactly `usable` bytes (guarded or not) from the pool, else freshly mapped.
    /// The flag says whether it was mapped now.
    #[inline(always)]
    pub(crate) fn get(&mut self, usable: usize, guard: bool) -> io::Result<(Stack, bool)> {
        let l = self.last;
        if l.base != 0 && l.len - l.guard == usable && (l.guard != 0) == guard {
            self.last = RawStack::NONE;
            self.pooled -= 1;
            return Ok((l.into_stack(), false));
        }
        self.get_listed(usable, guard)
    }

    #[inline(never)]
    fn get_listed(&mut self, usable: usize, guard: bool) -> io::Result<(Stack, bool)> {
        for c in self.classes.iter_mut() {
            if c.usable == usable && c.guard == guard {
                if !c.head.is_null() {
                    let f = c.head;
                    // SAFETY: `f` is the header `put` wrote inside a pooled stack, which stays
                    // mapped while pooled; reading it out moves the descriptor back to us.
                    let (next, stack) = unsafe { ((*f).next, core::ptr::read(&(*f).stack)) };
                    c.head = next;
                    self.pooled -= 1;
                    return Ok((stack, false));
                }
                break;
            }
        }
        Stack::new(usable, guard).map(|s| (s, true))
    }

    /// Keeps `stack` for reuse, or unmaps it when the pool is full. No context may run on it.
    #[inline]
    pub(crate) fn put(&mut self, stack: Stack) {
        if self.pooled >= self.max_pooled {
            return; // dropped: unmapped
        }
        self.pooled += 1;
        let older = core::mem::replace(&mut self.last, RawStack::from_stack(stack));
        if older.base != 0 {
            self.put_listed(older.into_stack());
        }
    }

    /// Threads `stack` onto its class list (`pooled` already counts it).
    #[inline(never)]
    fn put_listed(&mut self, stack: Stack) {
        let (usable, guard) = (stack.usable(), stack.has_guard());
        let idx = match self
            .classes
            .iter()
            .position(|c| c.usable == usable && c.guard == guard)
        {
            Some(i) => i,
            None => {
                self.classes.push(Class {
                    usable,
                    guard,
                    head: core::ptr::null_mut(),
                });
                self.classes.len() - 1
            }
        };
        let c = &mut self.classes[idx];
        let f = (stack.top() - core::mem::size_of::<FreeStack>()) as *mut FreeStack;
        // SAFETY: the top of a mapped, unused stack (usable >= MIN_STACK_SIZE, far more than a
        // header) is ours to write; the descriptor moves into it and is read back by `get` or
        // by the pool's drop.
        unsafe {
            core::ptr::write(
                f,
                FreeStack {
                    next: c.head,
                    stack,
                },
            );
        }
        c.head = f;
    }

    pub(crate) fn pooled(&self) -> usize {
        self.pooled
    }
}

impl Drop for StackPool {
    fn drop(&mut self) {
        let last = core::mem::replace(&mut self.last, RawStack::NONE);
        if last.base != 0 {
            drop(last.into_stack());
        }
        for c in &mut self.classes {
            let mut f = c.head;
            while !f.is_null() {
                // SAFETY: as in `get`; `next` is read before the stack (and the header in it)
                // is unmapped by dropping the descriptor.
                let (next, stack) = unsafe { ((*f).next, core::ptr::read(&(*f).stack)) };
                drop(stack);
                f = next;
            }
            c.head = core::ptr::null_mut();
        }
    }
}

/// How far below the top of its stack a thread's control block may sit: threads are staggered
/// by `COLOURS` steps of `COLOUR_STEP` bytes (`colour_offset`).
pub(crate) const COLOURS: usize = 8;
pub(crate) const COLOUR_STEP: usize = 64;

/// Where below the top of its stack the thread with id `id` places its control block (and so
/// its first frame): one of `COLOURS` cache lines. Every stack is page aligned and the same
/// size, so without it the control blocks and frames of all threads would share their low 12
/// address bits; a switch stores to one thread's block and frames and then loads the other's
/// at the same offsets, which the CPU checks against each other (4 KiB aliasing: the likely
/// cause, not confirmed: this machine's VM exposes no performance counters). Threads spawned
/// one after another get different colours. Measured here, interleaved: a yield 7.25-7.40 ns
/// without, 6.59-7.03 with (four runs each); spawn + join 52.8-53.8 ns without, 53.6-55.9
/// with.
#[inline(always)]
pub(crate) fn colour_offset(id: u64) -> usize {
    (id as usize % COLOURS) * COLOUR_STEP
}

/// Bytes to reserve at the top of a stack for a thread's control block of `block` bytes
/// aligned to `align`, at any colour: whole pages, so that every closure whose block fits in a
/// page shares one size class (and one pool) per requested stack size.
#[inline]
pub(crate) fn block_reserve(block: usize, align: usize) -> usize {
    let page = page_size();
    let need = block + align.max(16) + (COLOURS - 1) * COLOUR_STEP;
    if need <= page {
        page
    } else {
        need.div_ceil(page) * page
    }
}

/// Rounds a requested stack size up to whole pages, with the minimum applied. A size too large
/// to round becomes the largest multiple of the page, which no mapping can satisfy: the spawn
/// then fails with the mapping's error instead of wrapping around to a tiny stack.
#[inline]
pub(crate) fn round_stack_size(requested: usize) -> usize {
    let page = page_size();
    let s = requested.max(MIN_STACK_SIZE);
    if page.is_power_of_two() {
        // Every spawn passes here: a mask instead of a 64-bit division. A request so large that
        // rounding would overflow falls through to the checked path.
        if let Some(t) = s.checked_add(page - 1) {
            return t & !(page - 1);
        }
    }
    s.div_ceil(page)
        .checked_mul(page)
        .unwrap_or(usize::MAX / page * page)
}

#[cfg(test)]
mod tests;
