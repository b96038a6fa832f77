//! The budget's two limits and how a flag's text becomes one.

use std::fmt;
use std::str::FromStr;

/// A limit given as a number of nodes or as a percentage of the cluster's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this many.
    Count(u32),
    /// At most this percentage (1 to 100) of the nodes.
    Percent(u32),
}

/// A limit nmo refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// Neither a whole number nor a whole percentage.
    #[error(
        "`{0}` is neither a number (such as `5`) nor a percentage of the nodes (such as `10%`)"
    )]
    Malformed(String),
    /// Zero would never let any maintenance start.
    #[error(
        "`{0}` would never let a maintenance start: give at least 1 (or 1%), or leave the flag out for no limit"
    )]
    Zero(String),
    /// More than every node.
    #[error("`{0}` is more than 100% of the nodes")]
    OverHundredPercent(String),
}

impl FromStr for Limit {
    type Err = LimitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let malformed = || LimitError::Malformed(text.to_string());
        let limit = match trimmed.strip_suffix('%') {
            Some(number) => Limit::Percent(number.trim().parse().map_err(|_| malformed())?),
            None => Limit::Count(trimmed.parse().map_err(|_| malformed())?),
        };
        limit.check().map_err(|error| match error {
            LimitError::Zero(_) => LimitError::Zero(text.to_string()),
            LimitError::OverHundredPercent(_) => LimitError::OverHundredPercent(text.to_string()),
            other => other,
        })?;
        Ok(limit)
    }
}

impl Limit {
    /// Refuses a limit that would never let a maintenance start, or a percentage above 100.
    pub fn check(self) -> Result<(), LimitError> {
        match self {
            Limit::Count(0) | Limit::Percent(0) => Err(LimitError::Zero(self.to_string())),
            Limit::Percent(p) if p > 100 => Err(LimitError::OverHundredPercent(self.to_string())),
            _ => Ok(()),
        }
    }

    /// The limit for a cluster of `nodes` nodes. A percentage is rounded down, but never below
    /// 1: the flag was accepted because it lets maintenances start, so a small cluster still
    /// makes progress one node at a time.
    pub fn of(self, nodes: usize) -> usize {
        match self {
            Limit::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Limit::Percent(p) => {
                let p = usize::try_from(p).unwrap_or(100);
                (nodes.saturating_mul(p) / 100).max(1)
            }
        }
    }

    /// A percentage needs the number of nodes.
    pub fn needs_node_count(self) -> bool {
        matches!(self, Limit::Percent(_))
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Count(n) => write!(f, "{n}"),
            Limit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The cluster maintenance budget. The default has no limit (NMO's behaviour: every
/// NodeMaintenance starts at once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetBudget {
    /// `--max-parallel-maintenances`: NodeMaintenances driving nodes at once.
    pub max_parallel: Option<Limit>,
    /// `--max-unavailable-nodes`: nodes NotReady or cordoned (by anyone) at once.
    pub max_unavailable: Option<Limit>,
}

impl FleetBudget {
    /// Some limit is set: NodeMaintenances may have to wait.
    pub fn is_limited(&self) -> bool {
        self.max_parallel.is_some() || self.max_unavailable.is_some()
    }

    /// The budget needs the cluster's nodes: to count the unavailable ones, or to turn a
    /// percentage into a number.
    pub fn watches_nodes(&self) -> bool {
        self.max_unavailable.is_some() || self.max_parallel.is_some_and(Limit::needs_node_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_percentages_parse() {
        assert_eq!("5".parse(), Ok(Limit::Count(5)));
        assert_eq!(" 10% ".parse(), Ok(Limit::Percent(10)));
        assert_eq!("100%".parse(), Ok(Limit::Percent(100)));
        assert_eq!(Limit::Percent(10).to_string(), "10%");
        assert_eq!(Limit::Count(3).to_string(), "3");
    }

    #[test]
    fn zero_and_malformed_values_are_refused_with_the_value_named() {
        for zero in ["0", "0%", " 0 "] {
            assert_eq!(zero.parse::<Limit>(), Err(LimitError::Zero(zero.into())));
        }
        for bad in [
            "", "%", "ten", "10 %x", "-1", "1.5", "10%%", "5 nodes", "-5%",
        ] {
            assert_eq!(
                bad.parse::<Limit>(),
                Err(LimitError::Malformed(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(
            "150%".parse::<Limit>(),
            Err(LimitError::OverHundredPercent("150%".into()))
        );
        let message = "0".parse::<Limit>().unwrap_err().to_string();
        assert!(
            message.contains("`0`") && message.contains("never"),
            "{message}"
        );
        assert_eq!(Limit::Count(0).check(), Err(LimitError::Zero("0".into())));
    }

    #[test]
    fn percentages_round_down_but_never_below_one() {
        assert_eq!(Limit::Percent(10).of(200), 20);
        assert_eq!(Limit::Percent(10).of(199), 19);
        assert_eq!(Limit::Percent(10).of(5), 1);
        assert_eq!(Limit::Percent(100).of(7), 7);
        assert_eq!(Limit::Count(3).of(1), 3);
    }

    #[test]
    fn only_what_needs_nodes_watches_them() {
        assert!(!FleetBudget::default().is_limited());
        let count = FleetBudget {
            max_parallel: Some(Limit::Count(2)),
            max_unavailable: None,
        };
        assert!(count.is_limited() && !count.watches_nodes());
        let percent = FleetBudget {
            max_parallel: Some(Limit::Percent(10)),
            max_unavailable: None,
        };
        assert!(percent.watches_nodes());
        let unavailable = FleetBudget {
            max_parallel: None,
            max_unavailable: Some(Limit::Count(1)),
        };
        assert!(unavailable.watches_nodes());
    }
}
