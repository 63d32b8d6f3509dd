//! Fault injection: service reset, hot remove, link, TX pause, CQE delay
//! and corruption, allocation failures, kernel interface up, triggers.

use mana_emu::device::{Fault, LieKind, Trigger};
use mana_emu::ffi::{IBV_EVENT_DEVICE_FATAL, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR};
use mana_emu::testing::*;
use mana_emu::wire;
use std::time::{Duration, Instant};

mod common;
use common::*;

#[test]
fn service_reset_fatal_event_dead_context_and_return() {
    let dev = TestDevice::new("reset", two_sinks());
    let root = dev.config().options.sysfs_root.clone();
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    let mut rx = rx_queue(&ctx, 8);
    tx.post(&udp(1));
    tx.ring();
    tx.cq.wait(1);
    assert_eq!(
        ctx.async_event(),
        None,
        "async fd empty: read fails (EAGAIN)"
    );
    dev.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: Some(400),
        new_name: Some("manae_0".into()),
    })
    .unwrap();
    assert_eq!(ctx.async_event(), Some((IBV_EVENT_DEVICE_FATAL, 0)));
    assert_eq!(ctx.async_event(), None);
    // Doorbells are silently discarded, CQs stop.
    tx.post(&udp(2));
    tx.ring();
    dev.inject(A, udp(3));
    dev.settle();
    assert!(tx.cq.poll().is_empty());
    assert!(rx.poll(0).is_empty());
    let k = dev.counters();
    assert_eq!(k.device.discarded_doorbells, 1);
    assert_eq!(k.port(A).unwrap().tx_packets, 1);
    // Creates on the dead context: EIO. Destroys succeed.
    assert_eq!(ctx.tx_queue(1, 64).err().unwrap().0, libc::EIO);
    assert_eq!(
        dev.emu.lock().alloc_pd(ctx.handle).err().unwrap().0,
        libc::EIO
    );
    tx.destroy().unwrap();
    rx.destroy().unwrap();
    // The device is gone from the device list and its IB sysfs dir too,
    // the PCI function stays.
    assert!(dev.emu.lock().visible().is_empty());
    assert!(!root.join("class/infiniband/mana_0").exists());
    assert!(root
        .join("bus/pci/devices")
        .join(PCI)
        .join("vendor")
        .exists());
    assert!(dev.try_open(0).is_err());
    ctx.close();
    // Back after down_ms: same PCI address and MACs, new name, new generation.
    let t0 = Instant::now();
    while dev.emu.lock().visible().is_empty() {
        // Only catches a device that never comes back.
        assert!(t0.elapsed() < Duration::from_secs(120), "never back");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let v = dev.emu.lock().visible();
    assert_eq!(v.len(), 1);
    let l = &v[0];
    assert_eq!(
        (
            l.adapter,
            l.generation,
            l.name.as_str(),
            l.pci.as_str(),
            l.num_ports,
            l.rnic
        ),
        (0, 2, "manae_0", PCI, 2, false)
    );
    let ib = root.join("class/infiniband/manae_0/device");
    let uevent = std::fs::read_to_string(ib.join("uevent")).unwrap();
    assert!(uevent.contains(&format!("PCI_SLOT_NAME={PCI}")));
    assert_eq!(
        std::fs::read_to_string(ib.join("net/eth1/address"))
            .unwrap()
            .trim(),
        A
    );
    // A fresh context works.
    let ctx2 = dev.open();
    let mut tx2 = ctx2.tx_queue(1, 64).unwrap();
    tx2.post(&udp(4));
    tx2.ring();
    assert_eq!(tx2.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
}

#[test]
fn hot_remove_is_for_good() {
    let dev = TestDevice::new("hotrm", two_sinks());
    let root = dev.config().options.sysfs_root.clone();
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.fault(Fault::HotRemove { pci: PCI.into() }).unwrap();
    assert_eq!(ctx.async_event(), Some((IBV_EVENT_DEVICE_FATAL, 0)));
    assert!(
        !root.join("bus/pci/devices").join(PCI).exists(),
        "PCI sysfs dir removed"
    );
    assert!(!root.join("class/infiniband/mana_0").exists());
    std::thread::sleep(Duration::from_millis(300));
    assert!(dev.emu.lock().visible().is_empty());
    assert!(dev.try_open(0).is_err());
    tx.destroy().unwrap();
    assert!(dev
        .fault(Fault::Reset {
            pci: PCI.into(),
            down_ms: None,
            new_name: None
        })
        .is_err());
}

#[test]
fn link_down_and_up() {
    let dev = TestDevice::new("link", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    let mut rx = rx_queue(&ctx, 8);
    dev.capture(A);
    dev.fault(Fault::LinkDown { mac: A.into() }).unwrap();
    assert_eq!(ctx.async_event(), Some((IBV_EVENT_PORT_ERR, 1)));
    tx.post(&udp(1));
    tx.ring();
    assert_eq!(
        tx.cq.wait(1)[0].cqe_type,
        wire::CQE_TX_OKAY,
        "the WQE completes"
    );
    dev.inject(A, udp(2));
    dev.settle();
    assert!(rx.poll(0).is_empty());
    assert!(dev.take_capture(A).is_empty());
    let k = dev.counters();
    assert_eq!(k.port(A).unwrap().drops("link_down"), 2);
    assert_eq!(
        (k.port(A).unwrap().tx_packets, k.port(A).unwrap().rx_packets),
        (0, 0)
    );
    assert!(!k.ports[0].link_up);
    dev.fault(Fault::LinkUp { mac: A.into() }).unwrap();
    assert_eq!(ctx.async_event(), Some((IBV_EVENT_PORT_ACTIVE, 1)));
    tx.post(&udp(3));
    tx.ring();
    tx.cq.wait(1);
    dev.inject(A, udp(4));
    assert_eq!(rx.wait(0, 1)[0].data, udp(4));
    assert_eq!(dev.take_capture(A), vec![udp(3)]);
}

#[test]
fn tx_pause_holds_wqes_until_resume() {
    let dev = TestDevice::new("pause", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.fault(Fault::TxPause { mac: A.into() }).unwrap();
    for i in 0..5 {
        tx.post(&udp(i));
    }
    tx.ring();
    dev.settle();
    assert!(tx.cq.poll().is_empty());
    assert_eq!(dev.counters().port(A).unwrap().tx_packets, 0);
    dev.fault(Fault::TxResume { mac: A.into() }).unwrap();
    assert_eq!(tx.cq.wait(5).len(), 5);
}

#[test]
fn cqe_delay_keeps_order() {
    let dev = TestDevice::new("delay", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.fault(Fault::CqeDelay { ms: 300, count: 1 }).unwrap();
    let t0 = Instant::now();
    let o1 = tx.post(&udp(1));
    tx.ring();
    let o2 = tx.post(&udp(2));
    tx.ring();
    dev.settle();
    assert!(tx.cq.poll().is_empty(), "nothing visible before the delay");
    let c = tx.cq.wait(2);
    assert!(t0.elapsed() >= Duration::from_millis(280));
    assert_eq!(
        (c[0].tx_wqe_offset(), c[1].tx_wqe_offset()),
        (o1, o2),
        "in order"
    );
    // Later CQEs are immediate again: visible as soon as the device has
    // taken the doorbell (not after a span of time, which a busy machine
    // stretches anyway).
    tx.post(&udp(3));
    tx.ring();
    dev.settle();
    assert_eq!(tx.cq.poll().len(), 1, "a later CQE was delayed");
}

#[test]
fn cqe_corruption_garbles_type_and_reserved_bits() {
    let dev = TestDevice::new("corrupt", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.fault(Fault::CqeCorrupt { count: 1 }).unwrap();
    tx.post(&udp(1));
    tx.post(&udp(2));
    tx.ring();
    let c = tx.cq.wait(2);
    assert_eq!(c[0].cqe_type, 0x3f);
    assert_eq!(c[0].reserved_info, 0xf);
    assert_eq!(
        c[0].owner, 1,
        "owner bits stay valid so the driver reads it"
    );
    assert_eq!(c[1].cqe_type, wire::CQE_TX_OKAY);
    assert_eq!(c[1].reserved_info, 0);
}

/// The same seed and the same work give the same lies, counted per kind;
/// `count` ends them. Repeated CQEs take a slot more, missing ones none.
#[test]
fn a_lying_device_is_reproducible_from_its_seed() {
    let run = |name: &str| {
        let dev = TestDevice::new(name, two_sinks());
        let ctx = dev.open();
        let mut tx = ctx.tx_queue(1, 64).unwrap();
        dev.fault(Fault::Lie {
            seed: 42,
            per_million: 300_000,
            kinds: vec![
                LieKind::UnknownType,
                LieKind::WrongQueue,
                LieKind::BadWqeOffset,
                LieKind::Duplicate,
                LieKind::Drop,
            ],
            count: Some(10),
            ms: None,
        })
        .unwrap();
        let mut cqes = Vec::new();
        for i in 0..40 {
            tx.post(&udp(i));
            tx.ring();
            dev.settle();
            cqes.extend(tx.cq.poll());
        }
        (cqes, dev.counters().device.lies)
    };
    let (a, lies) = run("lie-a");
    let (b, lies_b) = run("lie-b");
    assert_eq!(lies.values().sum::<u64>(), 10, "{lies:?}");
    assert_eq!(lies, lies_b);
    assert_eq!(a, b);
    let n = |k: &str| lies.get(k).copied().unwrap_or(0);
    assert_eq!(a.len() as u64, 40 + n("duplicate") - n("drop"));
    let garbled = a.iter().filter(|c| c.cqe_type >= 50).count() as u64;
    assert_eq!(garbled, n("unknown_type"));
}

#[test]
fn allocation_failures_for_the_next_n_creates() {
    let dev = TestDevice::new("allocfail", two_sinks());
    let ctx = dev.open();
    dev.fault(Fault::AllocFail { count: 2 }).unwrap();
    assert_eq!(ctx.tx_queue(1, 64).err().unwrap().0, libc::ENOMEM);
    assert_eq!(
        dev.emu
            .lock()
            .reg_mr(ctx.pd, ctx.pool.addr(), 4096)
            .err()
            .unwrap()
            .0,
        libc::ENOMEM
    );
    assert!(ctx.tx_queue(1, 64).is_ok());
}

#[test]
fn kernel_interface_up_makes_qp_creation_ebusy() {
    let mut c = two_sinks();
    c.adapters[0].ports[1].kernel_if_up = true;
    let dev = TestDevice::new("kif", c);
    let ctx = dev.open();
    assert_eq!(ctx.tx_queue(2, 64).err().unwrap().0, libc::EBUSY);
    assert_eq!(
        ctx.rx_queues(2, 1, 64, fields::IPV4, &DPDK_RSS_KEY)
            .err()
            .unwrap()
            .0,
        libc::EBUSY
    );
    assert!(ctx.tx_queue(1, 64).is_ok());
    dev.fault(Fault::KernelIf {
        mac: B.into(),
        up: false,
    })
    .unwrap();
    assert!(ctx.tx_queue(2, 64).is_ok());
    let flags = dev
        .dir
        .join("sys/bus/pci/devices")
        .join(PCI)
        .join("net/eth2/flags");
    assert_eq!(std::fs::read_to_string(flags).unwrap(), "0x1002\n");
}

#[test]
fn fault_after_n_packets_and_after_ms() {
    let dev = TestDevice::new("trigger", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 256).unwrap();
    dev.capture(A);
    dev.schedule(Fault::LinkDown { mac: A.into() }, Trigger::AfterPackets(10))
        .unwrap();
    for i in 0..10 {
        tx.post(&udp(i));
    }
    tx.ring();
    tx.cq.wait(10);
    dev.settle();
    for i in 0..10 {
        tx.post(&udp(i));
    }
    tx.ring();
    tx.cq.wait(10);
    assert_eq!(dev.take_capture(A).len(), 10);
    assert_eq!(dev.counters().port(A).unwrap().drops("link_down"), 10);
    dev.schedule(Fault::LinkUp { mac: A.into() }, Trigger::AfterMs(100))
        .unwrap();
    let t0 = Instant::now();
    dev.wait_counters(|k| k.ports[0].link_up);
    assert!(t0.elapsed() >= Duration::from_millis(90));
}
