//! Doorbell pages outlive their context only as dummies: once a context is
//! dead (service reset, hot remove) or closed, stores through any mapping
//! of its doorbell page — the trapped page of the process that opened it,
//! a second mapping of its `cmd_fd` (a DPDK secondary's) — are discarded
//! and counted, as the kernel's disassociated page swallows them. A new
//! context never shares a page with an old one, so a secondary that keeps
//! its old mapping after a reset cannot drive the new context's queues.

use mana_emu::config::{BackendConfig, Config, DoorbellMode};
use mana_emu::device::{Counters, Fault};
use mana_emu::testing::*;
use mana_emu::wire;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

mod common;
use common::*;

fn cfg(mode: DoorbellMode) -> Config {
    let mut c = config(vec![port(A, BackendConfig::Sink)]);
    c.options.doorbell_mode = mode;
    c
}

/// The file behind an fd (device, inode).
fn file_id(fd: RawFd) -> (u64, u64) {
    // SAFETY: fstat into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-parameter.
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    (st.st_dev, st.st_ino)
}

fn sq_doorbell(tx: &TxQueue) -> u64 {
    gdma::SqDoorbell::for_head_bu(tx.sq_id, tx.head_bu)
        .unwrap()
        .to_raw()
}

fn wait_back(dev: &TestDevice) {
    let t0 = Instant::now();
    while dev.emu.lock().visible().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "device never came back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn sent(k: &Counters) -> u64 {
    k.port(A).unwrap().tx_packets
}

/// After a reset: the dead context's pages (trapped and memfd) swallow
/// doorbells; the new context has pages of its own, which the old
/// mappings cannot reach even with a doorbell valid for the new queue.
fn reset_then_stale_stores(mode: DoorbellMode, name: &str) {
    let dev = TestDevice::new(name, cfg(mode));
    let ctx = dev.open();
    let old_file = file_id(ctx.cmd_fd);
    let old_page = ctx.db_page;
    let secondary = SecondaryMapping::new(ctx.cmd_fd);
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    // Before the reset both mappings ring the context's queue.
    tx.post(&udp(1));
    ctx.ring(wire::DB_SQ, sq_doorbell(&tx));
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    tx.post(&udp(2));
    secondary.ring(wire::DB_SQ, sq_doorbell(&tx));
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    let k0 = dev.counters();
    assert_eq!((sent(&k0), k0.device.discarded_doorbells), (2, 0));

    dev.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: Some(50),
        new_name: None,
    })
    .unwrap();
    // Dead: the primary's page and the secondary's mapping both discard.
    tx.post(&udp(3));
    secondary.ring(wire::DB_SQ, sq_doorbell(&tx));
    dev.settle();
    let k = dev.counters();
    assert_eq!(k.device.discarded_doorbells, 1, "{:?}", k.device);
    if mode == DoorbellMode::Trap {
        // (In poll mode the primary's page is the memfd page just rung.)
        ctx.ring(wire::DB_CQ, 0x1234);
        dev.settle();
        assert_eq!(dev.counters().device.discarded_doorbells, 2);
    }
    assert!(tx.cq.poll().is_empty());
    tx.destroy().unwrap();
    ctx.close();
    let discarded = dev.counters().device.discarded_doorbells;

    wait_back(&dev);
    let ctx2 = dev.open();
    // A fresh memfd and a fresh page: nothing shared with the old context.
    assert_ne!(file_id(ctx2.cmd_fd), old_file);
    assert_ne!(ctx2.db_page, old_page);
    let mut tx2 = ctx2.tx_queue(1, 64).unwrap();
    tx2.post(&udp(4));
    // A doorbell that would start the new queue, through the old mappings
    // (the secondary never remapped; the primary kept a stale pointer).
    let v = sq_doorbell(&tx2);
    secondary.ring(wire::DB_SQ, v);
    dev.settle();
    // In poll mode the primary's page is that same memfd page: the store
    // through the stale pointer would be the one just made.
    let stale = if mode == DoorbellMode::Trap {
        ctx.ring(wire::DB_SQ, v);
        dev.settle();
        2
    } else {
        1
    };
    assert!(
        tx2.cq.poll().is_empty(),
        "a stale mapping reached the new context"
    );
    let k = dev.counters();
    assert_eq!(sent(&k), 2);
    assert_eq!(
        k.device.discarded_doorbells,
        discarded + stale,
        "{:?}",
        k.device
    );
    assert_eq!(k.device.doorbells, k0.device.doorbells);
    assert_eq!(k.device.bad_doorbells, 0);
    // The new context's own page works, and so does a new mapping of its fd.
    ctx2.ring(wire::DB_SQ, v);
    assert_eq!(tx2.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    let secondary2 = SecondaryMapping::new(ctx2.cmd_fd);
    tx2.post(&udp(5));
    secondary2.ring(wire::DB_SQ, sq_doorbell(&tx2));
    assert_eq!(tx2.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    let k = dev.counters();
    assert_eq!(sent(&k), 4);
    assert_eq!(k.device.discarded_doorbells, discarded + stale);
}

#[test]
fn after_a_reset_old_doorbell_mappings_are_dead_trap_mode() {
    reset_then_stale_stores(DoorbellMode::Trap, "stale-trap");
}

#[test]
fn after_a_reset_old_doorbell_mappings_are_dead_poll_mode() {
    reset_then_stale_stores(DoorbellMode::Poll, "stale-poll");
}

/// Close and reopen without a reset (a port closed and probed again): the
/// closed context's pages do not become the new context's.
#[test]
fn a_closed_contexts_doorbell_page_does_not_reach_its_successor() {
    let dev = TestDevice::new("stale-close", cfg(DoorbellMode::Trap));
    let ctx = dev.open();
    let secondary = SecondaryMapping::new(ctx.cmd_fd);
    let old_file = file_id(ctx.cmd_fd);
    ctx.close();
    let ctx2 = dev.open();
    assert_ne!(ctx2.db_page, ctx.db_page);
    assert_ne!(file_id(ctx2.cmd_fd), old_file);
    let mut tx2 = ctx2.tx_queue(1, 64).unwrap();
    tx2.post(&udp(1));
    let v = sq_doorbell(&tx2);
    ctx.ring(wire::DB_SQ, v);
    dev.settle();
    secondary.ring(wire::DB_SQ, v);
    dev.settle();
    assert!(tx2.cq.poll().is_empty());
    let k = dev.counters();
    assert_eq!((sent(&k), k.device.discarded_doorbells), (0, 2));
    ctx2.ring(wire::DB_SQ, v);
    assert_eq!(tx2.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
}

/// Hot remove: the context dies for good; both mappings discard.
#[test]
fn after_a_hot_remove_doorbell_mappings_are_dead() {
    let dev = TestDevice::new("stale-remove", cfg(DoorbellMode::Trap));
    let ctx = dev.open();
    let secondary = SecondaryMapping::new(ctx.cmd_fd);
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.fault(Fault::HotRemove { pci: PCI.into() }).unwrap();
    tx.post(&udp(1));
    let v = sq_doorbell(&tx);
    ctx.ring(wire::DB_SQ, v);
    dev.settle();
    secondary.ring(wire::DB_SQ, v);
    dev.settle();
    assert!(tx.cq.poll().is_empty());
    let k = dev.counters();
    assert_eq!((sent(&k), k.device.discarded_doorbells), (0, 2));
    assert_eq!(k.device.doorbells, 0);
}
