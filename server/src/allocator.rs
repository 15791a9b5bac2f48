//! Settings of the binary's allocator (mimalloc, set in `main.rs`).

use libmimalloc_sys::{mi_option_set, mi_option_t};

/// `mi_option_purge_delay` in mimalloc.h (v3): how long, in milliseconds, memory mimalloc no
/// longer uses stays with the process before it is given back to the OS (default 1,000).
const PURGE_DELAY: mi_option_t = 15;
/// The environment variable that sets it; an operator's setting wins over ours.
const PURGE_DELAY_VAR: &str = "MIMALLOC_PURGE_DELAY";
const KEPT_FOR_MS: std::os::raw::c_long = 10_000;

/// Keeps memory mimalloc no longer uses for ten seconds instead of one before giving it back.
///
/// Under a steady write load, memory the server frees stays unused for more than a second
/// before it is needed again; with the default delay it went back to the OS and was faulted
/// in again, 2 MiB huge pages zeroed each time: about a thousand faults a second and 2.5 % of
/// the CPU under the SendMessage benchmark, against a few dozen a second with ten seconds
/// (docs/performance.md). mimalloc purges while it allocates and frees, not on a timer: an
/// idle server keeps its memory with either delay (its resident size did not move over two
/// idle minutes after a load, with 1 s or 10 s).
pub fn keep_freed_memory_longer() {
    if std::env::var_os(PURGE_DELAY_VAR).is_some() {
        return;
    }
    // SAFETY: sets one of mimalloc's global options (a plain integer it reads when it next
    // purges); any value is valid for this option.
    #[allow(unsafe_code)]
    unsafe {
        mi_option_set(PURGE_DELAY, KEPT_FOR_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libmimalloc_sys::mi_option_get;

    /// The purge delay mimalloc works with now, in milliseconds.
    fn purge_delay_ms() -> std::os::raw::c_long {
        // SAFETY: reads one of mimalloc's global options.
        #[allow(unsafe_code)]
        unsafe {
            mi_option_get(PURGE_DELAY)
        }
    }

    #[test]
    fn the_option_set_is_the_purge_delay() {
        if std::env::var_os(PURGE_DELAY_VAR).is_some() {
            return; // the operator's value stands; nothing to check
        }
        // Option 15 holds mimalloc's default purge delay, so it is the one named.
        assert_eq!(purge_delay_ms(), 1_000);
        keep_freed_memory_longer();
        assert_eq!(purge_delay_ms(), 10_000);
    }
}
