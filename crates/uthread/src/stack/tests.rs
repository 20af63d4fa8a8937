//! Stack sizes and the control-block reserve (pure arithmetic on the page size), and the pool.

use super::*;

#[test]
fn sizes_round_up_to_pages_with_the_minimum_applied() {
    let page = page_size();
    assert_eq!(round_stack_size(0), MIN_STACK_SIZE.div_ceil(page) * page);
    assert_eq!(round_stack_size(1), round_stack_size(0));
    assert_eq!(
        round_stack_size(MIN_STACK_SIZE),
        MIN_STACK_SIZE.div_ceil(page) * page
    );
    let big = 64 * 1024;
    assert_eq!(round_stack_size(big), big.div_ceil(page) * page);
    assert_eq!(round_stack_size(big + 1), (big + 1).div_ceil(page) * page);
    for s in [0, 1, 4095, 4096, 4097, 100_000, 1 << 20] {
        let r = round_stack_size(s);
        assert_eq!(r % page, 0, "{s} -> {r}");
        assert!(r >= s && r >= MIN_STACK_SIZE, "{s} -> {r}");
        assert!(
            r - s.max(MIN_STACK_SIZE) < page,
            "{s} -> {r}: more than a page added"
        );
    }
}

#[test]
fn a_size_too_large_to_round_stays_too_large_to_map() {
    let page = page_size();
    for s in [usize::MAX, usize::MAX - 1, usize::MAX - page + 2] {
        let r = round_stack_size(s);
        assert_eq!(r % page, 0, "{s:#x} -> {r:#x}");
        assert!(r > usize::MAX - page, "{s:#x} -> {r:#x}: wrapped around");
    }
    assert!(Stack::new(round_stack_size(usize::MAX), true).is_err());
}

#[test]
fn control_blocks_reserve_whole_pages() {
    let page = page_size();
    let colours = (COLOURS - 1) * COLOUR_STEP;
    assert_eq!(block_reserve(1, 8), page);
    assert_eq!(block_reserve(page - 16 - colours, 16), page);
    assert_eq!(block_reserve(page - 15 - colours, 16), 2 * page);
    assert_eq!(block_reserve(page, 64), 2 * page);
    assert_eq!(block_reserve(3 * page - colours, 4096), 4 * page);
    assert_eq!(block_reserve(3 * page + 1 - colours, 4096), 5 * page);
}

#[test]
fn a_block_at_any_colour_fits_in_its_reserve() {
    for id in 0..2 * COLOURS as u64 {
        let (block, align) = (600, 64);
        let reserve = block_reserve(block, align);
        let top = 1 << 20;
        let at = (top - block - colour_offset(id)) & !(align - 1);
        assert!(at >= top - reserve && at + block <= top, "id {id}");
    }
    // Consecutive ids get different cache lines.
    assert_ne!(colour_offset(0), colour_offset(1));
}

/// Whether `[addr, addr + 1 page)` is mapped in this process.
fn mapped(addr: usize) -> bool {
    // SAFETY: msync only inspects the range; ENOMEM means it is not mapped.
    unsafe { libc::msync(addr as *mut libc::c_void, page_size(), libc::MS_ASYNC) == 0 }
}

/// A marker only this test writes.
const MARK: u64 = 0x7468_7265_6164_6c62;

/// Writes `MARK` at the lowest usable address of `s` and returns that address.
fn mark(s: &Stack) -> usize {
    let at = s.bottom();
    // SAFETY: `at` is the first usable (read-write, page-aligned) byte of a stack this test owns.
    unsafe { (at as *mut u64).write(MARK) };
    at
}

/// Whether the marked stack at `at` is gone: unmapped, or mapped again by someone else (other
/// tests of this binary map stacks in parallel and may get the same address back at once, so
/// "not mapped" alone would fail now and then). Read with process_vm_readv, which reports an
/// unmapped address as an error instead of faulting.
fn gone(at: usize) -> bool {
    let mut v = 0u64;
    let local = libc::iovec {
        iov_base: (&mut v as *mut u64).cast(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: both iovecs describe 8 bytes; the local one is `v`, the remote one is only read by
    // the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n != 8 || v != MARK
}

#[test]
fn the_pool_gives_back_the_stack_of_the_asked_class_and_unmaps_what_it_holds_when_dropped() {
    let page = page_size();
    let (small, big) = (MIN_STACK_SIZE, MIN_STACK_SIZE + 4 * page);
    let mut pool = StackPool::new(8);

    // The last stack put back is the next one taken for its class.
    let (a, fresh) = pool.get(small, false).unwrap();
    assert!(fresh);
    let a_base = a.base;
    pool.put(a);
    assert_eq!(pool.pooled(), 1);
    let (a, fresh) = pool.get(small, false).unwrap();
    assert!(!fresh);
    assert_eq!((a.base, a.usable(), a.has_guard()), (a_base, small, false));
    assert_eq!(pool.pooled(), 0);

    // Another class, or the same size with a guard, is not served from that stack.
    pool.put(a);
    let (g, fresh) = pool.get(small, true).unwrap();
    assert!(fresh && g.has_guard() && g.base != a_base);
    let (b, fresh) = pool.get(big, false).unwrap();
    assert!(fresh);
    let b_base = b.base;
    // Putting `b` moves `a` from the last slot onto its class list; both come back.
    pool.put(b);
    pool.put(g);
    assert_eq!(pool.pooled(), 3);
    let (a, fresh) = pool.get(small, false).unwrap();
    assert!(!fresh);
    assert_eq!(a.base, a_base);
    let (b, fresh) = pool.get(big, false).unwrap();
    assert!(!fresh);
    assert_eq!(b.base, b_base);
    assert_eq!(pool.pooled(), 1);

    // Dropping the pool unmaps every stack it holds, in the last slot and on the lists.
    let (a_mark, b_mark) = (mark(&a), mark(&b));
    pool.put(a);
    pool.put(b);
    let g = pool.get(small, true).unwrap().0;
    let g_mark = mark(&g);
    drop(g);
    assert!(gone(g_mark), "a stack dropped outside the pool is unmapped");
    assert!(mapped(a_base) && mapped(b_base));
    assert!(!gone(a_mark) && !gone(b_mark));
    drop(pool);
    assert!(
        gone(a_mark) && gone(b_mark),
        "the pool's stacks were unmapped"
    );
}

#[test]
fn a_full_pool_unmaps_instead_of_keeping() {
    let mut pool = StackPool::new(1);
    let (a, _) = pool.get(MIN_STACK_SIZE, false).unwrap();
    let (b, _) = pool.get(MIN_STACK_SIZE, false).unwrap();
    let b_mark = mark(&b);
    pool.put(a);
    pool.put(b);
    assert_eq!(pool.pooled(), 1);
    assert!(gone(b_mark));
}
