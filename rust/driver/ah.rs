// SPDX-License-Identifier: GPL-2.0

//! Address handles: where a UD send goes.

use kernel::prelude::*;

use super::device::MetaRoceIbDevice;
use crate::ib::udata::{CreateAhResp, Udata};
use crate::ib::verbs::{AddressVector, AhAttr};

/// Driver state of an AH.
pub(crate) struct AhState {
    av: AddressVector,
    ah_num: u32,
}

impl AhState {
    /// Creates an AH; a process learns its number (WQEs name AHs by it).
    /// Atomic context for kernel consumers (no sleeping, no allocation).
    pub(crate) fn create(
        dev: &MetaRoceIbDevice,
        pd: usize,
        attr: &AhAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self> {
        let ah_num = dev.data().take_ah_num()?;
        let av = AddressVector::from_attr(attr);
        if let Some(udata) = udata {
            if let Err(e) = udata.respond(&CreateAhResp {
                ah_num,
                reserved: 0,
            }) {
                dev.data().give_back_ah_num(ah_num);
                return Err(e);
            }
        }
        dev.data().ahs.set(ah_num, pd, &av);
        Ok(Self { av, ah_num })
    }

    /// Gives the AH number back.
    pub(crate) fn release(&self, dev: &MetaRoceIbDevice) {
        dev.data().ahs.clear(self.ah_num);
        dev.data().give_back_ah_num(self.ah_num);
    }

    /// The AH's number.
    pub(crate) fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// The destination.
    #[allow(dead_code)] // The UD data path sends to it.
    pub(crate) fn av(&self) -> &AddressVector {
        &self.av
    }
}
