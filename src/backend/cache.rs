//! The compiled-code cache both compiled engines use: code is compiled at most once per process
//! per IR hash, and each thread remembers the last few programs it ran by address, so that a
//! batch of rows does not hash its program for every row (an entry is used only while the
//! program at that address is still equal).

use crate::ir::Program;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::LocalKey;

/// The most programs the process cache keeps (it starts over when full).
pub const CACHE_SIZE: usize = 256;
/// The programs a thread remembers by address.
pub const PER_THREAD: usize = 4;

/// A process cache of compiled code by IR hash.
pub type ProcessCache<T> = Mutex<HashMap<String, Arc<T>>>;
/// A thread's most recent programs by address.
pub type Recent<T> = RefCell<Vec<(usize, Arc<T>)>>;

/// The compiled code of `p`: this thread's recent entry for it, else the process cache's,
/// else `compile(p)` (then cached in both).
pub fn lookup<T>(
    p: &Program,
    recent: &'static LocalKey<Recent<T>>,
    cache: &ProcessCache<T>,
    program_of: fn(&T) -> &Program,
    compile: impl FnOnce(&Program) -> Result<T, String>,
) -> Result<Arc<T>, String> {
    let addr = p as *const Program as usize;
    let hit =
        recent.with(|r| r.borrow().iter().find(|(a, c)| *a == addr && program_of(c) == p).map(|(_, c)| c.clone()));
    if let Some(c) = hit {
        return Ok(c);
    }
    let hash = p.hash();
    let c = {
        let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&hash) {
            Some(c) => c.clone(),
            None => {
                let c = Arc::new(compile(p)?);
                if map.len() >= CACHE_SIZE {
                    map.clear();
                }
                map.insert(hash, c.clone());
                c
            }
        }
    };
    recent.with(|r| {
        let mut r = r.borrow_mut();
        r.retain(|(a, _)| *a != addr);
        r.push((addr, c.clone()));
        if r.len() > PER_THREAD {
            r.remove(0);
        }
    });
    Ok(c)
}
