//! Label selectors (`metav1.LabelSelector`) and how they match a pod's labels.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The operator of one `matchExpressions` requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorRequirement {
    /// Label key.
    pub key: String,
    /// How the key is tested.
    pub operator: SelectorOperator,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

impl SelectorRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// A label selector: every `match_labels` pair and every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`.
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelector {
    /// A selector of exactly these labels.
    pub fn labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelector {
            match_labels: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// No label and no requirement.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy the selector. An empty selector matches everything here; the
    /// Eviction API's rule (an empty PDB selector matches nothing) is the caller's, see
    /// [`crate::pdb::Pdb::selects`].
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// The selector in the `labelSelector=` query syntax, e.g. `app=web,tier in (a,b),!old`.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            let values = r.values.join(",");
            parts.push(match r.operator {
                SelectorOperator::In => format!("{} in ({values})", r.key),
                SelectorOperator::NotIn => format!("{} notin ({values})", r.key),
                SelectorOperator::Exists => r.key.clone(),
                SelectorOperator::DoesNotExist => format!("!{}", r.key),
            });
        }
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn requirement(key: &str, operator: SelectorOperator, values: &[&str]) -> SelectorRequirement {
        SelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let selector = LabelSelector {
            match_expressions: vec![
                requirement("tier", SelectorOperator::In, &["web", "api"]),
                requirement("canary", SelectorOperator::DoesNotExist, &[]),
            ],
            ..LabelSelector::labels([("app", "shop")])
        };
        assert!(selector.matches(&labels(&[("app", "shop"), ("tier", "api")])));
        assert!(!selector.matches(&labels(&[("app", "shop"), ("tier", "db")])));
        assert!(
            !selector.matches(&labels(&[("app", "shop")])),
            "In needs the key"
        );
        assert!(!selector.matches(&labels(&[
            ("app", "shop"),
            ("tier", "web"),
            ("canary", "1")
        ])));
        assert!(!selector.matches(&labels(&[("app", "other"), ("tier", "web")])));
    }

    #[test]
    fn not_in_and_exists_follow_kubernetes() {
        let not_in = LabelSelector {
            match_expressions: vec![requirement("env", SelectorOperator::NotIn, &["prod"])],
            ..LabelSelector::default()
        };
        assert!(
            not_in.matches(&labels(&[])),
            "NotIn holds for an absent key"
        );
        assert!(!not_in.matches(&labels(&[("env", "prod")])));
        let exists = LabelSelector {
            match_expressions: vec![requirement("env", SelectorOperator::Exists, &[])],
            ..LabelSelector::default()
        };
        assert!(exists.matches(&labels(&[("env", "x")])));
        assert!(!exists.matches(&labels(&[])));
    }

    #[test]
    fn the_query_syntax_is_the_api_servers() {
        let selector = LabelSelector {
            match_expressions: vec![
                requirement("tier", SelectorOperator::In, &["a", "b"]),
                requirement("old", SelectorOperator::DoesNotExist, &[]),
                requirement("env", SelectorOperator::NotIn, &["prod"]),
                requirement("team", SelectorOperator::Exists, &[]),
            ],
            ..LabelSelector::labels([("app", "web")])
        };
        assert_eq!(
            selector.to_query(),
            "app=web,tier in (a,b),!old,env notin (prod),team"
        );
        assert!(LabelSelector::default().is_empty());
    }
}
