//! A huge single line costs the SSE decoder at most about twice its size in memory, and its
//! bytes are searched for a line end once (counted through the allocator: a decoder that
//! re-copied its buffer per chunk would allocate far more than the line in total).
//!
//! One test in this binary, so the allocator's counts are its alone.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Counting allocations needs a global allocator, whose trait is unsafe; the workspace denies
// unsafe code by default.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_provider::sse::SseDecoder;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::SeqCst) + size;
    PEAK.fetch_max(live, Ordering::SeqCst);
    TOTAL.fetch_add(size, Ordering::SeqCst);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters change.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same layout as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as the new block appearing before the old one goes: the worst case.
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: ptr came from System with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_huge_line_costs_about_twice_its_size_at_most() {
    const LINE: usize = 64 * 1024 * 1024;
    let mut input = Vec::with_capacity(LINE + 16);
    input.extend_from_slice(b"data: ");
    input.resize(LINE, b'x');
    input.extend_from_slice(b"\n\n");

    let mut decoder = SseDecoder::new();
    let mut out = Vec::new();
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let total_before = TOTAL.load(Ordering::SeqCst);
    for chunk in input.chunks(16 * 1024) {
        decoder.push(chunk, &mut out).unwrap();
    }
    decoder.finish(&mut out).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - base;
    let total = TOTAL.load(Ordering::SeqCst) - total_before;

    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data.len(), LINE - 6);
    assert!(
        peak <= LINE * 5 / 2,
        "peak {peak} bytes for a {LINE}-byte line"
    );
    // Growing a buffer by doubling allocates under 2x the line in all; copying the line out
    // again, or a buffer per chunk, shows here.
    assert!(
        total <= LINE * 5 / 2,
        "{total} bytes allocated for a {LINE}-byte line"
    );
}
