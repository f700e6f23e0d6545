//! The DNS listener's queue of received queries, served in turn per sender.
//!
//! The UDP listener reads what the kernel holds (a batch at a time, a couple of µs each) into
//! this queue and answers from it round-robin by sender (address and port), at most
//! [`PER_SENDER`] waiting per sender and [`TOTAL`] in all; past either, a query is dropped and
//! counted. A sender's burst waits its turns; it is not cut short while the guard keeps up.
//! Reading is far cheaper than answering, so under a flood the kernel's receive buffer keeps
//! room: a stub resolver's query (a fresh port per query) is read and answered in the next
//! round instead of being dropped by the kernel behind thousands of the flood's. A flood spread
//! over many ports still shares the guard with everyone else; it only hurts the agent that
//! sends it, whose DNS this is.
//!
//! By hand: a `VecDeque` ring of senders and a map of their queues; no crate does this shape.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// Queries one sender may have waiting: room for a resolver library's burst of lookups on one
/// socket (c-ares, Node's), a quarter of the total, so a flood cannot fill the queue alone.
pub const PER_SENDER: usize = 1024;
/// Queries waiting in all (about 1 MiB at most).
pub const TOTAL: usize = 4 * PER_SENDER;

#[derive(Default)]
pub struct FairQueue {
    /// Senders with something waiting, in serving order (each once).
    ring: VecDeque<SocketAddr>,
    waiting: HashMap<SocketAddr, VecDeque<Vec<u8>>>,
    len: usize,
    /// Queries dropped because a limit was reached, since the last `take_dropped`.
    dropped: u64,
}

impl FairQueue {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queue a query from `sender`; false (and counted) when a limit drops it.
    pub fn push(&mut self, sender: SocketAddr, packet: &[u8]) -> bool {
        let queue = self.waiting.entry(sender).or_default();
        if queue.len() >= PER_SENDER || self.len >= TOTAL {
            if queue.is_empty() {
                self.waiting.remove(&sender);
            }
            self.dropped += 1;
            return false;
        }
        if queue.is_empty() {
            self.ring.push_back(sender);
        }
        queue.push_back(packet.to_vec());
        self.len += 1;
        true
    }

    /// The oldest query of the next sender in turn.
    pub fn pop(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        let sender = self.ring.pop_front()?;
        let queue = self.waiting.get_mut(&sender)?;
        let packet = queue.pop_front()?;
        self.len -= 1;
        if queue.is_empty() {
            self.waiting.remove(&sender);
        } else {
            self.ring.push_back(sender);
        }
        Some((sender, packet))
    }

    /// The drops since the last call, and none from then on.
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn senders_are_served_in_turn_each_in_order() {
        let mut q = FairQueue::default();
        for i in 0..3u8 {
            q.push(addr(1), &[i]);
        }
        q.push(addr(2), &[10]);
        q.push(addr(3), &[20]);
        let order: Vec<(u16, u8)> = std::iter::from_fn(|| q.pop())
            .map(|(a, p)| (a.port(), p[0]))
            .collect();
        assert_eq!(order, [(1, 0), (2, 10), (3, 20), (1, 1), (1, 2)]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_flooding_sender_is_capped_and_others_still_get_in() {
        let mut q = FairQueue::default();
        let kept = (0..5000).filter(|_| q.push(addr(1), b"flood")).count();
        assert_eq!(kept, PER_SENDER);
        assert!(q.push(addr(2), b"probe"));
        assert_eq!(q.take_dropped(), (5000 - PER_SENDER) as u64);
        assert_eq!(q.take_dropped(), 0);
        // The probe is served second, not after the flood's backlog.
        q.pop();
        assert_eq!(q.pop().map(|(a, _)| a.port()), Some(2));
    }

    #[test]
    fn the_total_is_capped_over_many_senders() {
        let mut q = FairQueue::default();
        let kept = (0..TOTAL as u16 + 100)
            .filter(|p| q.push(addr(*p), b"x"))
            .count();
        assert_eq!(kept, TOTAL);
        assert_eq!(q.take_dropped(), 100);
        // A refused sender leaves no empty queue behind.
        assert_eq!(q.waiting.len(), TOTAL);
        while q.pop().is_some() {}
        assert!(q.waiting.is_empty() && q.ring.is_empty());
    }
}
