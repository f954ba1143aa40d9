//! The two sorts a GEO search's reply order comes from in Redis: the C
//! library's merge sort when every result is kept, and Redis's partial
//! quicksort when COUNT keeps fewer than were found (Bentley and
//! McIlroy's quicksort, as in the BSD libc, skipping partitions outside
//! the wanted ranks).
//!
//! The quicksort is not stable, and which of several equally distant
//! members comes first is part of the reply, so the same pivots, swaps and
//! insertion sorts are made here (Redis 7's version, without the older
//! switch to insertion sort after a pass that swapped nothing); the merge
//! sort splits and merges as glibc's does. Called by `geosearch.rs` only.

use std::cmp::Ordering;

/// Puts the elements of ranks `0..=last` of `v` in order (by `cmp`) at
/// the front of `v`, as Redis's `pqsort(v, n, size, cmp, 0, last)` leaves
/// them; the rest of `v` is left in some order.
pub(crate) fn partial_sort<T>(v: &mut [T], last: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    sort_range(v, 0, v.len(), last, cmp);
}

/// Sorts `v` stably by `cmp`, splitting and merging as glibc's `qsort`
/// (a top-down merge sort) does, so even a comparator that is not a total
/// order (NaN distances) leaves the same order.
pub(crate) fn stable_sort<T>(v: &mut Vec<T>, cmp: &impl Fn(&T, &T) -> Ordering) {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    let mut tmp = vec![0; v.len()];
    merge_sort(&mut idx, &mut tmp, &|a: &usize, b: &usize| {
        cmp(&v[*a], &v[*b])
    });
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(idx.iter().filter_map(|&i| slots[i].take()));
}

fn merge_sort(b: &mut [usize], tmp: &mut [usize], cmp: &impl Fn(&usize, &usize) -> Ordering) {
    let n = b.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    {
        let (l, r) = b.split_at_mut(n1);
        merge_sort(l, tmp, cmp);
        merge_sort(r, tmp, cmp);
    }
    let (mut i, mut j, mut k) = (0, n1, 0);
    while i < n1 && j < n {
        if cmp(&b[i], &b[j]) != Ordering::Greater {
            tmp[k] = b[i];
            i += 1;
        } else {
            tmp[k] = b[j];
            j += 1;
        }
        k += 1;
    }
    while i < n1 {
        tmp[k] = b[i];
        i += 1;
        k += 1;
    }
    b[..k].copy_from_slice(&tmp[..k]);
}

fn insertion<T>(v: &mut [T], a: usize, n: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    for m in a + 1..a + n {
        let mut l = m;
        while l > a && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
            v.swap(l, l - 1);
            l -= 1;
        }
    }
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    use Ordering::*;
    if cmp(&v[a], &v[b]) == Less {
        if cmp(&v[b], &v[c]) == Less {
            b
        } else if cmp(&v[a], &v[c]) == Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Greater {
        b
    } else if cmp(&v[a], &v[c]) == Less {
        a
    } else {
        c
    }
}

/// Swaps the `n` elements from `a` with the `n` from `b`, pairwise.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Whether the wanted ranks `0..=last` reach into a partition starting at
/// `start` (partitions are never empty).
fn is_wanted(start: usize, last: usize) -> bool {
    start == 0 || last >= start
}

fn sort_range<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    last: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    use Ordering::*;
    loop {
        if n < 7 {
            insertion(v, a, n, cmp);
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r == Greater {
                    break;
                }
                if r == Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r == Less {
                    break;
                }
                if r == Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let left = pb - pa;
        if left > 1 && is_wanted(a, last) {
            sort_range(v, a, left, last, cmp);
        }
        let right = pd - pc;
        if right > 1 {
            a = pn - right;
            n = right;
            if is_wanted(a, last) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merge_sort_is_stable() {
        let mut v: Vec<(u32, usize)> = (0..100).map(|i| ((i * 7 % 5) as u32, i)).collect();
        stable_sort(&mut v, &|a: &(u32, usize), b: &(u32, usize)| a.0.cmp(&b.0));
        assert!(v
            .windows(2)
            .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
    }

    #[test]
    fn the_wanted_prefix_comes_out_sorted() {
        let mut x: u64 = 99;
        for len in [0usize, 1, 5, 7, 8, 39, 41, 200, 1000] {
            let v: Vec<u32> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 40) as u32 % 50
                })
                .collect();
            let mut want = v.clone();
            want.sort();
            for last in [0usize, 3, len / 2, len.saturating_sub(1)] {
                let mut got = v.clone();
                partial_sort(&mut got, last, &|a: &u32, b: &u32| a.cmp(b));
                let k = (last + 1).min(len);
                assert_eq!(got[..k], want[..k], "len {len} last {last}");
            }
        }
    }
}
