//! Reading a PodDisruptionBudget: which ones can never allow a disruption.

use super::model::BudgetFacts;

/// Why a budget can never allow a disruption as it stands (a person must change it, scale the
/// workload or heal its pods), or None.
pub fn structural(budget: &BudgetFacts) -> Option<String> {
    if let Some(max) = budget.max_unavailable.as_deref()
        && (max == "0" || max == "0%")
    {
        return Some(format!("has maxUnavailable: {max}"));
    }
    let expected = budget.expected_pods;
    if let Some(min) = budget.min_available.as_deref() {
        if min == "100%" {
            return Some("has minAvailable: 100%".to_string());
        }
        if let Ok(min) = min.parse::<i32>()
            && expected > 0
            && min >= expected
        {
            return Some(format!(
                "has minAvailable: {min} and covers {expected} pods"
            ));
        }
    }
    if expected > 0 && budget.desired_healthy >= expected {
        return Some(format!(
            "needs all of its {expected} pods healthy ({} desired)",
            budget.desired_healthy
        ));
    }
    if expected > 0
        && budget.current_healthy == 0
        && budget.desired_healthy > 0
        && !budget.always_allow_unhealthy
    {
        return Some(format!(
            "has no healthy pod (0 of {expected}, {} needed), and unhealthy pods may only go while it is healthy",
            budget.desired_healthy
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> BudgetFacts {
        BudgetFacts {
            namespace: "app".into(),
            name: "web".into(),
            selector: None,
            max_unavailable: None,
            min_available: None,
            disruptions_allowed: 1,
            current_healthy: 3,
            desired_healthy: 2,
            expected_pods: 3,
            always_allow_unhealthy: false,
        }
    }

    #[test]
    fn a_budget_with_room_is_not_structural() {
        assert_eq!(structural(&budget()), None);
        let min_two = BudgetFacts {
            min_available: Some("2".into()),
            ..budget()
        };
        assert_eq!(structural(&min_two), None);
    }

    #[test]
    fn max_unavailable_zero_is_structural() {
        for zero in ["0", "0%"] {
            let b = BudgetFacts {
                max_unavailable: Some(zero.into()),
                ..budget()
            };
            assert_eq!(structural(&b), Some(format!("has maxUnavailable: {zero}")));
        }
    }

    #[test]
    fn min_available_of_every_pod_is_structural() {
        let b = BudgetFacts {
            min_available: Some("3".into()),
            desired_healthy: 3,
            disruptions_allowed: 0,
            ..budget()
        };
        assert_eq!(
            structural(&b),
            Some("has minAvailable: 3 and covers 3 pods".into())
        );
        let all = BudgetFacts {
            min_available: Some("100%".into()),
            ..budget()
        };
        assert_eq!(structural(&all), Some("has minAvailable: 100%".into()));
        // A percentage that rounds up to every pod: read from the status.
        let rounded = BudgetFacts {
            min_available: Some("60%".into()),
            expected_pods: 1,
            desired_healthy: 1,
            current_healthy: 1,
            ..budget()
        };
        assert!(
            structural(&rounded)
                .unwrap()
                .contains("needs all of its 1 pods")
        );
    }

    #[test]
    fn no_healthy_pod_is_structural_unless_unhealthy_pods_may_always_go() {
        let sick = BudgetFacts {
            current_healthy: 0,
            disruptions_allowed: 0,
            ..budget()
        };
        assert!(structural(&sick).unwrap().contains("no healthy pod"));
        let always = BudgetFacts {
            always_allow_unhealthy: true,
            ..sick
        };
        assert_eq!(structural(&always), None);
    }
}
