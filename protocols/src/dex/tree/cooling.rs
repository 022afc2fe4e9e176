//! Free pages and cooling (`ensure_free`): a never-used frame, else the head of a random
//! cooling-map bucket, else sampled frames cooled at the end of their cached path (path-aware
//! delegation); dirty pages are written back first. Also the flushes of a cached subtree
//! (`refresh` of a stale node, the end of a quiesced run).

use super::*;

impl<N: Nic> Client<N> {
    /// Fill the thread-local free-page set to `n` frames.
    ///
    /// Once the cache has filled, a thread whose set is empty first samples
    /// (`samples_per_round` frames cooled; a cooled page pushed into a full bucket evicts that
    /// bucket's head into the set), and only if that freed nothing evicts the head of a random
    /// bucket: [ART] `opportunistic_sample` (`leanstore_cache.h`, called from
    /// `new_get_mem_node` on every access through an unswizzled pointer: `state == 1 &&
    /// local_page_set.empty()` samples 2 pages) followed by `try_get_empty_page` (local set,
    /// else `random_evict_to_remote`, else sample). This keeps the cooling map full, as the
    /// paper describes ("If the array is already full, shifting would cause the head page to
    /// be evicted from the cache. The evicted page is then inserted into a thread-local free
    /// page set"), so a cooled page stays in it for ~the map's capacity of installs and gets
    /// its second chance. [CHOICE] sampled here, before the traversal that may need a frame,
    /// rather than at the unswizzled access itself: the set empties only by an install, so
    /// the rounds per install are the artifact's; only which traversal pays the round differs.
    pub(super) async fn ensure_free(&mut self, n: usize) -> ProtocolResult<()> {
        let mut sampled = false;
        while self.free.len() < n {
            // (`filled` is also set below, where the pool is found empty.)
            if !sampled && self.free.is_empty() && {
                let mut c = self.shared.cache();
                c.filled |= c.pool.is_empty();
                c.filled
            } {
                sampled = true;
                self.cool_round().await?;
                continue;
            }
            let got = {
                let shared = self.shared.clone();
                let mut c = shared.cache();
                if let Some(f) = c.pool.pop() {
                    Some(f)
                } else {
                    c.filled = true;
                    // [ART] `random_evict_to_remote`: try-lock up to `probe_buckets`
                    // buckets from a random one; the first free, non-empty one gives its head.
                    let n = c.buckets.len();
                    let start = (self.rng.next_u64() % n as u64) as usize;
                    let mut got = None;
                    for i in 0..(self.shared.config.probe_buckets as usize).min(n) {
                        let b = (start + i) % n;
                        if !self.cooling_try(b) {
                            continue;
                        }
                        if let Some(f) = c.evict_head(b) {
                            self.cur.inner_evictions += u64::from(!c.frames[f].node.is_leaf());
                            got = Some(f);
                            break;
                        }
                    }
                    got
                }
            };
            match got {
                Some(f) => self.free.push(f),
                None => {
                    if !self.cool_round().await? {
                        self.backoff().await;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sample frames and cool the end of their cached paths. `true` if any page cooled.
    pub(super) async fn cool_round(&mut self) -> ProtocolResult<bool> {
        let mut cooled = false;
        for _ in 0..self.config().samples_per_round {
            let picked = {
                let mut c = self.shared.cache();
                let n = c.frames.len();
                let start = (self.rng.next_u64() % n as u64) as usize;
                let rng = &mut self.rng;
                let mut pick = |len: usize| (rng.next_u64() % len as u64) as usize;
                let cand = if self.shared.config.mutant == Mutant::NoPathDelegation {
                    let f = &c.frames[start];
                    (f.state == State::Hot
                        && !f.busy
                        && f.pins == 0
                        && f.parent.is_none_or(|p| !c.frames[p].busy))
                    .then_some(start)
                } else {
                    c.cooling_candidate(start, &mut pick)
                };
                cand.map(|f| {
                    c.unswizzle(f);
                    let frame = &mut c.frames[f];
                    let flush = frame.dirty && self.shared.config.mutant != Mutant::CoolWithoutWriteBack;
                    frame.dirty = false;
                    if flush {
                        frame.state = State::Flushing;
                        frame.node.version = frame.node.version.wrapping_add(1);
                        (f, Some((frame.addr, frame.node.clone())))
                    } else {
                        (f, None)
                    }
                })
            };
            let Some((f, image)) = picked else { continue };
            if let Some((addr, node)) = image {
                self.write_node(addr, &node, "write back cooled page").await?;
            }
            let shared = self.shared.clone();
            let mut c = shared.cache();
            let b = c.bucket_index(c.frames[f].addr);
            self.cooling_section(b);
            if let Some(evicted) = c.push_cooling(f) {
                self.cur.inner_evictions += u64::from(!c.frames[evicted].node.is_leaf());
                self.free.push(evicted);
            }
            cooled = true;
        }
        Ok(cooled)
    }

    /// Drop the cached subtree under HOT frame `f`: write its dirty pages back, free its
    /// frames. Used for stale shared nodes, root changes and the final flush.
    pub(super) async fn flush_subtree(&mut self, f: FrameId) -> ProtocolResult<()> {
        let (sub, images) = loop {
            let ready = {
                let mut c = self.shared.cache();
                if c.frames[f].state != State::Hot {
                    return Ok(());
                }
                let sub = c.subtree(f);
                if sub.iter().any(|x| c.frames[*x].busy || c.frames[*x].pins > 0) {
                    None
                } else {
                    c.unswizzle(f);
                    let mut images = Vec::new();
                    for x in &sub {
                        let frame = &mut c.frames[*x];
                        frame.busy = true;
                        frame.state = State::Flushing;
                        if frame.dirty {
                            frame.dirty = false;
                            frame.node.version = frame.node.version.wrapping_add(1);
                            images.push((frame.addr, frame.node.clone()));
                        }
                    }
                    Some((sub, images))
                }
            };
            match ready {
                Some(r) => break r,
                None => self.backoff().await,
            }
        };
        let mut result = Ok(());
        for (addr, node) in &images {
            if let Err(e) = self.write_node(*addr, node, "flush cached subtree").await {
                result = Err(e);
                break;
            }
        }
        let mut c = self.shared.cache();
        for x in sub {
            // Back to the shared pool, not this thread's set: a flushed root would hoard them.
            let freed = c.release(x);
            c.pool.push(freed);
        }
        result
    }

    /// A cached node turned out stale: flush its subtree (re-reading the root pointer if it
    /// was the root) so the next traversal fetches it again.
    pub(super) async fn refresh(&mut self, f: FrameId) -> ProtocolResult<()> {
        self.cur.retries += 1;
        let was_root = self.shared.cache().root == Some(f);
        self.flush_subtree(f).await?;
        if was_root {
            let root = self.read_root_pointer().await?;
            self.shared.cache().root_addr = root;
        }
        Ok(())
    }

    /// Flush everything this server caches (end of a quiesced run).
    pub async fn flush_all(&mut self) -> ProtocolResult<()> {
        let root = self.shared.cache().root;
        if let Some(f) = root {
            self.flush_subtree(f).await?;
        }
        Ok(())
    }
}
