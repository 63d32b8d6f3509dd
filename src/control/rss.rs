//! RSS operations on a stopped port: the hash key and types, and the
//! redirection table (the configuration itself is `state::rss_conf`).

#![forbid(unsafe_code)]

use crate::control::error::{self, Error};
use crate::control::lifecycle::refuse_if_resetting;
use crate::control::port::Port;
use crate::control::state::rss_conf::{Rss, RETA_SIZE, RSS_OFFLOADS};
use crate::ffi;

/// `rss_hash_update`, on a stopped port.
pub fn update_hash(p: &Port, conf: &ffi::rte_eth_rss_conf) -> error::Result<()> {
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    if ctrl.started {
        return Err(Error::new(
            libc::EBUSY,
            "stop the port before changing its RSS configuration",
        ));
    }
    if conf.rss_hf & !RSS_OFFLOADS != 0 {
        return Err(Error::invalid(format!(
            "RSS types {:#x} are not supported",
            conf.rss_hf & !RSS_OFFLOADS
        )));
    }
    ctrl.rss.take_key(conf)?;
    ctrl.rss.hf = conf.rss_hf;
    p.shared().set_rss(&ctrl.rss);
    Ok(())
}

/// `reta_update`, on a stopped port: the entries `group`'s mask selects.
pub fn update_reta(
    p: &Port,
    group: &ffi::rte_eth_rss_reta_entry64,
    size: u16,
) -> error::Result<()> {
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    if ctrl.started {
        return Err(Error::new(
            libc::EBUSY,
            "stop the port before changing its RSS redirection table",
        ));
    }
    if usize::from(size) != RETA_SIZE {
        return Err(Error::invalid(format!(
            "the redirection table has {RETA_SIZE} entries, not {size}"
        )));
    }
    let mut reta = ctrl.rss.reta;
    for (i, e) in reta.iter_mut().enumerate() {
        if group.mask & (1 << i) != 0 {
            *e = group.reta[i];
        }
    }
    Rss::queue_order(&reta, usize::from(ctrl.rx.configured()))
        .map_err(|m| Error::invalid(format!("redirection table rejected: {m}")))?;
    ctrl.rss.reta = reta;
    p.shared().set_rss(&ctrl.rss);
    Ok(())
}
