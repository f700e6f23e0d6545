//! The steps of bringing a session up, one file each: the guard and the network side
//! (`network`), a Compose project (`compose`), Dev Container Features (`features`), the image's
//! metadata label (`metadata`), host ports (`ports`), named volumes (`volumes`) and the lifecycle hooks (`hooks`).

pub(crate) mod compose;
pub(crate) mod features;
pub(crate) mod hooks;
pub(crate) mod metadata;
pub(crate) mod network;
pub(crate) mod ports;
pub(crate) mod volumes;
