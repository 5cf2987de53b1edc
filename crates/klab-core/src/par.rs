//! Host work over large buffers, spread over the machine's cores: the inputs klab makes,
//! the built-in oracles and the comparison of an output with its reference. A buffer is
//! cut into chunks of a fixed number of elements; chunk `c` is computed from its index
//! alone (a random input seeds each chunk from `c`), so the bytes do not depend on how
//! many threads ran.

use std::thread;

/// Elements per chunk (and below which work stays on the calling thread).
pub const CHUNK_ELEMENTS: usize = 1 << 20;

/// `n` zeros, their pages backed by huge pages where the kernel allows it: buffers past
/// 2^31 elements are several of tens of gigabytes, and mapping them 4 KiB at a time (on a
/// virtual machine, a fault in the host too) cost seconds per buffer on the H200.
pub fn zeroed<T: Clone + Default>(n: usize) -> Vec<T> {
    // vec! of a zero takes zeroed, untouched pages from the allocator (calloc).
    let v = vec![T::default(); n];
    advise_huge(&v);
    v
}

/// Ask for transparent huge pages over `v`'s whole 2 MiB pages (Linux; a no-op elsewhere,
/// below 64 MiB, and where the kernel refuses).
fn advise_huge<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(v);
        if bytes < 32 * HUGE {
            return;
        }
        let start = v.as_ptr() as usize;
        let (first, end) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if end > first {
            // SAFETY: advice over pages this vector owns; it changes no byte of them.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
}

/// The cores this process may use (at least 1).
pub fn cores() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// Child processes at once on one GPU where none of them is timed (a sanitizer run, a
/// correctness check): half the cores, at most 8. Each does much of its work on the host
/// (compute-sanitizer instruments the kernel there); on the H200's 16 cores nine sanitizer
/// runs at once took 3.1 s where four at a time took 4.7 s.
pub fn untimed_children() -> usize {
    (cores() / 2).clamp(1, 8)
}

/// Threads for `len` elements: one below two chunks, else the machine's cores (at most 32).
pub fn workers(len: usize) -> usize {
    if len < 2 * CHUNK_ELEMENTS {
        return 1;
    }
    cores().clamp(1, 32)
}

/// Call `f(c, chunk)` for every chunk of `out` (chunks of `CHUNK_ELEMENTS` elements of
/// `items_per_element` items each, e.g. the bytes of a dtype; the last chunk shorter),
/// spread over the cores.
pub fn for_chunks<T, F>(out: &mut [T], items_per_element: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    for_parts(out, CHUNK_ELEMENTS * items_per_element.max(1), f)
}

/// Call `f(p, part)` for every part of `out` of `part_items` items (the last one shorter),
/// spread over the cores once `out` holds two chunks' worth of items.
pub fn for_parts<T, F>(out: &mut [T], part_items: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    let part_items = part_items.max(1);
    let parts: Vec<(usize, &mut [T])> = out.chunks_mut(part_items).enumerate().collect();
    let threads = if parts.len() < 2 {
        1
    } else {
        workers(parts.len() * part_items)
    };
    if threads == 1 {
        for (c, part) in parts {
            f(c, part);
        }
        return;
    }
    let per = parts.len().div_ceil(threads);
    let mut groups: Vec<Vec<(usize, &mut [T])>> = Vec::new();
    let mut it = parts.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(per).collect());
    }
    thread::scope(|s| {
        for group in groups {
            let f = &f;
            s.spawn(move || {
                for (c, part) in group {
                    f(c, part);
                }
            });
        }
    });
}

/// `f(range)` over `len` items cut into one contiguous range per thread, results in order.
pub fn map_ranges<T, F>(len: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(std::ops::Range<usize>) -> T + Sync,
{
    let threads = workers(len);
    if threads == 1 {
        return vec![f(0..len)];
    }
    let per = len.div_ceil(threads).div_ceil(CHUNK_ELEMENTS) * CHUNK_ELEMENTS;
    thread::scope(|s| {
        let handles: Vec<_> = (0..len)
            .step_by(per.max(1))
            .map(|start| {
                let f = &f;
                s.spawn(move || f(start..(start + per).min(len)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a host worker thread panicked"))
            .collect()
    })
}

/// `f(item)` for every item on at most `jobs` threads, each taking the next item not yet
/// started; the results in the items' order. For independent slow tasks (a child process
/// each), where `map_ranges`' equal split would leave threads idle.
pub fn map_jobs<T, R, F>(jobs: usize, items: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let jobs = jobs.clamp(1, items.len().max(1));
    if jobs == 1 {
        return items.iter().map(&f).collect();
    }
    let workers = vec![(); jobs];
    map_workers(&workers, items, |_, item| f(item))
}

/// `f(worker, item)` for every item, one thread per worker (a GPU, a job slot), each
/// worker taking the next item not yet started; results in the items' order. No worker
/// runs two items at once.
pub fn map_workers<W, T, R, F>(workers: &[W], items: &[T], f: F) -> Vec<R>
where
    W: Sync,
    T: Sync,
    R: Send,
    F: Fn(&W, &T) -> R + Sync,
{
    if workers.is_empty() {
        return Vec::new();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .map(|w| {
                let (f, next) = (&f, &next);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(w, item)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a worker thread panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_buffers_past_the_huge_page_threshold_are_zeros_of_their_length() {
        for n in [0usize, 3, 64 << 20, (64 << 20) + 4097] {
            let v: Vec<u8> = zeroed(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&b| b == 0), "{n}");
        }
        let f: Vec<f64> = zeroed((9 << 20) + 1);
        assert!(f.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn jobs_run_at_once_and_come_back_in_order() {
        let items: Vec<u64> = (0..12).collect();
        let running = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        let out = map_jobs(4, &items, |&i| {
            use std::sync::atomic::Ordering::SeqCst;
            let now = running.fetch_add(1, SeqCst) + 1;
            most.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            running.fetch_sub(1, SeqCst);
            i * 10
        });
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        let most = most.load(std::sync::atomic::Ordering::SeqCst);
        assert!((2..=4).contains(&most), "{most} jobs at once");
        assert_eq!(map_jobs(1, &items, |&i| i), items);
        assert!(map_jobs(3, &[] as &[u64], |&i| i).is_empty());
    }

    #[test]
    fn every_chunk_is_visited_once_with_its_index() {
        let n = 2 * CHUNK_ELEMENTS + 7;
        let mut out = vec![0u8; n * 2];
        for_chunks(&mut out, 2, |c, chunk| {
            for e in chunk.chunks_exact_mut(2) {
                e.copy_from_slice(&(c as u16 + 1).to_le_bytes());
            }
        });
        let at = |i: usize| u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
        assert_eq!((at(0), at(CHUNK_ELEMENTS), at(n - 1)), (1, 2, 3));
    }

    #[test]
    fn ranges_cover_everything_in_order() {
        let n = 5 * CHUNK_ELEMENTS + 3;
        let parts = map_ranges(n, |r| r);
        assert_eq!(parts.first().unwrap().start, 0);
        assert_eq!(parts.last().unwrap().end, n);
        assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
    }
}
