//! Per-row memory metering: [`Counting`], a global allocator wrapper that counts, on each
//! thread, the bytes allocated net while a [`RowMeter`] is open there, so that the sandbox's
//! memory limit covers everything a row allocates — the values of its expressions, the text
//! indexes, regexes, JSON trees and embeddings its intrinsics build — not an estimate of its
//! values' sizes.
//!
//! Pipeline position: below everything. The `rubric` binary and the Python module install
//! `Counting` as their global allocator; `stdlib::EvalCtx`'s budget reads [`row_bytes`] when it
//! checks a row's memory limit; the Wasm engine opens a meter around each row. A program that
//! embeds the library without installing `Counting` still gets the limits that intrinsics
//! check before they allocate (`EvalCtx::reserve`), but not the running count: [`installed`]
//! says which.
//!
//! Meters nest: a thread that runs another row while it waits (rayon work stealing inside an
//! intrinsic) opens that row's meter on top of the first, and closing it restores the first
//! row's count. Bytes freed on a thread without an open meter, or by another thread, are not
//! counted: the count is what the row allocated and has not freed itself, a bound on what it
//! holds.

#![expect(unsafe_code, reason = "a global allocator is an `unsafe impl GlobalAlloc` that forwards to the one it wraps")]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// A global allocator that counts the bytes of the current row (see the module docs).
pub struct Counting<A>(pub A);

static INSTALLED: AtomicBool = AtomicBool::new(false);

struct Meter {
    open: Cell<bool>,
    net: Cell<i64>,
}

thread_local! {
    // `const` and free of destructors: usable from inside the allocator, during thread exit too.
    static METER: Meter = const { Meter { open: Cell::new(false), net: Cell::new(0) } };
}

#[inline]
fn count(delta: i64) {
    let _ = METER.try_with(|m| {
        if m.open.get() {
            m.net.set(m.net.get().wrapping_add(delta));
        }
    });
}

#[inline]
fn mark_installed() {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the wrapped allocator with the caller's arguments unchanged
// and returns its result unchanged; the bookkeeping touches only a thread-local `Cell` (no
// allocation, no lock, no destructor), so the wrapper upholds exactly the contract of `A`.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; the caller upholds `dealloc`'s contract.
        unsafe { self.0.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `realloc`'s contract.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Whether the process allocates through [`Counting`] (so that [`row_bytes`] counts).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// The bytes the row whose meter is open on this thread has allocated and not freed; `0` when
/// no meter is open or [`Counting`] is not installed.
#[inline]
pub fn row_bytes() -> usize {
    METER.try_with(|m| if m.open.get() { m.net.get().max(0) as usize } else { 0 }).unwrap_or(0)
}

/// An open meter: counting starts at zero when it is created and the previous state of the
/// thread (another row's meter, or none) comes back when it is dropped.
pub struct RowMeter {
    saved_open: bool,
    saved_net: i64,
    /// Not `Send`: a meter belongs to the thread that opened it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl RowMeter {
    pub fn open() -> RowMeter {
        let (saved_open, saved_net) = METER
            .try_with(|m| {
                let saved = (m.open.get(), m.net.get());
                m.open.set(true);
                m.net.set(0);
                saved
            })
            .unwrap_or((false, 0));
        RowMeter { saved_open, saved_net, _thread: std::marker::PhantomData }
    }
}

impl Drop for RowMeter {
    fn drop(&mut self) {
        let _ = METER.try_with(|m| {
            m.open.set(self.saved_open);
            m.net.set(self.saved_net);
        });
    }
}
