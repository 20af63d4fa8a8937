//! Stack sizes and the control-block reserve: pure arithmetic on the page size.

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
    assert_eq!(block_reserve(1, 8), page);
    assert_eq!(block_reserve(page - 16, 16), page);
    assert_eq!(block_reserve(page - 15, 16), 2 * page);
    assert_eq!(block_reserve(page, 64), 2 * page);
    assert_eq!(block_reserve(3 * page, 4096), 4 * page);
    assert_eq!(block_reserve(3 * page + 1, 4096), 5 * page);
}
