//! RSS ops: hash configuration and redirection table (read in any process
//! from the port's shared block).

use super::{data, port, ret};
use crate::control::rss;
use crate::control::state::rss_conf::RETA_SIZE;
use crate::control::state::shared::Shared;
use crate::ffi::{self, rte_eth_dev};
use std::ffi::c_int;

pub unsafe extern "C" fn hash_update(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    // SAFETY: ethdev passes a valid conf.
    let conf = unsafe { &*conf };
    ret(dev, rss::update_hash(port(dev), conf))
}

pub unsafe extern "C" fn hash_conf_get(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    let rss = Shared::of(data(dev)).rss();
    // SAFETY: ethdev passes a valid conf; the key buffer, if any, holds
    // rss_key_len bytes.
    unsafe {
        let conf = &mut *conf;
        if !conf.rss_key.is_null() && conf.rss_key_len >= 40 {
            std::ptr::copy_nonoverlapping(rss.key.as_ptr(), conf.rss_key, 40);
        }
        conf.rss_key_len = 40;
        conf.rss_hf = rss.hf;
    }
    0
}

pub unsafe extern "C" fn reta_update(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_reta_entry64,
    size: u16,
) -> c_int {
    // SAFETY: ethdev passes size / 64 groups, at least one.
    let group = unsafe { &*conf };
    ret(dev, rss::update_reta(port(dev), group, size))
}

pub unsafe extern "C" fn reta_query(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_reta_entry64,
    size: u16,
) -> c_int {
    if usize::from(size) != RETA_SIZE {
        return -libc::EINVAL;
    }
    let rss = Shared::of(data(dev)).rss();
    // SAFETY: one 64-entry group for a 64-entry table (size checked).
    let group = unsafe { &mut *conf };
    for i in 0..RETA_SIZE {
        if group.mask & (1 << i) != 0 {
            group.reta[i] = rss.reta[i];
        }
    }
    0
}
