//! BTF and BTF.ext.

pub mod error;
pub mod ext;
mod ext_parse;
pub mod json;
mod kernel_meta;
mod kernel_resolve;
mod parse;
pub mod query;
mod reader;
mod sanitize;
pub mod types;
mod write;

pub use error::BtfError;
pub use ext::{BtfExt, CoreRelo, CoreReloKind, FuncInfo, LineInfo, SectionRecords};
pub use sanitize::{BtfFeatures, FeatureProbe};
pub use types::{
    Btf, BtfKind, BtfType, EnumValue, IntEncoding, Linkage, Member, Param, TypeId, VarSecInfo,
};
pub use write::EncodedBtf;
