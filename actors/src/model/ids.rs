//! The names and uids of the objects nmo knows, each its own type: a node's name cannot be
//! passed where a NodeMaintenance's is meant, nor a name where a uid is. Each is the API's
//! text as it is (serialized as a bare string, compared with text as text), so the wire
//! formats and the messages stay what they were.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Defines an id type over shared text (`Arc<str>`: a clone is a count, not a copy; the same
/// pod's uid and node name travel through the pod watch, the drain, the eviction queue and
/// their reports, a dozen copies each at a thousand drains): made from text (`From<&str>`,
/// `From<String>`), shown
/// and borrowed as text (`Display`, `Deref<Target = str>`, `AsRef<str>`, `Borrow<str>`, so a
/// map keyed by it is looked up with a `&str` too), compared with text, serialized as a plain
/// string.
macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// No text (unknown, e.g. a uid the API did not give).
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name(Arc::from(text))
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name(Arc::from(text))
            }
        }

        impl From<&String> for $name {
            fn from(text: &String) -> Self {
                $name(Arc::from(text.as_str()))
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0.to_string()
            }
        }

        /// As the text's (`"node-1"`): logs and test output read as they did with a `String`.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Read as text wherever text is wanted (messages, lookups, the API's paths); text
        /// never becomes an id without saying so (`From`).
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                *self.0 == *other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                *self == *other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }
    };
}

text_id!(
    /// A Kubernetes object's `metadata.uid` (a NodeMaintenance's, a Node's, a pod's, its
    /// owner's). Empty where the uid is not known.
    Uid
);

text_id!(
    /// A Node's name (`metadata.name`, or a NodeMaintenance's `spec.nodeName`).
    NodeName
);

text_id!(
    /// A NodeMaintenance's name (`metadata.name`; cluster scoped, so no namespace).
    MaintenanceName
);

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn an_id_is_its_text_on_the_wire_in_messages_and_in_lookups() {
        let node = NodeName::from("node-1");
        assert_eq!(serde_json::to_string(&node).unwrap(), "\"node-1\"");
        assert_eq!(
            serde_json::from_str::<NodeName>("\"node-1\"").unwrap(),
            node
        );
        assert_eq!(format!("node {node}"), "node node-1");
        assert_eq!(format!("{:?}", [&node]), r#"["node-1"]"#);
        assert_eq!(node, "node-1");
        assert_eq!("node-1", node);
        let drivers = HashMap::from([(node.clone(), Uid::from("u1"))]);
        assert_eq!(drivers.get("node-1"), Some(&Uid::from("u1")));
        assert!(Uid::default().is_empty());
    }
}
