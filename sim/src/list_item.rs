//! List items as the real server lists them: without `apiVersion` and `kind` (the list carries
//! them), cut from the stored bytes without parsing where possible.

use serde_json::Value;

/// A list item as the real server lists it: without `apiVersion` and `kind` (the list has
/// them). Objects are stored with their keys sorted, so the two lead and are cut off without
/// parsing; anything else is parsed.
pub fn without_type(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let skip_string = |bytes: &[u8], from: usize| -> Option<usize> {
        // `from` is at an opening quote; returns the index after its closing quote.
        let mut i = from + 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    let lead = |bytes: &[u8], at: usize, key: &[u8]| -> Option<usize> {
        let rest = bytes.get(at..)?;
        if !rest.starts_with(key) {
            return None;
        }
        let value = at + key.len();
        if bytes.get(value) != Some(&b'"') {
            return None;
        }
        let end = skip_string(bytes, value)?;
        match bytes.get(end) {
            Some(b',') => Some(end + 1),
            _ => None,
        }
    };
    if let Some(after_version) = lead(json, 1, b"\"apiVersion\":")
        && let Some(after_kind) = lead(json, after_version, b"\"kind\":")
        && json.first() == Some(&b'{')
    {
        let mut out = Vec::with_capacity(json.len() - after_kind + 1);
        out.push(b'{');
        out.extend_from_slice(&json[after_kind..]);
        return std::borrow::Cow::Owned(out);
    }
    match serde_json::from_slice::<Value>(json) {
        Ok(Value::Object(mut fields)) => {
            fields.remove("apiVersion");
            fields.remove("kind");
            std::borrow::Cow::Owned(serde_json::to_vec(&fields).unwrap_or_else(|_| json.to_vec()))
        }
        _ => std::borrow::Cow::Borrowed(json),
    }
}

#[cfg(test)]
mod tests {
    use super::without_type;

    #[test]
    fn list_items_lose_their_type_fields() {
        let cut = |s: &str| String::from_utf8(without_type(s.as_bytes()).into_owned()).unwrap();
        assert_eq!(
            cut(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}"#),
            r#"{"metadata":{"name":"a"}}"#
        );
        assert_eq!(
            cut(r#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#),
            r#"{"metadata":{}}"#
        );
        assert_eq!(
            cut(r#"{"apiVersion":"a\"b","kind":"K","x":1}"#),
            r#"{"x":1}"#
        );
    }
}
