//! The last few results of a pure, expensive planning step — a bulk-loaded tree's shape or
//! image — shared by every plan of a process. A scenario plans each point and its references
//! once when it is checked and again when it runs, and most points load the same keys: DEX
//! Fig. 6 rebuilt the same 1.2 M-key SMART image, Sherman insertion shape and sorted key list
//! for every point and reference (its check alone took 77 s; 5 s with these remembered). A result is looked up by its whole input (compared in full,
//! no fingerprint), and the step is a pure function of that input, so sharing it cannot change
//! a run: only how often it is computed.

use std::sync::{Arc, Mutex, PoisonError};

/// Up to `capacity` results, the oldest dropped first.
pub struct Memo<K, V> {
    slots: Mutex<Vec<(K, Arc<V>)>>,
    capacity: usize,
}

impl<K: PartialEq, V> Memo<K, V> {
    pub const fn new(capacity: usize) -> Memo<K, V> {
        Memo { slots: Mutex::new(Vec::new()), capacity }
    }

    /// The result for `key`, computed by `make` if no slot holds it. `make` runs outside the
    /// lock, so two plans needing the same new result may both compute it (the same value).
    pub fn get_or(&self, key: K, make: impl FnOnce(&K) -> V) -> Arc<V> {
        let found = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
        };
        if let Some(v) = found {
            return v;
        }
        let v = Arc::new(make(&key));
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if !slots.iter().any(|(k, _)| *k == key) {
            if slots.len() >= self.capacity.max(1) {
                slots.remove(0);
            }
            slots.push((key, v.clone()));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn computes_once_per_key_and_forgets_the_oldest() {
        let memo: Memo<Vec<u64>, u64> = Memo::new(2);
        let calls = AtomicU32::new(0);
        let sum = |k: &Vec<u64>| {
            calls.fetch_add(1, Ordering::Relaxed);
            k.iter().sum::<u64>()
        };
        assert_eq!(*memo.get_or(vec![1, 2], sum), 3);
        assert_eq!(*memo.get_or(vec![1, 2], sum), 3);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        memo.get_or(vec![4], sum);
        memo.get_or(vec![5], sum); // evicts [1, 2]
        assert_eq!(*memo.get_or(vec![1, 2], sum), 3);
        assert_eq!(calls.load(Ordering::Relaxed), 4);
    }
}
