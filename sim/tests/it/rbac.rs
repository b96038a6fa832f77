//! The simulator's RBAC honours where a grant applies, as a real API server does: a Role's rules
//! only in the Role's namespace, a binding only for its subjects. Without that, moving nmo's lease
//! rights from its ClusterRole into namespaced Roles would prove nothing.

use nmo_sim::Rbac;

const USER: &str = "system:serviceaccount:nmo-system:nmo";

const ROLES: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nodes}
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nodes}
subjects:
  - {kind: ServiceAccount, name: nmo, namespace: nmo-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leases, namespace: medik8s-leases}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leases, namespace: medik8s-leases}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leases}
subjects:
  - {kind: ServiceAccount, name: nmo, namespace: nmo-system}
---
# A ClusterRole bound by a RoleBinding grants only in the binding's namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: configmaps}
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: configmaps, namespace: nmo-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: configmaps}
subjects:
  - {kind: ServiceAccount, name: nmo, namespace: nmo-system}
---
# Bound to someone else: grants nmo nothing.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: secrets}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: secrets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: secrets}
subjects:
  - {kind: ServiceAccount, name: other, namespace: nmo-system}
"#;

fn allowed(rbac: &Rbac, verb: &str, group: &str, resource: &str, ns: &str) -> bool {
    rbac.check(USER, verb, group, resource, "", ns, "x").is_ok()
}

#[test]
fn a_role_grants_only_in_its_namespace_and_a_binding_only_to_its_subjects() {
    let rbac = Rbac::from_yaml(USER, ROLES).expect("the rules load");
    let lease = "coordination.k8s.io";
    assert!(allowed(&rbac, "get", "", "nodes", ""));
    assert!(allowed(&rbac, "create", lease, "leases", "medik8s-leases"));
    assert!(!allowed(&rbac, "create", lease, "leases", "kube-system"));
    // Across every namespace is not "in medik8s-leases".
    assert!(!allowed(&rbac, "get", lease, "leases", ""));
    assert!(allowed(&rbac, "get", "", "configmaps", "nmo-system"));
    assert!(!allowed(&rbac, "get", "", "configmaps", "default"));
    assert!(!allowed(&rbac, "get", "", "secrets", "nmo-system"));
    let denied = rbac.denials();
    assert_eq!(denied.len(), 4, "{denied:?}");
    assert!(
        denied[0].contains("cannot create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""),
        "{denied:?}"
    );
}

#[test]
fn without_any_binding_every_role_is_the_users_in_its_own_scope() {
    // The simulator's own tests give the rules alone (no binding): they stay the user's.
    let rules = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nodes}
rules:
  - {apiGroups: [""], resources: ["nodes"], verbs: ["get"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leases, namespace: medik8s-leases}
rules:
  - {apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get"]}
"#;
    let rbac = Rbac::from_yaml(USER, rules).expect("the rules load");
    assert!(allowed(&rbac, "get", "", "nodes", ""));
    assert!(allowed(
        &rbac,
        "get",
        "coordination.k8s.io",
        "leases",
        "medik8s-leases"
    ));
    assert!(!allowed(
        &rbac,
        "get",
        "coordination.k8s.io",
        "leases",
        "nmo-system"
    ));
}
