//! [`MapName`]: a map's name, shared rather than copied where a run records it.

use std::fmt;
use std::sync::Arc;

/// A map's name as a run's records hold it (a redirect's target map): cloning it shares the
/// text, so a program that redirects every packet does not allocate a name per packet.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MapName(Arc<str>);

impl MapName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for MapName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for MapName {
    fn from(name: &str) -> MapName {
        MapName(name.into())
    }
}

impl PartialEq<str> for MapName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl fmt::Display for MapName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for MapName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_text_and_compares_as_the_string() {
        let name = MapName::from("tx_port");
        let copy = name.clone();
        assert!(std::ptr::eq(name.as_str(), copy.as_str()));
        assert!(&copy == "tx_port");
        assert!(&copy != "tx_ports");
        assert_eq!(format!("{copy}/{copy:?}"), "tx_port/\"tx_port\"");
    }
}
