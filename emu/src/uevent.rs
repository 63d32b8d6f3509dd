//! Kernel hot-plug events (kobject uevents) for the emulated devices.
//!
//! DPDK's device-event monitor (`rte_dev_event_monitor_start`, which
//! netvsc starts) reads uevents from a `NETLINK_KOBJECT_UEVENT` socket: a
//! PCI function's `add` is how netvsc learns that its VF came back, and its
//! `remove` how a PMD tells a hot remove from a service reset. In the
//! preload library such sockets are private socket pairs (see
//! [`crate::vmbus::interpose`]): the process receives the emulator's events
//! for its emulated functions, in the kernel's format, and none of the
//! machine's.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// The host ends of the fake uevent sockets and the identity of the
/// guest's end.
static SOCKETS: Mutex<Vec<(OwnedFd, (u64, u64))>> = Mutex::new(Vec::new());

const NETLINK_KOBJECT_UEVENT: c_int = 15;

/// For the `socket` hook: a private uevent socket when the preload library
/// is active and a kobject-uevent netlink socket is asked for.
pub fn fake_socket(domain: c_int, ty: c_int, proto: c_int) -> Option<RawFd> {
    if domain != libc::AF_NETLINK
        || proto != NETLINK_KOBJECT_UEVENT
        || !crate::vmbus::interpose::active()
    {
        return None;
    }
    let flags = ty & (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let mut fds = [0; 2];
    // SAFETY: socketpair into a 2-int array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | flags, 0, fds.as_mut_ptr()) }
        != 0
    {
        return Some(-1);
    }
    // SAFETY: the host end is a fresh descriptor we own.
    let host = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    // SAFETY: making our own end non-blocking and close-on-exec.
    unsafe {
        libc::fcntl(host.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        libc::fcntl(host.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
    match crate::vmbus::netvsp::file_id(fds[0]) {
        Ok(id) => {
            SOCKETS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((host, id));
            Some(fds[0])
        }
        Err(_) => {
            // SAFETY: closing the guest end we just created.
            unsafe { libc::close(fds[0]) };
            Some(-1)
        }
    }
}

/// For the `bind` hook: is `fd` one of the fake uevent sockets?
pub fn is_fake(fd: RawFd) -> bool {
    let s = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    if s.is_empty() {
        return false;
    }
    match crate::vmbus::netvsp::file_id(fd) {
        Ok(id) => s.iter().any(|(_, g)| *g == id),
        Err(_) => false,
    }
}

/// The message the kernel multicasts for a PCI function's `add`/`remove`.
pub fn pci_message(action: &str, bdf: &str) -> Vec<u8> {
    let devpath = format!("/devices/pci{}/{bdf}", &bdf[..bdf.len().min(7)]);
    let mut m = format!("{action}@{devpath}").into_bytes();
    m.push(0);
    for kv in [
        format!("ACTION={action}"),
        format!("DEVPATH={devpath}"),
        "SUBSYSTEM=pci".to_string(),
        "PCI_CLASS=20000".to_string(),
        "PCI_ID=1414:00BA".to_string(),
        format!("PCI_SLOT_NAME={bdf}"),
        "SEQNUM=1".to_string(),
    ] {
        m.extend_from_slice(kv.as_bytes());
        m.push(0);
    }
    m
}

/// Sends a PCI `add`/`remove` event to every listener in the process;
/// returns how many got it.
pub fn pci_event(action: &str, bdf: &str) -> usize {
    let m = pci_message(action, bdf);
    let mut s = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    let mut sent = 0;
    s.retain(|(h, _)| {
        // SAFETY: a non-blocking send of our buffer on our socket.
        let n = unsafe {
            libc::send(
                h.as_raw_fd(),
                m.as_ptr().cast(),
                m.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n == m.len() as isize {
            sent += 1;
            true
        } else {
            // The listener closed its end (ECONNREFUSED) or stopped reading.
            let e = std::io::Error::last_os_error().raw_os_error();
            e == Some(libc::EAGAIN)
        }
    });
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_message_has_what_eal_parses() {
        let m = pci_message("add", "7870:00:00.0");
        let fields: Vec<&str> = m
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| std::str::from_utf8(f).unwrap())
            .collect();
        assert_eq!(fields[0], "add@/devices/pci7870:00/7870:00:00.0");
        assert!(fields.contains(&"ACTION=add"));
        assert!(fields.contains(&"SUBSYSTEM=pci"));
        assert!(fields.contains(&"PCI_SLOT_NAME=7870:00:00.0"));
    }
}
