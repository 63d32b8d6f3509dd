//! The ports' wire side: frames sent to a port's backend (loopback, pair,
//! sink, pcap, AF_PACKET), frames received into its backlog (what an Azure
//! virtual network carries, link, MAC filter, backlog limit), capture for tests, the port MTU taken from the
//! netdev's sysfs `mtu` file, and port / adapter lookups.

#![forbid(unsafe_code)]

use super::{Res, State, EINVAL, ENOENT};
use crate::backend::{self, Backend};
use crate::config::parse_mac;

const RX_BACKLOG_MAX: usize = 65536;

impl State {
    pub(super) fn adapter_by_pci(&self, pci: &str) -> Res<usize> {
        let pci = crate::config::normalize_pci(pci).map_err(|_| EINVAL)?;
        self.adapters
            .iter()
            .position(|a| a.pci == pci)
            .ok_or(ENOENT)
    }

    /// The MAC of an adapter's first port (mana_ib derives the node GUID
    /// from it).
    pub fn adapter_mac(&self, adapter: usize) -> Option<[u8; 6]> {
        let p = *self.adapters.get(adapter)?.ports.first()?;
        Some(self.ports[p].mac)
    }

    pub(super) fn port_by_mac(&self, mac: &str) -> Res<usize> {
        let m = parse_mac(mac).map_err(|_| EINVAL)?;
        self.ports.iter().position(|p| p.mac == m).ok_or(ENOENT)
    }

    pub(super) fn deliver(&mut self, port: usize, frame: Vec<u8>) {
        let p = &mut self.ports[port];
        if let Some(cap) = &mut p.capture {
            cap.push(frame.clone());
        }
        match &mut p.backend {
            Backend::Loopback => self.enqueue_rx(port, frame),
            Backend::Pair(peer) => {
                let peer = *peer;
                self.enqueue_rx(peer, frame)
            }
            Backend::Sink => {}
            Backend::Pcap { tx, .. } => {
                if let Some(w) = tx {
                    let _ = backend::pcap_write(w, &frame);
                }
            }
            Backend::AfPacket(fd) => {
                if !backend::af_packet_send(fd, &frame) {
                    p.counters.drop("backend_tx", 1);
                }
            }
        }
    }

    fn enqueue_rx(&mut self, port: usize, frame: Vec<u8>) {
        // An Azure virtual network carries no broadcast and no multicast
        // (the host answers ARP and DHCP itself): neither door of the vPort,
        // VF or synthetic NIC, ever sees such a frame.
        if let Some(reason) = vnet_blocks(&frame) {
            self.ports[port].counters.drop(reason, 1);
            return;
        }
        // A synthetic NIC on this port's wire takes the frames its VF does not.
        let vf_ready =
            self.adapters[self.ports[port].adapter].present && self.ports[port].rss.is_some();
        let Some(frame) = self.vswitch.divert(port, vf_ready, frame) else {
            return;
        };
        let p = &mut self.ports[port];
        if !p.link_up {
            p.counters.drop("link_down", 1);
        } else if p.mac_filter && frame.len() >= 6 && frame[..6] != p.mac {
            p.counters.drop("mac_filter", 1);
        } else if p.backlog.len() >= RX_BACKLOG_MAX {
            p.counters.drop("rx_backlog", 1);
        } else {
            p.backlog.push_back(frame);
        }
    }

    /// Injects a frame as if it arrived on the wire of `port`.
    pub fn inject_rx(&mut self, port: usize, frame: Vec<u8>) {
        self.enqueue_rx(port, frame);
    }

    pub fn set_capture(&mut self, port: usize, on: bool) {
        self.ports[port].capture = if on { Some(Vec::new()) } else { None };
    }

    pub fn take_capture(&mut self, port: usize) -> Vec<Vec<u8>> {
        self.ports[port]
            .capture
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub(super) fn poll_backends(&mut self) -> bool {
        let mut did = false;
        // Allocated (and zeroed: 64 KiB) only when an AF_PACKET port reads.
        let mut buf = Vec::new();
        for i in 0..self.ports.len() {
            let rx_ready = self.ports[i].rss.is_some();
            let backlog_empty = self.ports[i].backlog.is_empty();
            let mut got = Vec::new();
            match &mut self.ports[i].backend {
                Backend::AfPacket(fd) => {
                    buf.resize(65536, 0);
                    while got.len() < 256 {
                        match backend::af_packet_recv(fd, &mut buf) {
                            Some(frame) => got.push(buf[frame].to_vec()),
                            None => break,
                        }
                    }
                    let lost = backend::af_packet_drops(fd);
                    if lost > 0 {
                        self.ports[i].counters.drop("backend_rx_overflow", lost);
                    }
                }
                // Fed once RX is configured, without outrunning a lossless
                // port's backlog.
                Backend::Pcap { rx, .. } if rx_ready && backlog_empty => {
                    while got.len() < 64 {
                        match rx.pop_front() {
                            Some(f) => got.push(f),
                            None => break,
                        }
                    }
                }
                _ => {}
            }
            for f in got {
                did = true;
                self.enqueue_rx(i, f);
            }
        }
        did
    }

    /// Takes the ports' MTUs from their netdevs' sysfs `mtu` files, if
    /// changed (see [`crate::mtuwatch`]). `urgent`: look now rather than at
    /// most every few milliseconds.
    pub fn refresh_mtu(&mut self, urgent: bool) {
        for i in self.mtu_watch.poll(urgent) {
            let Ok(s) = std::fs::read_to_string(self.mtu_watch.file(i)) else {
                continue; // gone (hot remove) or not yet created
            };
            match crate::sysfs::parse_mtu(&s) {
                Some(m) if m != self.ports[i].mtu => {
                    self.ports[i].mtu = m;
                    self.counters.mtu_changes += 1;
                }
                Some(_) => {}
                // A truncate seen before the write that follows it, or
                // garbage: keep the MTU. Counted only when inotify tells
                // of the change (polling would count it every time).
                None if s.is_empty() => {}
                None => {
                    if self.mtu_watch.has_inotify() {
                        self.counters.mtu_file_invalid += 1;
                    }
                }
            }
        }
    }

    pub fn port_index(&self, mac: &str) -> Option<usize> {
        self.port_by_mac(mac).ok()
    }

    pub(super) fn flush_backends(&mut self) {
        for p in &mut self.ports {
            p.backend.flush();
        }
    }
}

/// Why an Azure virtual network does not deliver `frame` to a vPort, if it
/// does not: its destination is the broadcast address or a multicast group
/// (the I/G bit of the first octet).
fn vnet_blocks(frame: &[u8]) -> Option<&'static str> {
    let dst = frame.get(..6)?;
    if dst == [0xff; 6] {
        Some("vnet_broadcast")
    } else if dst[0] & 1 != 0 {
        Some("vnet_multicast")
    } else {
        None
    }
}
