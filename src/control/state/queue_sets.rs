//! A port's queues as control code holds them: the queues set up, by kind
//! ([`QueueSet`], in the control state, so reachable only under the control
//! lock), ethdev's view of them for ops in any process ([`EthQueues`]), and
//! the verbs objects of a started port ([`Running`]). See `queues` for why
//! the driver's own threads use the sets, never ethdev's arrays.

use crate::control::error::{Error, Result};
use crate::dataplane::queue::DataQueue;
use crate::dataplane::rxq::RxQueue;
use crate::dataplane::txq::TxQueue;
use crate::ffi;
use crate::hw::verbs::{CompChannel, Cq, IndTable, Qp, Wq};
use std::ffi::c_void;
use std::ptr::NonNull;

/// The ethdev arrays of a queue kind: where the data path finds the queue
/// (`rx_queues`/`tx_queues`) and the state ethdev reports.
pub trait Kind: DataQueue + Sized {
    fn array(d: &ffi::rte_eth_dev_data) -> *mut *mut c_void;
    fn count(d: &ffi::rte_eth_dev_data) -> u16;
    fn states(d: &mut ffi::rte_eth_dev_data) -> &mut [u8];
}

impl Kind for RxQueue {
    fn array(d: &ffi::rte_eth_dev_data) -> *mut *mut c_void {
        d.rx_queues
    }
    fn count(d: &ffi::rte_eth_dev_data) -> u16 {
        d.nb_rx_queues
    }
    fn states(d: &mut ffi::rte_eth_dev_data) -> &mut [u8] {
        &mut d.rx_queue_state
    }
}

impl Kind for TxQueue {
    fn array(d: &ffi::rte_eth_dev_data) -> *mut *mut c_void {
        d.tx_queues
    }
    fn count(d: &ffi::rte_eth_dev_data) -> u16 {
        d.nb_tx_queues
    }
    fn states(d: &mut ffi::rte_eth_dev_data) -> &mut [u8] {
        &mut d.tx_queue_state
    }
}

/// The queues of one kind a port has set up, by queue id.
pub struct QueueSet<Q> {
    slots: Vec<Option<NonNull<Q>>>,
    /// The count the port is configured with (`dev_configure`).
    configured: u16,
}

// SAFETY: the queues live in DPDK shared memory, not in any thread; the set
// is only reached under the control lock.
unsafe impl<Q> Send for QueueSet<Q> {}

impl<Q: Kind> QueueSet<Q> {
    pub const fn new() -> QueueSet<Q> {
        QueueSet {
            slots: Vec::new(),
            configured: 0,
        }
    }

    pub fn configure(&mut self, n: u16) {
        self.configured = n;
    }

    pub fn configured(&self) -> u16 {
        self.configured
    }

    pub fn get(&self, i: usize) -> Option<&Q> {
        // SAFETY: a queue in the set stays allocated until `release` takes it
        // out, which needs `&mut self`; the reference borrows the set.
        self.slots.get(i)?.map(|q| unsafe { q.as_ref() })
    }

    /// Every set-up queue, with its id.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Q)> {
        (0..self.slots.len()).filter_map(|i| Some((i, self.get(i)?)))
    }

    /// Puts a new queue at `i`, where the data path finds it too (`d` is
    /// the port's data, inside an ethdev op that sized the array).
    pub fn install(&mut self, d: &ffi::rte_eth_dev_data, i: u16, q: NonNull<Q>) {
        let i = usize::from(i);
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(q);
        // SAFETY: ethdev allocated the array for at least `i + 1` queues
        // before calling the setup op that installs queue `i`.
        unsafe { *Q::array(d).add(i) = q.as_ptr() as *mut c_void };
    }

    /// Frees the queue at `i`, if any, and clears ethdev's slot. The port
    /// is stopped (ethdev releases queues only then), so its gate is closed.
    /// Returns whether there was a queue.
    pub fn release(&mut self, d: &ffi::rte_eth_dev_data, i: u16) -> bool {
        let Some(q) = self.slots.get_mut(usize::from(i)).and_then(Option::take) else {
            return false;
        };
        // SAFETY: the queue left the set, so nothing reaches it through the
        // control state; ethdev calls release only on a stopped port, whose
        // gates are closed, so no burst uses it; `i` is inside ethdev's
        // array (the op's queue id).
        unsafe {
            q.as_ref().gate().close(std::hint::spin_loop);
            if usize::from(i) < usize::from(Q::count(d)) && !Q::array(d).is_null() {
                *Q::array(d).add(usize::from(i)) = std::ptr::null_mut();
            }
            Q::free(q);
        }
        true
    }

    /// Frees every queue (port close).
    pub fn release_all(&mut self, d: &ffi::rte_eth_dev_data) {
        for i in 0..self.slots.len() {
            self.release(d, i as u16);
        }
    }

    /// The queues 0..configured, or which one is missing.
    pub fn complete(&self) -> Result<Vec<&Q>> {
        (0..usize::from(self.configured))
            .map(|i| {
                self.get(i)
                    .ok_or_else(|| Error::invalid(format!("{} queue {i} is not set up", Q::KIND)))
            })
            .collect()
    }
}

impl<Q: Kind> Default for QueueSet<Q> {
    fn default() -> Self {
        Self::new()
    }
}

/// A port's queues as ethdev's arrays hold them, for ethdev ops in any
/// process: reading their configuration and counters.
pub struct EthQueues<'d> {
    d: &'d ffi::rte_eth_dev_data,
}

impl<'d> EthQueues<'d> {
    /// # Safety
    /// Called inside an ethdev op of the port: ethdev does not release the
    /// port's queues or reallocate its arrays while one of its ops runs (the
    /// application serializes its control calls on a port).
    pub unsafe fn of(d: &'d ffi::rte_eth_dev_data) -> EthQueues<'d> {
        EthQueues { d }
    }

    pub fn get<Q: Kind + 'd>(&self, i: usize) -> Option<&'d Q> {
        if i >= usize::from(Q::count(self.d)) || Q::array(self.d).is_null() {
            return None;
        }
        // SAFETY: `i` is inside the array ethdev sized for the queue count;
        // a non-null entry is a queue of ours, live for the op (`of`).
        unsafe { (*Q::array(self.d).add(i) as *const Q).as_ref() }
    }

    /// Every set-up queue of a kind, with its id.
    pub fn iter<Q: Kind + 'd>(&self) -> impl Iterator<Item = (usize, &'d Q)> + '_ {
        (0..usize::from(Q::count(self.d))).filter_map(|i| Some((i, self.get::<Q>(i)?)))
    }
}

/// Verbs objects of one started receive queue; field order is drop order.
pub struct RxVerbs {
    pub wq: Wq,
    pub cq: Cq,
    pub channel: Option<CompChannel>,
}

/// Verbs objects of one started send queue, held for their `Drop`.
pub struct TxVerbs {
    pub _qp: Qp,
    pub _cq: Cq,
}

/// Verbs objects of a started port. Drop order: the RSS QP (which takes the
/// hardware receive queues with it), its table, the WQs/CQs, the send QPs.
pub struct Running {
    pub rss: Option<(Qp, IndTable)>,
    pub rx: Vec<RxVerbs>,
    pub tx: Vec<TxVerbs>,
}

impl Running {
    pub fn rx_channel(&self, i: usize) -> Option<&CompChannel> {
        self.rx.get(i)?.channel.as_ref()
    }
}
