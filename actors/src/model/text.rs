//! Text from the objects nmo reads, as nmo shows it.

use std::borrow::Cow;

/// `text` cut to at most `max` characters, marked when cut: what a NodeMaintenance's spec says
/// lands in every span of its trace and every log line of its actor, and in messages, so it is
/// bounded there whatever the object holds.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_and_marked() {
        assert_eq!(bounded("short", 256), "short");
        assert_eq!(bounded("ééé", 2), "éé…");
        let long = "é".repeat(1 << 20);
        assert_eq!(bounded(&long, 256).chars().count(), 257);
    }
}
